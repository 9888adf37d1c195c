// Private to src/model/safetensors*.cpp and the fuzz target: throwing parsers behind the public API.
#pragma once

#include "fp4moe/safetensors.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fp4moe::detail {

/// Offset of the first byte that breaks RFC 3629 UTF-8 (overlong forms, surrogates, > U+10FFFF and
/// truncated sequences included), or `npos` when `s` is valid.
std::size_t utf8_error_offset(std::string_view s);

/// Parses JSON text with the checks nlohmann does not make: the text must be valid UTF-8, no object may
/// repeat a key (nlohmann keeps the last one silently), nesting is at most 16 deep. Throws
/// `fp4moe::error` (corrupt) whose message starts with `label`.
nlohmann::json parse_json_strict(std::string_view text, std::string_view label);

/// Throwing form of `parse_safetensors_header`.
safetensors_header parse_header_or_throw(std::string_view json, std::uint64_t data_size, std::string_view label);

/// A whole file's bytes, split and validated.
struct safetensors_layout {
    std::uint64_t header_size = 0; ///< N, the JSON length; the data buffer starts at 8 + N
    safetensors_header header;
};

/// Validates the 8-byte length prefix and the header of a complete file held in memory; throws.
safetensors_layout parse_file_bytes(std::span<const std::byte> file, std::string_view label);

/// "[4, 8]"; long shapes are cut after 8 dimensions so hostile headers cannot make huge messages.
std::string format_shape(std::span<const std::int64_t> shape);

} // namespace fp4moe::detail
