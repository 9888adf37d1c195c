// safetensors writer. Output matches the Python library's layout (header padded with spaces to a multiple
// of 8 bytes, data contiguous), except that tensors keep the caller's order instead of being sorted.
#include "core/error.h"
#include "model/safetensors_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace fp4moe {
namespace {

std::string json_string(std::string_view s) {
    return nlohmann::json(std::string(s)).dump();
}

void check_utf8(std::string_view s, std::string_view path, std::string_view what) {
    if (detail::utf8_error_offset(s) != std::string_view::npos)
        fail(status_code::invalid_argument, "{}: {} is not valid UTF-8", path, what);
}

// Builds the padded header and checks every tensor against its shape.
std::string build_header(const std::string &path, std::span<const tensor_to_write> tensors,
                         const std::map<std::string, std::string> &metadata) {
    std::string h = "{";
    if (!metadata.empty()) {
        h += "\"__metadata__\":{";
        bool first = true;
        for (const auto &[k, v] : metadata) {
            check_utf8(k, path, fmt::format("metadata key '{}'", k));
            check_utf8(v, path, fmt::format("metadata value for key '{}'", k));
            h += fmt::format("{}{}:{}", first ? "" : ",", json_string(k), json_string(v));
            first = false;
        }
        h += "}";
    }
    std::set<std::string_view> names;
    std::uint64_t offset = 0;
    for (const auto &t : tensors) {
        if (t.name.empty()) fail(status_code::invalid_argument, "{}: a tensor has an empty name", path);
        if (t.name == "__metadata__")
            fail(status_code::invalid_argument, "{}: '__metadata__' is reserved and cannot name a tensor", path);
        check_utf8(t.name, path, fmt::format("tensor name '{}'", t.name));
        if (!names.insert(t.name).second)
            fail(status_code::invalid_argument, "{}: tensor '{}' is given twice", path, t.name);
        if (static_cast<unsigned>(t.type) > static_cast<unsigned>(dtype::boolean))
            fail(status_code::invalid_argument, "{}: tensor '{}': invalid dtype value {}", path, t.name,
                 static_cast<unsigned>(t.type));
        std::uint64_t nbytes = dtype_size(t.type);
        for (auto d : t.shape) {
            if (d < 0)
                fail(status_code::invalid_argument, "{}: tensor '{}': negative dimension in shape {}", path, t.name,
                     detail::format_shape(t.shape));
            if (__builtin_mul_overflow(nbytes, static_cast<std::uint64_t>(d), &nbytes))
                fail(status_code::invalid_argument, "{}: tensor '{}': shape {} is too large", path, t.name,
                     detail::format_shape(t.shape));
        }
        if (nbytes != t.data.size())
            fail(status_code::invalid_argument, "{}: tensor '{}': shape {} x {} = {} bytes but {} bytes given", path,
                 t.name, detail::format_shape(t.shape), dtype_name(t.type), nbytes, t.data.size());
        h += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", h.size() > 1 ? "," : "",
                         json_string(t.name), dtype_name(t.type), fmt::join(t.shape, ","), offset, offset + nbytes);
        offset += nbytes;
    }
    h += "}";
    h.append((8 - h.size() % 8) % 8, ' ');
    if (h.size() > kMaxSafetensorsHeader)
        fail(status_code::invalid_argument, "{}: header would be {} bytes, more than the {}-byte limit", path, h.size(),
             kMaxSafetensorsHeader);
    return h;
}

void write_all(int fd, const void *data, std::size_t size, const std::string &path) {
    const auto *p = static_cast<const char *>(data);
    while (size > 0) {
        ssize_t w = ::write(fd, p, size);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) fail(status_code::io_error, "{}: write failed: {}", path, std::strerror(errno));
        p += w;
        size -= static_cast<std::size_t>(w);
    }
}

} // namespace

status write_safetensors(const std::string &path, std::span<const tensor_to_write> tensors,
                         const std::map<std::string, std::string> &metadata) {
    return catch_status([&] {
        const std::string header = build_header(path, tensors, metadata);
        const std::string tmp = path + ".tmp";
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) fail(status_code::io_error, "{}: cannot create: {}", tmp, std::strerror(errno));
        try {
            unsigned char prefix[8];
            for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(header.size() >> (8 * i));
            write_all(fd, prefix, sizeof prefix, tmp);
            write_all(fd, header.data(), header.size(), tmp);
            for (const auto &t : tensors) write_all(fd, t.data.data(), t.data.size(), tmp);
            // NOTE: fsync before rename, or a crash can leave the new name pointing at an empty file.
            if (::fsync(fd) != 0) fail(status_code::io_error, "{}: fsync failed: {}", tmp, std::strerror(errno));
            int rc = ::close(fd);
            fd = -1;
            if (rc != 0) fail(status_code::io_error, "{}: close failed: {}", tmp, std::strerror(errno));
            if (std::rename(tmp.c_str(), path.c_str()) != 0)
                fail(status_code::io_error, "{}: cannot rename {} to it: {}", path, tmp, std::strerror(errno));
        } catch (...) {
            if (fd >= 0) ::close(fd);
            ::unlink(tmp.c_str());
            throw;
        }
    });
}

} // namespace fp4moe
