// fp4moe public API: bfloat16 <-> float, bit-exact. bf16 is the upper half of an IEEE-754 binary32.
#pragma once

#include <bit>
#include <cstdint>

namespace fp4moe {

/// Bits of a bfloat16 value (no arithmetic on it: convert to float first).
struct bf16_t {
    std::uint16_t bits = 0;
};

inline float bf16_to_float(bf16_t v) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16);
}

/// Round-to-nearest-even; NaN stays a quiet NaN with its sign; overflow rounds to infinity as IEEE does.
inline bf16_t float_to_bf16(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return {static_cast<std::uint16_t>(u >> 16)};
}

} // namespace fp4moe
