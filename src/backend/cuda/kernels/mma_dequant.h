// NVFP4 -> bf16 fragment dequantization of the mma_pack layout (src/quant/mma_pack.h), as inline functions that
// compile for the device and for the host, so the CPU tests check the bit tricks the kernels use.
//
// An E2M1 code s e1 e0 m placed in bf16 bits as sign -> bit 15 and e1 e0 m -> bits 8..6 is its value x 2^-126
// (exponent field e1 e0, mantissa m0..: normal for e1 e0 != 0, subnormal 0.5 x 2^-126 for code 1). A scale code
// c (E5M3, mma_pack.h) becomes the bf16 0x7000 | c << 4 = scale x 2^112. Their product is w x 2^-14, exact.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FP4MOE_HD __host__ __device__ __forceinline__
#else
#define FP4MOE_HD inline
#endif

namespace fp4moe::cuda {

/// Register 3's bits in a packed word (e0 e1 . sign m at 0, 1, 3, 4 and 16, 17, 19, 20) and the multiplier that
/// moves them to their bf16 places (m to 6 by x4, e0 e1 to 7 8 by x128, the sign to 15 by x4096).
inline constexpr std::uint32_t kRegister3Bits = 0x001B001Bu;
inline constexpr std::uint32_t kRegister3Spread = (1u << 2) | (1u << 7) | (1u << 12);

/// A 32-bit rotate left by R (one funnel shift, SHF.L.W, on the device).
template <int R>
FP4MOE_HD std::uint32_t rotl32(std::uint32_t w) {
    static_assert(R > 0 && R < 32, "rotate by 1..31");
#if defined(__CUDA_ARCH__)
    return __funnelshift_l(w, w, R);
#else
    return w << R | w >> (32 - R);
#endif
}

/// Register j (0..3) of an A fragment from a packed word (bit layout in src/quant/mma_pack.h) as a bf16x2 (low
/// half first), each its E2M1 value x 2^-126. Register 0 is stored at its bf16 bit positions (one mask), registers
/// 1 and 2 rotated right by 10 and 13 (a funnel shift and a mask each). Register 3 holds the eight bits left over,
/// at 0, 1, 3, 4 (+16): one multiply by 2^2 + 2^7 + 2^12 adds three shifted copies of them, whose sums land every
/// bit where the mask keeps it and carry into no kept bit (checked for all 256 values by the CPU test), so it is a
/// mask, an IMAD and a mask. In the decode kernels' SASS that is 5 LOP3 + 2 SHF + 1 IMAD per word, where the
/// shifts-only layout before it took 6 LOP3 + 2 SHF + 3 IMAD (bench/results/h200/NOTES.md, thirty-ninth session).
template <int J>
FP4MOE_HD std::uint32_t e2m1x2_to_bf16x2(std::uint32_t word) {
    static_assert(J >= 0 && J < 4, "an A fragment has four registers");
    constexpr std::uint32_t kPair = 0x81C081C0u; // sign at 15 and e1 e0 m at 8..6, in each half
    if constexpr (J == 0) {
        return word & kPair;
    } else if constexpr (J == 1) {
        return rotl32<10>(word) & kPair;
    } else if constexpr (J == 2) {
        return rotl32<13>(word) & kPair;
    } else {
        return ((word & kRegister3Bits) * kRegister3Spread) & kPair;
    }
}

/// bf16x2 with scale code byte `I` (0..3) of `codes` in both halves: scale x 2^112 twice. Written as a multiply-add
/// (c x 16 + 0x7000 per half; c x 16 < 0x1000, so no carry crosses a field): one IMAD after the byte permute.
template <int I>
FP4MOE_HD std::uint32_t scale_code_to_bf16x2(std::uint32_t codes) {
#if defined(__CUDA_ARCH__)
    const std::uint32_t dup = __byte_perm(codes, 0u, I | 4 << 4 | I << 8 | 4 << 12);
#else
    const std::uint32_t b = (codes >> (8 * I)) & 0xFFu;
    const std::uint32_t dup = b | b << 16;
#endif
    return dup * 16u + 0x70007000u;
}

/// The product's scale: packed weights times scales are w x 2^-14 (mma_pack::kScaleCodeBias).
inline constexpr float kPackedProductScale = 16384.0f;

} // namespace fp4moe::cuda
