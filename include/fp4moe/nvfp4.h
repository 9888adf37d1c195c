// fp4moe public API: the NVFP4 format (reference codecs, ModelOpt quantization, scale layouts).
//
// NVFP4 = FP4 E2M1 elements, one FP8 E4M3 scale per 16 consecutive elements along K, one FP32 scale per
// tensor. Every function here is the bit-exact reference of shared/reference/nvfp4.md; kernels are checked
// against it. All functions are pure and thread-safe.
#pragma once

#include "fp4moe/bf16.h"
#include "fp4moe/status.h"

#include <cstdint>
#include <span>
#include <vector>

namespace fp4moe::nvfp4 {

inline constexpr int kBlock = 16;         ///< elements per E4M3 block scale (along K)
inline constexpr float kE2M1Max = 6.0f;   ///< largest |E2M1| value
inline constexpr float kE4M3Max = 448.0f; ///< largest finite |E4M3| value

// ---- scalar codecs ------------------------------------------------------------------------------------

/// Value of an E2M1 code (low 4 bits of `code` used): s e1 e0 m. Exact in float.
float e2m1_decode(std::uint8_t code);

/// Nearest E2M1 code to `x`, ties to the even code, |x| > 6 saturates to ±6. -0.0 and values that round to
/// zero keep their sign bit (as `cvt.rn.satfinite.e2m1x2`). NaN maps to +6 (0x7), matching ModelOpt's
/// searchsorted; quantize() rejects NaN before it gets here.
std::uint8_t e2m1_encode(float x);

/// Value of an E4M3 "fn" code: bias 7, subnormals, 0x7F/0xFF are NaN, no infinities.
float e4m3_decode(std::uint8_t code);

/// Nearest E4M3 code to `x`, ties to even, |x| beyond 448 saturates to ±448 (SATFINITE, as
/// `__nv_fp8_e4m3(float)`); ±Inf saturates too; NaN gives 0x7F (0xFF if the sign bit is set).
std::uint8_t e4m3_encode(float x);

// ---- matrices -----------------------------------------------------------------------------------------

/// An NVFP4 matrix in the checkpoint layout (row-major, N rows of K elements):
///   packed  [N, K/2]  u8: element 2j in the low nibble of byte j, 2j+1 in the high nibble;
///   scales  [N, K/16] E4M3 bytes, linear row-major (not swizzled);
///   global_scale      the *decode* scale ModelOpt stores as `weight_scale_2` (= amax / 2688).
/// Dequantized element: e2m1(q) * e4m3(scale) * global_scale.
struct matrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::vector<std::uint8_t> packed;
    std::vector<std::uint8_t> scales;
    float global_scale = 0.0f;
};

/// Read-only view of the same layout, for data that lives elsewhere (an mmapped checkpoint).
struct matrix_view {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    const std::uint8_t *packed = nullptr; ///< rows * cols / 2 bytes
    const std::uint8_t *scales = nullptr; ///< rows * cols / 16 bytes
    float global_scale = 0.0f;
};

inline matrix_view view(const matrix &m) {
    return {m.rows, m.cols, m.packed.data(), m.scales.data(), m.global_scale};
}

/// The ModelOpt weight recipe (nvfp4.md section 1.5) on a row-major [rows, cols] matrix:
///   global = amax / (6 * 448); per block s = fp8(block_amax / (6 * global)), all-zero block -> 1.0;
///   q = RNE-to-E2M1(w / (s * global)) with saturation.
/// `amax` overrides amax(|w|) (fused siblings such as gate/up share one); pass a negative value to use the
/// matrix's own. Errors (invalid_argument): cols not a multiple of 16 (the message names K), rows or cols < 0,
/// w.size() != rows * cols, NaN or Inf in the input (the message gives the row and column), amax given but
/// not finite or below the matrix's own.
/// Signs follow ModelOpt: sign bit = (y < 0), so -0.0 encodes as +0 (0x0) while -0.1 -> 0x8.
/// Zero amax (all-zero matrix): ModelOpt would compute 0/0 scales; here global_scale = 0 (still amax/2688),
/// every scale byte is 0x38 (1.0, the all-zero-block rule) and every code 0, so dequantize gives +0.0.
/// A block whose scale rounds to E4M3 zero (block amax below about 2.2e-6 * amax) gets codes +-6 (NaN -> +6
/// for its zeros) and dequantizes to zeros, exactly as ModelOpt's arithmetic does.
/// A bf16 input gives exactly the result of the fp32 overload on the widened values.
result<matrix> quantize(std::span<const float> w, std::int64_t rows, std::int64_t cols, float amax = -1.0f);
result<matrix> quantize(std::span<const bf16_t> w, std::int64_t rows, std::int64_t cols, float amax = -1.0f);

/// Dequantizes into `out` (at least rows * cols floats, row-major): out = (e2m1(q) * e4m3(sf)) * global_scale.
/// The inner product is exact in fp32 (and in bf16: at most 6 significant bits); the multiply by the global
/// scale is the one fp32 rounding. Kernels compute the same expression in the same order, so they match bit
/// for bit. Errors (invalid_argument): bad shape as for quantize, `out` too small, null data with rows*cols > 0.
status dequantize(const matrix_view &m, std::span<float> out);

// ---- the 128x4 swizzled scale layout (nvfp4.md section 3) ----------------------------------------------

/// Bytes of a swizzled scale matrix for `rows` rows and `scale_cols` (= K/16) columns: both padded, rows to
/// 128 and columns to 4.
std::size_t swizzled_scales_size(std::int64_t rows, std::int64_t scale_cols);

/// Byte offset of scale (r, kb) in the swizzled layout.
std::size_t swizzled_scale_offset(std::int64_t r, std::int64_t kb, std::int64_t scale_cols);

/// Linear [rows, scale_cols] -> swizzled (padding bytes written as 0). `out` must hold
/// swizzled_scales_size(rows, scale_cols) bytes.
status swizzle_scales_128x4(std::span<const std::uint8_t> linear, std::int64_t rows, std::int64_t scale_cols,
                            std::span<std::uint8_t> out);

/// The inverse: swizzled -> linear [rows, scale_cols] (padding dropped). Both functions fail with
/// invalid_argument on a negative shape or a buffer too small.
status unswizzle_scales_128x4(std::span<const std::uint8_t> swizzled, std::int64_t rows, std::int64_t scale_cols,
                              std::span<std::uint8_t> out);

} // namespace fp4moe::nvfp4
