// The ModelOpt NVFP4 weight recipe (nvfp4.md section 1.5) and its inverse, bit-exact.
//
// Every step is one IEEE fp32 operation in the order ModelOpt's torch code performs it, so a numpy float32
// re-implementation gives the same bytes (tests/quant/test_ml_dtypes.py checks that).
#include "core/error.h"
#include "fp4moe/nvfp4.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace fp4moe::nvfp4 {

namespace {

void check_shape(std::int64_t rows, std::int64_t cols) {
    if (rows < 0 || cols < 0) fail(status_code::invalid_argument, "nvfp4: negative shape [{}, {}]", rows, cols);
    if (cols % kBlock != 0)
        fail(status_code::invalid_argument, "nvfp4: K (cols) = {} is not a multiple of the block size {}", cols,
             kBlock);
    if (rows > 0 && cols > std::numeric_limits<std::int64_t>::max() / rows)
        fail(status_code::invalid_argument, "nvfp4: shape [{}, {}] overflows", rows, cols);
}

// ModelOpt's _cast_fp4 takes the sign from (y < 0) and the magnitude from |y|: -0.0 encodes as +0 and a NaN
// (0/0 when a block scale underflows to 0) as +6, where e2m1_encode alone would keep -0.0's sign.
std::uint8_t modelopt_e2m1(float y) {
    return static_cast<std::uint8_t>((y < 0.0f ? 0x8 : 0x0) | e2m1_encode(std::fabs(y)));
}

matrix quantize_f32(std::span<const float> w, std::int64_t rows, std::int64_t cols, float amax_arg) {
    check_shape(rows, cols);
    const auto n = static_cast<std::size_t>(rows * cols);
    if (w.size() != n)
        fail(status_code::invalid_argument, "nvfp4: input has {} elements, expected {} x {} = {}", w.size(), rows, cols,
             n);

    float amax = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(w[i]))
            fail(status_code::invalid_argument, "nvfp4: non-finite input {} at row {}, column {}", w[i],
                 static_cast<std::int64_t>(i) / cols, static_cast<std::int64_t>(i) % cols);
        amax = std::max(amax, std::fabs(w[i]));
    }
    if (!(amax_arg < 0.0f)) {
        if (!std::isfinite(amax_arg))
            fail(status_code::invalid_argument, "nvfp4: amax override {} is not finite", amax_arg);
        if (amax_arg < amax)
            fail(status_code::invalid_argument, "nvfp4: amax override {} is below the matrix's own amax {}", amax_arg,
                 amax);
        amax = amax_arg;
    }

    matrix m;
    m.rows = rows;
    m.cols = cols;
    m.packed.assign(n / 2, 0);
    m.scales.assign(n / kBlock, 0);
    // NOTE: amax == 0 (all-zero matrix) makes ws2 = 0 and ModelOpt's s = 0/0 = NaN. We keep ws2 = amax/2688
    // = 0 (the stored scale still follows the formula) and take the all-zero-block rule for every block:
    // scale 1.0 (0x38), codes 0, so dequantization gives +0.0 exactly with no NaN anywhere.
    m.global_scale = amax / 2688.0f;
    const float six_ws2 = 6.0f * m.global_scale;

    const std::int64_t blocks_per_row = cols / kBlock;
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t b = 0; b < blocks_per_row; ++b) {
            const float *blk = w.data() + r * cols + b * kBlock;
            float bamx = 0.0f;
            for (int i = 0; i < kBlock; ++i) bamx = std::max(bamx, std::fabs(blk[i]));
            // ModelOpt replaces s == 0 by 1.0; bamx == 0 is tested too because with amax == 0 s is 0/0.
            float s = bamx / six_ws2;
            if (bamx == 0.0f || s == 0.0f) s = 1.0f;
            const std::uint8_t sf = e4m3_encode(s);
            m.scales[static_cast<std::size_t>(r * blocks_per_row + b)] = sf;
            // Blocks of zeros stay zero whatever the divisor; this also covers the amax == 0 case above.
            if (bamx == 0.0f) continue;
            const float denom = e4m3_decode(sf) * m.global_scale;
            std::uint8_t *out = m.packed.data() + (r * cols + b * kBlock) / 2;
            for (int i = 0; i < kBlock; i += 2) {
                const std::uint8_t lo = modelopt_e2m1(blk[i] / denom);
                const std::uint8_t hi = modelopt_e2m1(blk[i + 1] / denom);
                out[i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
            }
        }
    }
    return m;
}

result<matrix> to_result(auto &&fn) {
    matrix m;
    const status st = catch_status([&] { m = fn(); });
    if (!st.ok()) return st;
    return m;
}

} // namespace

result<matrix> quantize(std::span<const float> w, std::int64_t rows, std::int64_t cols, float amax) {
    return to_result([&] { return quantize_f32(w, rows, cols, amax); });
}

result<matrix> quantize(std::span<const bf16_t> w, std::int64_t rows, std::int64_t cols, float amax) {
    // bf16 -> fp32 is exact, and ModelOpt promotes bf16 weights to fp32 before every division, so the fp32
    // path on the widened values is the bf16 recipe.
    return to_result([&] {
        std::vector<float> f(w.size());
        std::transform(w.begin(), w.end(), f.begin(), bf16_to_float);
        return quantize_f32(f, rows, cols, amax);
    });
}

status dequantize(const matrix_view &m, std::span<float> out) {
    return catch_status([&] {
        check_shape(m.rows, m.cols);
        const auto n = static_cast<std::size_t>(m.rows * m.cols);
        if (out.size() < n)
            fail(status_code::invalid_argument, "nvfp4: dequantize output holds {} floats, needs {} x {} = {}",
                 out.size(), m.rows, m.cols, n);
        if (n > 0 && (m.packed == nullptr || m.scales == nullptr))
            fail(status_code::invalid_argument, "nvfp4: dequantize of a [{}, {}] matrix with null data", m.rows,
                 m.cols);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint8_t code = (i & 1) ? (m.packed[i / 2] >> 4) : (m.packed[i / 2] & 0xF);
            // e2m1 * e4m3 has at most 6 significant bits: exact. One rounding, by the global scale.
            out[i] = (e2m1_decode(code) * e4m3_decode(m.scales[i / kBlock])) * m.global_scale;
        }
    });
}

} // namespace fp4moe::nvfp4
