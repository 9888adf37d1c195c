// cpu.fast kernels, AVX2 + FMA (function target attributes: this file builds for baseline x86-64 and its
// code runs only after detect_cpu_features() said yes). E2M1 decode: pshufb of the 16 codes into int8
// 2*value, widened to int32, converted, times scale/2 (exact: at most 4 significant bits times an E4M3).
#include "backend/cpu/moe_fast_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace fp4moe::cpu::fast {
namespace {

#define FP4MOE_TARGET __attribute__((target("avx2,fma")))
constexpr int kLanes = 8;
constexpr int kTileM = 4; // 2 rows x 4 tokens = 8 accumulators + 4 weight vectors of 16 ymm
using vf = __m256;

FP4MOE_TARGET inline vf vzero() {
    return _mm256_setzero_ps();
}
FP4MOE_TARGET inline vf vload(const float *p) {
    return _mm256_loadu_ps(p);
}
FP4MOE_TARGET inline void vstore(float *p, vf a) {
    _mm256_storeu_ps(p, a);
}
FP4MOE_TARGET inline vf vfma(vf a, vf b, vf c) {
    return _mm256_fmadd_ps(a, b, c);
}
FP4MOE_TARGET inline float vreduce(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// 8 packed bytes -> 16 int8 values 2 * e2m1(code), element order (low nibble first).
FP4MOE_TARGET inline __m128i e2m1x2_codes(const std::uint8_t *q) {
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i nib = _mm_set1_epi8(0x0F);
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
    const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(b, nib), _mm_and_si128(_mm_srli_epi16(b, 4), nib));
    return _mm_shuffle_epi8(lut, codes);
}
// E4M3 -> fp32 by moving the bit fields: magnitude << 20 puts exponent and mantissa in place (bias 127 vs 7,
// fixed by a multiply by 2^120, times 1/2 for the half scale: 2^119; E4M3 subnormals become fp32 subnormals,
// exact too), sign << 24; 0x7F / 0xFF become NaN.
FP4MOE_TARGET inline __m256 e4m3x8_half(__m128i b8) {
    const __m256i v = _mm256_cvtepu8_epi32(b8);
    const __m256i mag = _mm256_and_si256(v, _mm256_set1_epi32(0x7F));
    const __m256i bits = _mm256_or_si256(_mm256_slli_epi32(mag, 20), _mm256_slli_epi32(_mm256_srli_epi32(v, 7), 31));
    const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p119f));
    const __m256 nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F)));
    return _mm256_blendv_ps(f, _mm256_set1_ps(__builtin_nanf("")), nan);
}
FP4MOE_TARGET inline void dq_scales16(const std::uint8_t *s, float *out) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    _mm256_storeu_ps(out, e4m3x8_half(b));
    _mm256_storeu_ps(out + 8, e4m3x8_half(_mm_unpackhi_epi64(b, b)));
}
FP4MOE_TARGET inline void dq_nvfp4(const std::uint8_t *q, float half_scale, vf *w) {
    const __m128i v = e2m1x2_codes(q);
    const __m256 s = _mm256_set1_ps(half_scale);
    w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), s);
    w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v))), s);
}
FP4MOE_TARGET inline vf bf16x8(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
FP4MOE_TARGET inline void dq_bf16(const bf16_t *p, vf *w) {
    w[0] = bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    w[1] = bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 8)));
}

#include "backend/cpu/moe_fast_tile.inc"

#undef FP4MOE_TARGET

} // namespace

const kernels &kernels_avx2() {
    static const kernels k{cpu_isa::avx2, kTileM, dot_nvfp4, dot_bf16};
    return k;
}

} // namespace fp4moe::cpu::fast

#else

namespace fp4moe::cpu::fast {
const kernels &kernels_avx2() {
    return kernels_scalar();
}
} // namespace fp4moe::cpu::fast

#endif
