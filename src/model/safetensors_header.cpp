// safetensors header parsing and validation. Everything here is pure (no I/O) so the fuzz target can
// drive it; every check that guards a later read of the data buffer lives in parse_header_or_throw.
#include "core/error.h"
#include "model/safetensors_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

namespace fp4moe {
namespace detail {
namespace {

constexpr int kMaxJsonDepth = 16;
constexpr std::size_t kMaxShapeShown = 8;

using json = nlohmann::json;

// A JSON value's type for error messages ("number", "string", ...).
std::string_view type_of(const json &v) {
    if (v.is_number_unsigned() || v.is_number_integer()) return "integer";
    return v.type_name();
}

std::uint64_t require_dim(const json &v, std::string_view label, const std::string &name, std::size_t i) {
    if (v.is_number_unsigned()) {
        auto d = v.get<std::uint64_t>();
        if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            fail(status_code::corrupt, "{}: tensor '{}': shape dimension {} is {}, larger than 2^63 - 1", label, name,
                 i, d);
        return d;
    }
    if (v.is_number_integer())
        fail(status_code::corrupt, "{}: tensor '{}': shape dimension {} is negative ({})", label, name, i,
             v.get<std::int64_t>());
    fail(status_code::corrupt, "{}: tensor '{}': shape dimension {} is not a non-negative integer (got {})", label,
         name, i, type_of(v));
}

const json &require_field(const json &entry, const char *field, std::string_view label, const std::string &name) {
    auto it = entry.find(field);
    if (it == entry.end()) fail(status_code::corrupt, "{}: tensor '{}': missing \"{}\"", label, name, field);
    return *it;
}

tensor_info parse_entry(const std::string &name, const json &entry, std::uint64_t data_size, std::string_view label) {
    if (!entry.is_object())
        fail(status_code::corrupt, "{}: tensor '{}': entry is not an object (got {})", label, name, type_of(entry));
    tensor_info t;
    t.name = name;

    const json &dt = require_field(entry, "dtype", label, name);
    if (!dt.is_string())
        fail(status_code::corrupt, "{}: tensor '{}': \"dtype\" is not a string (got {})", label, name, type_of(dt));
    auto type = dtype_from_name(dt.get_ref<const std::string &>());
    if (!type)
        fail(status_code::corrupt, "{}: tensor '{}': unknown dtype '{}'", label, name,
             dt.get_ref<const std::string &>());
    t.type = *type;

    const json &sh = require_field(entry, "shape", label, name);
    if (!sh.is_array())
        fail(status_code::corrupt, "{}: tensor '{}': \"shape\" is not an array (got {})", label, name, type_of(sh));
    t.shape.reserve(sh.size());
    // Like the reference implementation, any intermediate overflow is an error even if a later dim is 0.
    std::uint64_t numel = 1;
    bool overflow = false;
    for (std::size_t i = 0; i < sh.size(); ++i) {
        std::uint64_t d = require_dim(sh[i], label, name, i);
        t.shape.push_back(static_cast<std::int64_t>(d));
        overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
    }
    if (overflow)
        fail(status_code::corrupt, "{}: tensor '{}': shape {} has more than 2^64 elements", label, name,
             format_shape(t.shape));

    const json &off = require_field(entry, "data_offsets", label, name);
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        fail(status_code::corrupt, "{}: tensor '{}': \"data_offsets\" must be [begin, end] with non-negative integers",
             label, name);
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end)
        fail(status_code::corrupt, "{}: tensor '{}': data_offsets [{}, {}] begin after end", label, name, t.begin,
             t.end);
    if (t.end > data_size)
        fail(status_code::corrupt, "{}: tensor '{}': data_offsets [{}, {}] run past the {}-byte data buffer", label,
             name, t.begin, t.end, data_size);

    std::uint64_t nbytes = 0;
    const bool too_big = __builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtype_size(t.type)), &nbytes);
    if (too_big || nbytes != t.nbytes())
        fail(status_code::corrupt, "{}: tensor '{}': shape {} x {} = {} bytes but data_offsets span {}", label, name,
             format_shape(t.shape), dtype_name(t.type),
             too_big ? std::string("2^64 or more") : fmt::format("{}", nbytes), t.nbytes());
    return t;
}

void parse_metadata(const json &m, std::map<std::string, std::string> &out, std::string_view label) {
    if (!m.is_object()) fail(status_code::corrupt, "{}: \"__metadata__\" is not an object (got {})", label, type_of(m));
    for (const auto &[k, v] : m.items()) {
        if (!v.is_string())
            fail(status_code::corrupt, "{}: \"__metadata__\" value for key '{}' is not a string (got {})", label, k,
                 type_of(v));
        out.emplace(k, v.get<std::string>());
    }
}

} // namespace

std::size_t utf8_error_offset(std::string_view s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len;
        std::uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07;
        } else {
            return i; // continuation byte first, C0/C1 (always overlong), or F5..FF
        }
        if (n - i < len) return i;
        for (std::size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return i;
        if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return i;
        i += len;
    }
    return std::string_view::npos;
}

std::string format_shape(std::span<const std::int64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size() && i < kMaxShapeShown; ++i)
        s += fmt::format("{}{}", i ? ", " : "", shape[i]);
    if (shape.size() > kMaxShapeShown) s += fmt::format(", ... ({} dims)", shape.size());
    return s + "]";
}

json parse_json_strict(std::string_view text, std::string_view label) {
    if (auto bad = utf8_error_offset(text); bad != std::string_view::npos)
        fail(status_code::corrupt, "{}: header is not valid UTF-8 (byte {} of the JSON)", label, bad);

    // One key set per open object; the callback sees every key before the DOM merges duplicates.
    std::vector<std::set<std::string>> keys;
    std::string duplicate;
    bool too_deep = false;
    auto cb = [&](int depth, json::parse_event_t ev, json &parsed) {
        switch (ev) {
        case json::parse_event_t::object_start:
            keys.emplace_back();
            [[fallthrough]];
        case json::parse_event_t::array_start:
            if (depth >= kMaxJsonDepth) too_deep = true;
            break;
        case json::parse_event_t::object_end:
            if (!keys.empty()) keys.pop_back();
            break;
        case json::parse_event_t::key:
            if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
                duplicate = parsed.get<std::string>();
            break;
        default:
            break;
        }
        return !too_deep; // returning false discards the value, keeping a deep nest from growing the DOM
    };
    json doc;
    try {
        doc = json::parse(text.begin(), text.end(), cb);
    } catch (const json::exception &e) {
        fail(status_code::corrupt, "{}: header is not valid JSON: {}", label, e.what());
    }
    if (too_deep) fail(status_code::corrupt, "{}: header nests JSON deeper than {} levels", label, kMaxJsonDepth);
    if (!duplicate.empty()) fail(status_code::corrupt, "{}: header repeats the key '{}'", label, duplicate);
    return doc;
}

safetensors_header parse_header_or_throw(std::string_view text, std::uint64_t data_size, std::string_view label) {
    if (text.size() > kMaxSafetensorsHeader)
        fail(status_code::corrupt, "{}: header is {} bytes, more than the {}-byte limit", label, text.size(),
             kMaxSafetensorsHeader);
    json doc = parse_json_strict(text, label);
    if (!doc.is_object()) fail(status_code::corrupt, "{}: header is not a JSON object (got {})", label, type_of(doc));

    safetensors_header h;
    h.tensors.reserve(doc.size());
    for (const auto &[name, entry] : doc.items()) {
        if (name == "__metadata__")
            parse_metadata(entry, h.metadata, label);
        else
            h.tensors.push_back(parse_entry(name, entry, data_size, label));
    }

    // File order is data order; a zero-size tensor sorts before a tensor starting at the same offset.
    std::sort(h.tensors.begin(), h.tensors.end(), [](const tensor_info &a, const tensor_info &b) {
        return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    const tensor_info *prev = nullptr; // the last non-empty tensor seen
    for (const auto &t : h.tensors) {
        if (t.begin == t.end) continue;
        if (prev && t.begin < prev->end)
            fail(status_code::corrupt, "{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", label, prev->name,
                 prev->begin, prev->end, t.name, t.begin, t.end);
        prev = &t;
    }
    return h;
}

safetensors_layout parse_file_bytes(std::span<const std::byte> file, std::string_view label) {
    if (file.size() < 8)
        fail(status_code::corrupt, "{}: file is {} bytes, too short for the 8-byte header length", label, file.size());
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(file[i]);
    if (n > kMaxSafetensorsHeader)
        fail(status_code::corrupt, "{}: header length {} is more than the {}-byte limit", label, n,
             kMaxSafetensorsHeader);
    if (n > file.size() - 8)
        fail(status_code::corrupt, "{}: header length {} runs past the end of the {}-byte file", label, n, file.size());
    std::string_view text(reinterpret_cast<const char *>(file.data()) + 8, n);
    return {n, parse_header_or_throw(text, file.size() - 8 - n, label)};
}

} // namespace detail

std::int64_t tensor_info::numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

result<safetensors_header> parse_safetensors_header(std::string_view json, std::uint64_t data_size,
                                                    std::string_view label) {
    safetensors_header h;
    status st = catch_status([&] { h = detail::parse_header_or_throw(json, data_size, label); });
    if (!st.ok()) return st;
    return h;
}

} // namespace fp4moe
