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

// ---- NVFP4 with x in the p128 layout (moe_fast_kernels.h) ----
// A 128-element chunk is 64 packed bytes = 16 dwords; nibble k of dword l is element 8l + k, and the whole
// dword lies in block l / 2. With x transposed per chunk (x[k * 16 + l]), nibble k of all 16 dwords meets
// one contiguous 16-float load: decoding 16 weights is one shift + one vpermps (it reads only the low 4 bits
// of each index) into a 16-entry E2M1 table, 3 vector uops per 16 weights with the FMA, against ~9 for the
// per-block path. Block scales are applied once per chunk: for every (row, token) two partial sums of
// E2M1 * x (k even / odd: two FMA chains), then t += (a + b) * scale_lanes, lane l holding the E4M3 scale
// of block l / 2. The scratch path (many tokens) stores the same E2M1 floats and scale lanes and runs the
// same arithmetic, so a (row, token) gets the same bits for any m and any row grouping.
constexpr int kP128TileM = 3;            // 2 rows x 3 tokens x 3 accumulators (+ codes, table) in 32 zmm
constexpr std::int64_t kPrefetch = 1024; // bytes ahead on the packed-code stream (and / 8 on the scales)

// 16 E4M3 bytes -> fp32 (see moe_fast_avx2.cpp; 2^120 instead of 2^119: the full scale).
FP4MOE_TARGET inline __m512 e4m3x16(__m128i b) {
    const __m512i v = _mm512_cvtepu8_epi32(b);
    const __m512i mag = _mm512_and_si512(v, _mm512_set1_epi32(0x7F));
    const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(mag, 20), _mm512_slli_epi32(_mm512_srli_epi32(v, 7), 31));
    const __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
    return _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)),
                              _mm512_set1_ps(__builtin_nanf("")));
}

struct p128_rows {
    const std::uint8_t *q[4] = {};
    const std::uint8_t *s[4] = {};
    const float *w[4] = {};  // scratch: E2M1 floats of the row (K)
    const float *sl[4] = {}; // scratch: scale lanes of the row (16 per chunk)
};

// Scale lanes of chunk c given the decoded scales of its chunk pair.
FP4MOE_TARGET inline __m512 scale_lanes(__m512 pair, std::int64_t c) {
    const __m512i lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(c & 1 ? _mm512_add_epi32(lo, _mm512_set1_epi32(8)) : lo, pair);
}
FP4MOE_TARGET inline __m512 scale_pair(const std::uint8_t *s, std::int64_t c, std::int64_t nch) {
    const auto *p = reinterpret_cast<const __m128i *>(s + c * 8);
    return e4m3x16(c + 1 < nch ? _mm_loadu_si128(p) : _mm_loadl_epi64(p));
}
FP4MOE_TARGET inline __m512 e2m1_table() {
    return _mm512_setr_ps(0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6);
}

// out[r][j0 + j] for r < R, j < M over nch chunks; kScratch: weights from rows.w / rows.sl.
template <int R, int M, bool kScratch>
FP4MOE_TARGET void p128_tile(const p128_rows &rows, std::int64_t nch, const float *const *x, float *const *out,
                             int j0) {
    const __m512 lut = e2m1_table();
    __m512 t[R][M], pair[R];
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < M; ++j) t[r][j] = _mm512_setzero_ps();
    for (std::int64_t c = 0; c < nch; ++c) {
        __m512 sv[R];
        __m512i qv[R];
        for (int r = 0; r < R; ++r) {
            if constexpr (kScratch) {
                sv[r] = _mm512_loadu_ps(rows.sl[r] + c * 16);
            } else {
                if ((c & 1) == 0) pair[r] = scale_pair(rows.s[r], c, nch);
                sv[r] = scale_lanes(pair[r], c);
                qv[r] = _mm512_loadu_si512(rows.q[r] + c * 64);
                _mm_prefetch(reinterpret_cast<const char *>(rows.q[r] + c * 64 + kPrefetch), _MM_HINT_T0);
                if ((c & 7) == 0)
                    _mm_prefetch(reinterpret_cast<const char *>(rows.s[r] + c * 8 + kPrefetch / 8), _MM_HINT_T0);
            }
        }
        __m512 a[R][M], b[R][M];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            __m512 w[R];
            for (int r = 0; r < R; ++r) {
                if constexpr (kScratch) {
                    w[r] = _mm512_loadu_ps(rows.w[r] + c * 128 + k * 16);
                } else {
                    w[r] = _mm512_permutexvar_ps(qv[r], lut);
                    qv[r] = _mm512_srli_epi32(qv[r], 4);
                }
            }
            for (int j = 0; j < M; ++j) {
                const __m512 xv = _mm512_loadu_ps(x[j0 + j] + c * 128 + k * 16);
                for (int r = 0; r < R; ++r) {
                    __m512 &acc = k % 2 ? b[r][j] : a[r][j];
                    if (k < 2)
                        acc = _mm512_mul_ps(w[r], xv);
                    else
                        acc = _mm512_fmadd_ps(w[r], xv, acc);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int j = 0; j < M; ++j) t[r][j] = _mm512_fmadd_ps(_mm512_add_ps(a[r][j], b[r][j]), sv[r], t[r][j]);
    }
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < M; ++j) out[r][j0 + j] = vreduce(t[r][j]);
}

// Token tiles of 3 (decoding: the codes take registers) or 4 (from scratch: 8 FMAs per 6 loads).
template <int R, bool kScratch>
FP4MOE_TARGET void p128_tiles(const p128_rows &rows, std::int64_t nch, const float *const *x, int m,
                              float *const *out) {
    constexpr int kTile = kScratch ? 4 : kP128TileM;
    for (int j0 = 0; j0 < m; j0 += kTile) {
        switch (m - j0) {
        case 1:
            p128_tile<R, 1, kScratch>(rows, nch, x, out, j0);
            break;
        case 2:
            p128_tile<R, 2, kScratch>(rows, nch, x, out, j0);
            break;
        case 3:
            p128_tile<R, 3, kScratch>(rows, nch, x, out, j0);
            break;
        default:
            p128_tile<R, kTile, kScratch>(rows, nch, x, out, j0);
        }
    }
}

// Rows r0 .. r0 + R of the job (R <= 2) decoded into scratch: E2M1 floats (K each), then scale lanes (K / 8).
FP4MOE_TARGET p128_rows p128_to_scratch(const dot_job &jb, int r0, int R) {
    const std::int64_t nch = jb.k / 128;
    const __m512 lut = e2m1_table();
    p128_rows rows;
    for (int r = 0; r < R; ++r) {
        float *w = jb.scratch + r * jb.k, *sl = jb.scratch + 2 * jb.k + r * (jb.k / 8);
        const std::uint8_t *q = jb.q[r0 + r], *s = jb.s[r0 + r];
        __m512 pair = _mm512_setzero_ps();
        for (std::int64_t c = 0; c < nch; ++c) {
            if ((c & 1) == 0) pair = scale_pair(s, c, nch);
            _mm512_storeu_ps(sl + c * 16, scale_lanes(pair, c));
            __m512i qv = _mm512_loadu_si512(q + c * 64);
            for (int k = 0; k < 8; ++k, qv = _mm512_srli_epi32(qv, 4))
                _mm512_storeu_ps(w + c * 128 + k * 16, _mm512_permutexvar_ps(qv, lut));
        }
        rows.w[r] = w;
        rows.sl[r] = sl;
    }
    return rows;
}

FP4MOE_TARGET void dot_nvfp4_p128(const dot_job &jb) {
    const std::int64_t nch = jb.k / 128;
    if (jb.rows == 4 && jb.m == 1) {
        p128_rows rows;
        for (int r = 0; r < 4; ++r) rows.q[r] = jb.q[r], rows.s[r] = jb.s[r];
        p128_tile<4, 1, false>(rows, nch, jb.x, jb.out, 0);
        return;
    }
    for (int r0 = 0; r0 < jb.rows; r0 += 2) {
        const int R = jb.rows - r0 < 2 ? 1 : 2;
        float *const *out = jb.out + r0;
        if (jb.m > kP128TileM) {
            const p128_rows rows = p128_to_scratch(jb, r0, R);
            if (R == 2)
                p128_tiles<2, true>(rows, nch, jb.x, jb.m, out);
            else
                p128_tiles<1, true>(rows, nch, jb.x, jb.m, out);
        } else {
            p128_rows rows;
            for (int r = 0; r < R; ++r) rows.q[r] = jb.q[r0 + r], rows.s[r] = jb.s[r0 + r];
            if (R == 2)
                p128_tiles<2, false>(rows, nch, jb.x, jb.m, out);
            else
                p128_tiles<1, false>(rows, nch, jb.x, jb.m, out);
        }
    }
}

#undef FP4MOE_TARGET

} // namespace

const kernels &kernels_avx512() {
    static const kernels k{cpu_isa::avx512, kTileM, dot_nvfp4, dot_bf16, dot_nvfp4_p128};
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
