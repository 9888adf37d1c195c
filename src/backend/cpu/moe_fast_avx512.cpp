// cpu.fast kernels, AVX-512 F/BW/VL (function target attributes, chosen at run time). One zmm holds a whole
// 16-element NVFP4 block: pshufb of the codes into int8 2*value, widened, converted, times scale/2 (exact).
#include "backend/cpu/moe_fast_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// NOTE: GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

namespace fp4moe::cpu::fast {
namespace {

#define FP4MOE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
constexpr int kLanes = 16;
constexpr int kTileM = 8; // 2 rows x 8 tokens = 16 accumulators of 32 zmm
using vf = __m512;

FP4MOE_TARGET inline vf vzero() {
    return _mm512_setzero_ps();
}
FP4MOE_TARGET inline vf vload(const float *p) {
    return _mm512_loadu_ps(p);
}
FP4MOE_TARGET inline void vstore(float *p, vf a) {
    _mm512_storeu_ps(p, a);
}
FP4MOE_TARGET inline vf vfma(vf a, vf b, vf c) {
    return _mm512_fmadd_ps(a, b, c);
}
FP4MOE_TARGET inline float vreduce(vf a) {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// E4M3 -> fp32 / 2 by moving bit fields (see moe_fast_avx2.cpp); 0x7F / 0xFF become NaN.
FP4MOE_TARGET inline void dq_scales16(const std::uint8_t *s, float *out) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s)));
    const __m512i mag = _mm512_and_si512(v, _mm512_set1_epi32(0x7F));
    const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(mag, 20), _mm512_slli_epi32(_mm512_srli_epi32(v, 7), 31));
    __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p119f));
    f = _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)),
                           _mm512_set1_ps(__builtin_nanf("")));
    _mm512_storeu_ps(out, f);
}
FP4MOE_TARGET inline void dq_nvfp4(const std::uint8_t *q, float half_scale, vf *w) {
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i nib = _mm_set1_epi8(0x0F);
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
    const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(b, nib), _mm_and_si128(_mm_srli_epi16(b, 4), nib));
    const __m128i v = _mm_shuffle_epi8(lut, codes);
    w[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)), _mm512_set1_ps(half_scale));
}
FP4MOE_TARGET inline void dq_bf16(const bf16_t *p, vf *w) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    w[0] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#include "backend/cpu/moe_fast_tile.inc"

#undef FP4MOE_TARGET

} // namespace

const kernels &kernels_avx512() {
    static const kernels k{cpu_isa::avx512, kTileM, dot_nvfp4, dot_bf16};
    return k;
}

} // namespace fp4moe::cpu::fast

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else

namespace fp4moe::cpu::fast {
const kernels &kernels_avx512() {
    return kernels_scalar();
}
} // namespace fp4moe::cpu::fast

#endif
