// Device-side routing and plan of one MoE batch (the GPU twin of moe_route / moe_plan_from_ids in src/moe/):
// router logits, top-k per routing rule, then counts, offsets and the token permutations. Every launcher is
// asynchronous on `stream`, allocates nothing and never synchronizes, so a whole MoE layer can be captured
// in a CUDA graph. Grids are sized from the host-known token count; buffers by the caller from upper bounds.
//
// Every kernel is a programmatic dependent launch (PDL): it lets the next kernel launch at once and waits in
// griddepcontrol.wait for the previous one before touching its outputs or writing anything global.
//
// Host-includable: plain C++ compilers see only cuda_runtime_api.h types; bf16 inputs are passed as raw
// uint16 bit patterns (the __nv_bfloat16 layout). Kernels know nothing of the engine: plain fields in, a
// cudaError_t (the launch status) out.
//
// Given the same logits, ids and the plan equal the CPU's exactly (the same fp32 expressions in the same order
// for the selection, ties to the lower expert index, rows within an expert ordered by (token, slot)); weights
// agree to a few ulps (CUDA's expf is not glibc's). Logits differ from the CPU's by summation order (and, on
// the tensor-core path, the tensor cores' fp32 accumulation) only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

/// The routing rule (mirrors fp4moe::moe_routing plus the sizes; see include/fp4moe/moe.h).
struct route_rule {
    int experts = 0;              ///< E routed experts
    int top_k = 0;                ///< k
    int shared = 0;               ///< S shared slots, appended as ids E..E+S-1 with weight 1
    bool softmax = true;          ///< softmax scoring (Qwen3); false: sigmoid (DeepSeek-V3, GLM)
    bool renormalize = true;      ///< w /= sum(w) (+1e-20 for sigmoid)
    bool correction_bias = false; ///< selection on score + bias[e] (sigmoid only)
    int n_group = 1;              ///< expert groups (group score: sum of its top-2 biased scores)
    int topk_group = 1;           ///< groups kept
    float routed_scaling_factor = 1.0f;
};

/// logits[t, e] = sum_k float(x[t, k]) * router[e, k] in fp32. x [T, H] bf16 bits, router [E, H] fp32.
/// T <= 64 with H % 4 == 0 and x / router 8- / 16-byte aligned (decode): split-K, grid (8, ceil(E / 8)) of
/// 256-thread CTAs in clusters of 8 along x. Cluster y owns 8 experts for all T tokens, CTA rank r the r-th
/// eighth of H; the router is streamed once in 16-byte loads (x re-read from L1/L2 per 8 experts). Partial sums
/// are combined through distributed shared memory in a fixed (rank, warp) order: deterministic run to run.
/// Launched as a programmatic dependent launch (PDL): it prefetches its router slice into L2 and then waits
/// for the previous kernel in griddepcontrol.wait before reading x; it lets the next kernel launch at once.
/// Otherwise, from T = 65 and T x E x H >= 2^25 (or once 64 x 64 tiles make >= 64 CTAs) with H % 8 == 0 and x / router
/// 16-byte aligned: bf16 tensor cores at fp32 accuracy (router_logits_mma.h: the router split into three exact
/// bf16 parts; K split over a cluster while the tiles are fewer than the SMs). Else a tiled fp32 GEMM once the
/// 64 x 64 tiles make >= 64 CTAs (each logit one FMA chain over k, the CPU's order), and below that a GEMV (scalar
/// loads when H % 4 != 0 or misaligned): one CTA per (expert, 8 tokens) up to T = 8, per (4 experts, 8 tokens)
/// above.
/// `router_bf16`: every router value is a bf16 (low 16 bits zero), as the checkpoints of every family we load
/// store it; the wgmma kernel then multiplies one bf16 part instead of three (the same exact products, a third of
/// the tensor-core work), and from T = 8 to 64, where E x H >= 2^19 and H % 16 == 0, router_logits_decode_mma
/// (router_logits_mma.h) replaces split-K: one bf16 part on mma.sync, K split 64 ways over a cluster, partial sums
/// in a fixed order (deterministic). A router that is not all bf16 with `router_bf16` set gives wrong logits.
/// Errors (nothing launched): T < 0, H <= 0, E <= 0, null pointers when T > 0. T == 0 launches nothing.
cudaError_t moe_router_logits(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream, bool router_bf16 = false);
/// As moe_router_logits with split-K used only up to `splitk_max_tokens` tokens (0: never), so a benchmark can
/// time the other kernels at decode sizes.
cudaError_t moe_router_logits_splitk_max(const std::uint16_t *x, const float *router, int tokens, int hidden,
                                         int experts, float *logits, int splitk_max_tokens, cudaStream_t stream,
                                         bool router_bf16 = false);

/// Per token: ids [T, k+S] and weights [T, k+S] per `rule` (bias [E] when rule.correction_bias, else null).
/// A token whose logits hold a NaN or infinity gets ids -1 and sets *bad_token (if not null) to the smallest
/// such token index (atomicMin; the caller initialises it to INT32_MAX). Such a token's weights are 0 and its
/// shared slots -1 too. One warp per token, 4 per CTA; scores use glibc's expf algorithm, so they and the
/// selection are the CPU's bit for bit (weights too in practice: same expressions, same order).
/// Errors (nothing launched): the checks of moe_desc::validate (T < 0, k outside [1, E], S < 0, groups not
/// dividing E, topk_group outside [1, n_group], k above the kept experts, < 2 experts per group when n_group >
/// 1, correction_bias with softmax), E > 256, correction_bias without `bias`, null outputs when T > 0.
/// T == 0 launches nothing. Softmax ignores n_group (as the CPU does).
cudaError_t moe_route_topk(const float *logits, const float *bias, int tokens, const route_rule &rule,
                           std::int32_t *ids, float *weights, int *bad_token, cudaStream_t stream);

/// Plan outputs (device pointers). masked_pairs may be null (permuted layout only).
struct plan_buffers {
    std::int32_t *counts = nullptr;       ///< [num_experts] pairs routed to each expert
    std::int32_t *offsets = nullptr;      ///< [num_experts + 1] exclusive prefix sum of counts
    std::int32_t *perm = nullptr;         ///< [T * slots] permuted row -> pair (token * slots + slot)
    std::int32_t *inv_perm = nullptr;     ///< [T * slots] pair -> permuted row
    std::int32_t *masked_pairs = nullptr; ///< [num_experts * max_tokens]: expert e's i-th pair, -1 past counts[e]
    /// [moe_plan_scratch_ints(T, slots, num_experts)] for the multi-CTA plan of large batches; null: one CTA.
    std::int32_t *scratch = nullptr;
};

/// Scratch ints moe_build_plan uses for a batch of `tokens` x `slots` pairs over `num_experts` (0: one CTA).
std::size_t moe_plan_scratch_ints(int tokens, int slots, int num_experts);

/// Fills `out` from ids [T, slots] (values in [0, num_experts); -1 entries are skipped, as a bad token's).
/// Rows within an expert are ordered by pair index, as moe_plan_from_ids orders them. A skipped pair has
/// inv_perm -1 and the rows past offsets[num_experts] hold perm -1 (with no skipped pair, every array equals
/// moe_plan_from_ids'). masked_pairs rows hold at most max_tokens entries: ids must be distinct within a token.
/// T == 0 still writes counts and offsets (all 0) and masked_pairs (all -1): the caller reads an empty plan.
/// One CTA (up to 1024 threads, stable counting sort), or with out.scratch and >= 8192 pairs over <= 1024
/// experts, three kernels over 2048-pair chunks (counts, bases, scatter: the same result); plus, with
/// masked_pairs, one grid over (row, expert).
/// Errors (nothing launched): T < 0, slots <= 0, num_experts outside [1, 2048], max_tokens < 0,
/// T * slots > 2^30, T > max_tokens with masked_pairs, null counts/offsets, null ids/perm/inv_perm when T > 0.
cudaError_t moe_build_plan(const std::int32_t *ids, int tokens, int slots, int num_experts, int max_tokens,
                           const plan_buffers &out, cudaStream_t stream);

/// Whether moe_route_topk_plan (and moe_route_fused) take this batch: T <= 64, T * (k + S) <= 2048,
/// E <= 256, E + S <= 1024 (the rule itself is checked by the launchers).
bool moe_route_topk_plan_fits(int tokens, const route_rule &rule);

/// Top-k and the plan of a small batch in ONE kernel: a single CTA of 256 threads up to T = 8, else 1024
/// (route_plan_cta.cuh; dynamic shared memory up to ~150 KB), warp w routing tokens w, w + warps exactly as
/// moe_route_topk does, then the plan from the ids in shared memory (a 64-bit token mask per expert: counts, a
/// block scan for offsets, rows by mask rank). Writes ids, weights, bad_token (as moe_route_topk) and every plan
/// array of moe_build_plan (num_experts = E + S); masked_pairs in-kernel when (E + S) * max_tokens <= 65536, else
/// with moe_build_plan's masked grid after it.
/// PDL launch (waits for the previous kernel before reading logits; lets the next one launch at once).
/// Errors (nothing launched): moe_route_topk's and moe_build_plan's, and !moe_route_topk_plan_fits.
/// T == 0: as moe_build_plan with T == 0.
cudaError_t moe_route_topk_plan(const float *logits, const float *bias, int tokens, const route_rule &rule,
                                int max_tokens, std::int32_t *ids, float *weights, int *bad_token,
                                const plan_buffers &out, cudaStream_t stream);

/// The whole routing of a small batch (moe_route_topk_plan_fits): moe_router_logits into `logits` [T, E], then
/// moe_route_topk_plan. Two kernels at decode (logits, top-k + plan), chained by PDL. `router_bf16`: as
/// moe_router_logits'.
/// moe_route_fused_preferred: what the layer forward uses it for: fits and T <= 8 (one CTA routes all T tokens,
/// a warp per token; from T ~ 10 on, top-k on T / 4 CTAs plus the plan kernel is faster on the H200).
bool moe_route_fused_preferred(int tokens, const route_rule &rule);
cudaError_t moe_route_fused(const std::uint16_t *x, const float *router, const float *bias, int tokens, int hidden,
                            const route_rule &rule, int max_tokens, float *logits, std::int32_t *ids, float *weights,
                            int *bad_token, const plan_buffers &out, cudaStream_t stream, bool router_bf16 = false);

} // namespace fp4moe::cuda
