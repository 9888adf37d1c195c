// Device-side routing and plan of one MoE batch (the GPU twin of moe_route / moe_plan_from_ids in src/moe/):
// router logits, top-k per routing rule, then counts, offsets and the token permutations. Every launcher is
// asynchronous on `stream`, allocates nothing and never synchronizes, so a whole MoE layer can be captured
// in a CUDA graph. Grids are sized from the host-known token count; buffers by the caller from upper bounds.
//
// Host-includable: plain C++ compilers see only cuda_runtime_api.h types; bf16 inputs are passed as raw
// uint16 bit patterns (the __nv_bfloat16 layout). Kernels know nothing of the engine: plain fields in, a
// cudaError_t (the launch status) out.
//
// Given the same logits, ids and the plan equal the CPU's exactly (the same fp32 expressions in the same order
// for the selection, ties to the lower expert index, rows within an expert ordered by (token, slot)); weights
// agree to a few ulps (CUDA's expf is not glibc's). Logits differ from the CPU's by summation order only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp4moe::cuda {

/// The routing rule (mirrors fp4moe::moe_routing plus the sizes; see include/fp4moe/moe.h).
struct route_rule {
    int experts = 0; ///< E routed experts
    int top_k = 0;   ///< k
    int shared = 0;  ///< S shared slots, appended as ids E..E+S-1 with weight 1
    bool softmax = true;          ///< softmax scoring (Qwen3); false: sigmoid (DeepSeek-V3, GLM)
    bool renormalize = true;      ///< w /= sum(w) (+1e-20 for sigmoid)
    bool correction_bias = false; ///< selection on score + bias[e] (sigmoid only)
    int n_group = 1;              ///< expert groups (group score: sum of its top-2 biased scores)
    int topk_group = 1;           ///< groups kept
    float routed_scaling_factor = 1.0f;
};

/// logits[t, e] = sum_k float(x[t, k]) * router[e, k] in fp32. x [T, H] bf16 bits, router [E, H] fp32.
cudaError_t moe_router_logits(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream);

/// Per token: ids [T, k+S] and weights [T, k+S] per `rule` (bias [E] when rule.correction_bias, else null).
/// A token whose logits hold a NaN or infinity gets ids -1 and sets *bad_token (if not null) to the smallest
/// such token index (atomicMin; the caller initialises it to INT32_MAX).
cudaError_t moe_route_topk(const float *logits, const float *bias, int tokens, const route_rule &rule,
                           std::int32_t *ids, float *weights, int *bad_token, cudaStream_t stream);

/// Plan outputs (device pointers). masked_pairs may be null (permuted layout only).
struct plan_buffers {
    std::int32_t *counts = nullptr;       ///< [num_experts] pairs routed to each expert
    std::int32_t *offsets = nullptr;      ///< [num_experts + 1] exclusive prefix sum of counts
    std::int32_t *perm = nullptr;         ///< [T * slots] permuted row -> pair (token * slots + slot)
    std::int32_t *inv_perm = nullptr;     ///< [T * slots] pair -> permuted row
    std::int32_t *masked_pairs = nullptr; ///< [num_experts * max_tokens]: expert e's i-th pair, -1 past counts[e]
};

/// Fills `out` from ids [T, slots] (values in [0, num_experts); -1 entries are skipped, as a bad token's).
/// Rows within an expert are ordered by pair index, as moe_plan_from_ids orders them.
cudaError_t moe_build_plan(const std::int32_t *ids, int tokens, int slots, int num_experts, int max_tokens,
                           const plan_buffers &out, cudaStream_t stream);

} // namespace fp4moe::cuda
