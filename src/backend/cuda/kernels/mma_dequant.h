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

/// Register j (0..3) of an A fragment from a packed word (bit layout in src/quant/mma_pack.h) as a bf16x2 (low
/// half first), each its E2M1 value x 2^-126. Registers 0..2 are stored at their bf16 bit positions shifted
/// right by 3j: one shift and one mask. Register 3 holds the 8 bits left over: three shifts and three masks.
template <int J>
FP4MOE_HD std::uint32_t e2m1x2_to_bf16x2(std::uint32_t word) {
    if constexpr (J < 3) {
        return (word << (3 * J)) & 0x81C081C0u;
    } else {
        return ((word << 1) & 0x80008000u) | ((word >> 4) & 0x00C000C0u) | ((word >> 5) & 0x01000100u);
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
