// CPU transformer ops. The linear layer dequantizes one weight row at a time (exactly, as cpu.ref) into a
// per-thread buffer and applies it to all rows of x, so weights stream from memory once per call.
#include "backend/cpu/ops.h"

#include "core/error.h"

#include <array>
#include <cmath>
#include <vector>

namespace fp4moe::cpu {
namespace {

// Dot product with 8 independent partial sums: the compiler vectorizes it without reassociating.
inline float dot(const float *a, const float *b, std::int64_t n) {
    float acc[8] = {};
    std::int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; k < n; ++k) s += a[k] * b[k];
    return s;
}

const std::array<float, 16> &e2m1_table() {
    static const std::array<float, 16> t = [] {
        std::array<float, 16> v{};
        for (int c = 0; c < 16; ++c) v[c] = nvfp4::e2m1_decode(static_cast<std::uint8_t>(c));
        return v;
    }();
    return t;
}

const std::array<float, 256> &e4m3_table() {
    static const std::array<float, 256> t = [] {
        std::array<float, 256> v{};
        for (int c = 0; c < 256; ++c) v[c] = nvfp4::e4m3_decode(static_cast<std::uint8_t>(c));
        return v;
    }();
    return t;
}

// Row n of W as fp32, global scale included.
void weight_row(const linear_view &l, std::int64_t n, float *out) {
    if (l.format == moe_weight_format::bf16) {
        const bf16_t *row = l.w.bf16 + n * l.in;
        for (std::int64_t k = 0; k < l.in; ++k) out[k] = bf16_to_float(row[k]);
        return;
    }
    const auto &e2m1 = e2m1_table();
    const auto &e4m3 = e4m3_table();
    const std::uint8_t *q = l.w.nvfp4.packed + n * (l.in / 2);
    const std::uint8_t *s = l.w.nvfp4.scales + n * (l.in / nvfp4::kBlock);
    const float g = l.w.nvfp4.global_scale;
    for (std::int64_t b = 0; b < l.in / nvfp4::kBlock; ++b) {
        const float scale = e4m3[s[b]] * g;
        for (int j = 0; j < 8; ++j) {
            const std::uint8_t byte = q[b * 8 + j];
            out[b * 16 + 2 * j] = e2m1[byte & 0xF] * scale;
            out[b * 16 + 2 * j + 1] = e2m1[byte >> 4] * scale;
        }
    }
}

} // namespace

void linear(thread_pool &pool, const linear_view &l, const float *x, std::int64_t rows, float *y) {
    FP4MOE_ASSERT(l.format == moe_weight_format::bf16 ? l.w.bf16 != nullptr : l.w.nvfp4.packed != nullptr);
    pool.parallel_for(l.out, [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> wrow;
        wrow.resize(l.in);
        for (std::int64_t n = begin; n < end; ++n) {
            weight_row(l, n, wrow.data());
            const float b = l.bias ? l.bias[n] : 0.0f;
            for (std::int64_t t = 0; t < rows; ++t) y[t * l.out + n] = dot(x + t * l.in, wrow.data(), l.in) + b;
        }
    });
}

void rmsnorm(const float *x, const float *w, std::int64_t rows, std::int64_t dim, float eps, float *y) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double ss = 0.0;
        for (std::int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
        for (std::int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
    }
}

void rope_neox(float *x, std::int64_t heads, std::int64_t head_dim, std::int64_t rot_dim, std::int64_t pos,
               float theta) {
    const std::int64_t half = rot_dim / 2;
    for (std::int64_t i = 0; i < half; ++i) {
        // inv_freq_i = theta^(-2i / rot_dim), computed in double as transformers computes it in fp32 from
        // an int64 arange; the angle pos * inv_freq is what both round to fp32.
        const float inv_freq = static_cast<float>(1.0 / std::pow(static_cast<double>(theta), 2.0 * i / rot_dim));
        const float angle = static_cast<float>(pos) * inv_freq;
        const float c = std::cos(angle), s = std::sin(angle);
        for (std::int64_t h = 0; h < heads; ++h) {
            float *v = x + h * head_dim;
            const float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}

void silu_mul(const float *gate, const float *up, std::int64_t n, float *out) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

} // namespace fp4moe::cpu
