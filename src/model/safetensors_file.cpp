// safetensors reader: one mmapped file, and checkpoints (single file, directory, or sharded by index).
#include "core/error.h"
#include "model/safetensors_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

namespace fp4moe {

static_assert(sizeof(std::size_t) == 8, "fp4moe maps whole files and needs a 64-bit address space");

namespace {

namespace fs = std::filesystem;

struct fd_guard {
    int fd = -1;
    ~fd_guard() {
        if (fd >= 0) ::close(fd);
    }
};

[[noreturn]] void fail_errno(std::string_view path, std::string_view what, int err) {
    fail(err == ENOENT ? status_code::not_found : status_code::io_error, "{}: {}: {}", path, what, std::strerror(err));
}

// Opens `path` read-only and checks it is a regular file; returns its size.
std::uint64_t open_regular(const std::string &path, fd_guard &g) {
    // NOTE: O_NONBLOCK so that a FIFO cannot hang the open; it has no effect on regular files.
    g.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (g.fd < 0) fail_errno(path, "cannot open", errno);
    struct stat st {};
    if (::fstat(g.fd, &st) != 0) fail_errno(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) fail(status_code::io_error, "{}: not a regular file", path);
    return static_cast<std::uint64_t>(st.st_size);
}

std::string read_small_file(const std::string &path, std::uint64_t limit) {
    fd_guard g;
    std::uint64_t size = open_regular(path, g);
    if (size > limit)
        fail(status_code::corrupt, "{}: file is {} bytes, more than the {}-byte limit", path, size, limit);
    std::string text(size, '\0');
    std::size_t got = 0;
    while (got < size) {
        ssize_t r = ::read(g.fd, text.data() + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail_errno(path, "read failed", errno);
        if (r == 0) fail(status_code::io_error, "{}: file shrank while being read", path);
        got += static_cast<std::size_t>(r);
    }
    return text;
}

} // namespace

struct safetensors_file::impl {
    std::string path;
    void *map = nullptr;
    std::size_t map_size = 0;
    const std::byte *data_base = nullptr; ///< start of the data buffer inside the mapping
    std::uint64_t data_size = 0;
    safetensors_header header;
    std::vector<std::uint32_t> by_name; ///< indices into header.tensors, sorted by name

    ~impl() {
        if (map) ::munmap(map, map_size);
    }
};

safetensors_file::safetensors_file(std::unique_ptr<impl> p) : p_(std::move(p)) {}
safetensors_file::safetensors_file(safetensors_file &&) noexcept = default;
safetensors_file &safetensors_file::operator=(safetensors_file &&) noexcept = default;
safetensors_file::~safetensors_file() = default;

result<safetensors_file> safetensors_file::open(const std::string &path) {
    auto p = std::make_unique<impl>();
    p->path = path;
    status st = catch_status([&] {
        fd_guard g;
        std::uint64_t size = open_regular(path, g);
        // NOTE: mmap of 0 bytes fails with EINVAL; short files are rejected before mapping.
        if (size < 8)
            fail(status_code::corrupt, "{}: file is {} bytes, too short for the 8-byte header length", path, size);
        void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, g.fd, 0);
        if (m == MAP_FAILED) fail_errno(path, "mmap failed", errno);
        p->map = m;
        p->map_size = size;
        std::span<const std::byte> bytes(static_cast<const std::byte *>(m), size);
        auto layout = detail::parse_file_bytes(bytes, path);
        p->data_base = bytes.data() + 8 + layout.header_size;
        p->data_size = size - 8 - layout.header_size;
        p->header = std::move(layout.header);
    });
    if (!st.ok()) return st;
    const auto &ts = p->header.tensors;
    p->by_name.resize(ts.size());
    for (std::uint32_t i = 0; i < p->by_name.size(); ++i) p->by_name[i] = i;
    std::sort(p->by_name.begin(), p->by_name.end(), [&](auto a, auto b) { return ts[a].name < ts[b].name; });
    return safetensors_file(std::move(p));
}

const std::string &safetensors_file::path() const {
    return p_->path;
}
const std::vector<tensor_info> &safetensors_file::tensors() const {
    return p_->header.tensors;
}
const std::map<std::string, std::string> &safetensors_file::metadata() const {
    return p_->header.metadata;
}
std::uint64_t safetensors_file::file_size() const {
    return p_->map_size;
}

const tensor_info *safetensors_file::find(std::string_view name) const {
    const auto &ts = p_->header.tensors;
    auto it = std::lower_bound(p_->by_name.begin(), p_->by_name.end(), name,
                               [&](std::uint32_t i, std::string_view n) { return ts[i].name < n; });
    if (it == p_->by_name.end() || ts[*it].name != name) return nullptr;
    return &ts[*it];
}

std::span<const std::byte> safetensors_file::data(const tensor_info &t) const {
    // A tensor_info from another file (or edited by hand) must not read outside this mapping.
    FP4MOE_ASSERT(t.begin <= t.end && t.end <= p_->data_size);
    return {p_->data_base + t.begin, static_cast<std::size_t>(t.nbytes())};
}

namespace {

struct shard_map {
    std::map<std::string, std::vector<std::string>> tensors_by_shard;
};

shard_map read_index(const std::string &index_path) {
    nlohmann::json doc = detail::parse_json_strict(read_small_file(index_path, kMaxSafetensorsHeader), index_path);
    if (!doc.is_object()) fail(status_code::corrupt, "{}: not a JSON object", index_path);
    auto wm = doc.find("weight_map");
    if (wm == doc.end() || !wm->is_object())
        fail(status_code::corrupt, "{}: \"weight_map\" is missing or not an object", index_path);
    shard_map m;
    for (const auto &[name, shard] : wm->items()) {
        if (!shard.is_string())
            fail(status_code::corrupt, "{}: weight_map entry for tensor '{}' is not a string", index_path, name);
        const auto &file = shard.get_ref<const std::string &>();
        // Shards sit beside the index; a path would let a downloaded index reach any file on the machine.
        if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos)
            fail(status_code::corrupt, "{}: weight_map entry for tensor '{}' is '{}', not a plain file name",
                 index_path, name, file);
        m.tensors_by_shard[file].push_back(name);
    }
    return m;
}

} // namespace

result<checkpoint> checkpoint::open(const std::string &path) {
    checkpoint c;
    c.path_ = path;
    status st = catch_status([&] {
        std::error_code ec;
        auto kind = fs::status(path, ec).type();
        if (kind == fs::file_type::not_found) fail(status_code::not_found, "{}: no such file or directory", path);
        if (ec) fail(status_code::io_error, "{}: cannot stat: {}", path, ec.message());

        auto open_file = [&](const std::string &p) {
            auto f = safetensors_file::open(p);
            if (!f.ok()) throw error(f.get_status().code(), f.get_status().message());
            c.files_.push_back(std::move(f).value());
        };
        shard_map shards;
        std::string index_path;
        if (kind == fs::file_type::regular) {
            open_file(path);
        } else if (kind == fs::file_type::directory) {
            const fs::path dir(path);
            index_path = (dir / "model.safetensors.index.json").string();
            const std::string single = (dir / "model.safetensors").string();
            if (fs::exists(index_path, ec)) {
                shards = read_index(index_path);
                c.files_.reserve(shards.tensors_by_shard.size());
                for (const auto &[file, names] : shards.tensors_by_shard) {
                    const std::string shard_path = (dir / file).string();
                    if (!fs::exists(shard_path, ec))
                        fail(status_code::not_found, "{}: shard '{}' (holding tensor '{}') does not exist", index_path,
                             file, names.front());
                    open_file(shard_path);
                    for (const auto &name : names)
                        if (!c.files_.back().find(name))
                            fail(status_code::corrupt, "{}: tensor '{}' is mapped to {} but that file does not hold it",
                                 index_path, name, shard_path);
                }
            } else if (fs::exists(single, ec)) {
                open_file(single);
            } else {
                fail(status_code::not_found,
                     "{}: directory has neither model.safetensors nor "
                     "model.safetensors.index.json",
                     path);
            }
        } else {
            fail(status_code::invalid_argument, "{}: not a file or directory", path);
        }

        for (const auto &f : c.files_)
            for (const auto &t : f.tensors()) c.tensors_.push_back({&f, &t});
        std::sort(c.tensors_.begin(), c.tensors_.end(),
                  [](const entry &a, const entry &b) { return a.info->name < b.info->name; });
        for (std::size_t i = 1; i < c.tensors_.size(); ++i)
            if (c.tensors_[i].info->name == c.tensors_[i - 1].info->name)
                fail(status_code::corrupt, "{}: tensor '{}' is in both {} and {}",
                     index_path.empty() ? path : index_path, c.tensors_[i].info->name, c.tensors_[i - 1].file->path(),
                     c.tensors_[i].file->path());
    });
    if (!st.ok()) return st;
    return c;
}

checkpoint::entry checkpoint::find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const entry &e, std::string_view n) { return e.info->name < n; });
    if (it == tensors_.end() || it->info->name != name) return {};
    return *it;
}

} // namespace fp4moe
