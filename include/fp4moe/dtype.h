// fp4moe public API: element types.
//
// The element types a checkpoint or a tensor can hold, named as safetensors names them. NVFP4 data is
// stored as `u8` (two E2M1 codes per byte, low nibble first) with `f8_e4m3` block scales; `nvfp4.h` has
// the codecs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fp4moe {

enum class dtype : std::uint8_t {
    f64,
    f32,
    f16,
    bf16,
    f8_e4m3, ///< E4M3 "fn": no infinities, NaN = 0x7F/0xFF, max 448
    f8_e5m2,
    i64,
    i32,
    i16,
    i8,
    u64,
    u32,
    u16,
    u8,
    boolean,
};

/// Bytes per element (every supported dtype is a whole number of bytes).
std::size_t dtype_size(dtype t);

/// The safetensors name ("F32", "BF16", "F8_E4M3", "U8", "BOOL", ...).
std::string_view dtype_name(dtype t);

/// Parses a safetensors dtype name; nullopt when unknown.
std::optional<dtype> dtype_from_name(std::string_view name);

} // namespace fp4moe
