// Scalar E2M1 and E4M3fn codecs (nvfp4.md sections 1.1 and 1.3).
//
// Encoding works on the float's bits or on exact comparisons against representable thresholds, so the result
// never depends on the FPU rounding mode or on libm (std::nearbyint and friends honour fesetround).
#include "fp4moe/nvfp4.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace fp4moe::nvfp4 {

namespace {

constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// v >> s rounded to nearest, ties to even (1 <= s <= 31).
constexpr std::uint32_t shift_right_rne(std::uint32_t v, int s) {
    const std::uint32_t q = v >> s;
    const std::uint32_t rem = v & ((1u << s) - 1u);
    const std::uint32_t half = 1u << (s - 1);
    return (rem > half || (rem == half && (q & 1u))) ? q + 1u : q;
}

} // namespace

float e2m1_decode(std::uint8_t code) {
    const float v = kE2M1Values[code & 0x7u];
    return (code & 0x8u) ? -v : v;
}

std::uint8_t e2m1_encode(float x) {
    if (std::isnan(x)) return 0x7;
    const std::uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
    const float a = std::fabs(x);
    // Midpoints between neighbouring magnitudes are exact in float; at a midpoint pick the even code
    // (ModelOpt's _cast_fp4: searchsorted on these thresholds, +1 at 0.75, 1.75 and 3.5).
    std::uint8_t m;
    if (a <= 0.25f)
        m = 0;
    else if (a < 0.75f)
        m = 1;
    else if (a <= 1.25f)
        m = 2;
    else if (a < 1.75f)
        m = 3;
    else if (a <= 2.5f)
        m = 4;
    else if (a < 3.5f)
        m = 5;
    else if (a <= 5.0f)
        m = 6;
    else
        m = 7; // saturates: (5, inf] -> 6
    return sign | m;
}

float e4m3_decode(std::uint8_t code) {
    const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
    const std::uint32_t e = (code >> 3) & 0xFu;
    const std::uint32_t m = code & 0x7u;
    if (e == 0xFu && m == 0x7u) return std::bit_cast<float>(sign | 0x7FC00000u);
    if (e == 0) {
        // Subnormal: m * 2^-9, exact (m <= 7); rebuilt from the sign so that 0x80 decodes to -0.0.
        const float v = static_cast<float>(m) * 0x1p-9f;
        return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(v));
    }
    // Normal: re-bias the exponent (7 -> 127) and move the 3 mantissa bits to the top of float's 23.
    return std::bit_cast<float>(sign | ((e + 120u) << 23) | (m << 20));
}

std::uint8_t e4m3_encode(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
    const std::uint32_t mag = u & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) return sign | 0x7F;                             // NaN
    if (mag >= std::bit_cast<std::uint32_t>(kE4M3Max)) return sign | 0x7E; // SATFINITE, Inf included
    const int exp = static_cast<int>(mag >> 23) - 127;
    if (exp >= -6) {
        // E4M3 normal range: keep 3 of float's 23 mantissa bits; a carry out of the mantissa bumps the
        // exponent, which is the correct result. Below 448 the rounded value never exceeds 448.
        return sign | static_cast<std::uint8_t>(shift_right_rne(mag, 20) - (120u << 3));
    }
    // E4M3 subnormal range: the quantum is 2^-9, so the code is round(|x| * 2^9) (8 means 2^-6, code 0x08,
    // which is also the right bit pattern). Below 2^-12 the value is under a quarter quantum: zero.
    if (exp < -12) return sign;
    const std::uint32_t m24 = (mag & 0x7FFFFFu) | 0x800000u; // |x| = m24 * 2^(exp - 23)
    return sign | static_cast<std::uint8_t>(shift_right_rne(m24, 14 - exp));
}

} // namespace fp4moe::nvfp4
