// CPU ops of the transformer forward (everything but the MoE experts, which are moe_runners).
// Activations are fp32 [rows, dim] row-major; weights are bf16 or NVFP4 views into the checkpoint.
#pragma once

#include "core/thread_pool.h"
#include "fp4moe/moe.h"

#include <cstdint>

namespace fp4moe::cpu {

/// A Linear layer y = x W^T (+ b), W [out, in] in bf16 or NVFP4 (checkpoint layout), bias fp32 or null.
struct linear_view {
    std::int64_t out = 0;
    std::int64_t in = 0;
    moe_weight_format format = moe_weight_format::bf16;
    moe_matrix w;
    const float *bias = nullptr;
};

/// y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n]) for t < rows; fp32 accumulation. Each weight row is read
/// once and applied to every row of x (parallel over output rows).
void linear(thread_pool &pool, const linear_view &l, const float *x, std::int64_t rows, float *y);

/// y = x / sqrt(mean(x^2) + eps) * w, per row of `dim` (y may alias x).
void rmsnorm(const float *x, const float *w, std::int64_t rows, std::int64_t dim, float eps, float *y);

/// Rotary embedding in place on `heads` heads of `head_dim` at position `pos`, on the first `rot_dim` dims
/// of each head. NeoX pairing (i, i + rot_dim/2) as GLM-4.5 and Qwen3 use.
void rope_neox(float *x, std::int64_t heads, std::int64_t head_dim, std::int64_t rot_dim, std::int64_t pos,
               float theta);

/// out[i] = silu(gate[i]) * up[i].
void silu_mul(const float *gate, const float *up, std::int64_t n, float *out);

} // namespace fp4moe::cpu
