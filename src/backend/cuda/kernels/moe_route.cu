// Top-k routing and the token plan of one MoE batch on the GPU (moe_route.h). The router logits are in
// router_logits.cu, one token's routing in route_token.cuh, the one-CTA top-k + plan of small batches in
// route_plan_cta.cuh.
//
// Numeric path: routing repeats routing.cpp's fp32 expressions in its order (route_token.cuh), so scores, selection
// and, in practice, weights equal the CPU's. The plan is integer work: a stable counting sort.
#include "kernels/moe_plan_multi.h"
#include "kernels/moe_route.h"
#include "kernels/pdl.cuh"
#include "kernels/plan_scatter.cuh"
#include "kernels/route_plan_cta.cuh"
#include "kernels/route_token.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace fp4moe::cuda {

namespace {

// ---- top-k -----------------------------------------------------------------------------------------------

constexpr int kRouteWarps = 4;

// One warp per token, 4 per CTA.
template <int kPerLane>
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_topk_kernel(const float *__restrict__ logits, const float *__restrict__ bias, int tokens, route_rule rule,
                          std::int32_t *__restrict__ ids, float *__restrict__ weights, int *bad_token) {
    __shared__ float s_score[kRouteWarps][kMaxRouteExperts];
    __shared__ float s_select[kRouteWarps][kMaxRouteExperts];
    __shared__ float s_group[kRouteWarps][kMaxRouteExperts];
    __shared__ int s_keep[kRouteWarps][kMaxRouteExperts];
    __shared__ int s_chosen[kRouteWarps][kMaxRouteExperts];
    __shared__ unsigned long long s_exp2[32];
    allow_next_kernel();
    if (threadIdx.x < 32) s_exp2[threadIdx.x] = kExp2fTable[threadIdx.x];
    __syncthreads();
    wait_for_previous_kernel();
    const int warp = threadIdx.x / 32;
    const int t = blockIdx.x * kRouteWarps + warp;
    if (t >= tokens) return; // whole warps only; no block barrier below
    const int slots = rule.top_k + rule.shared;
    const route_scratch sc{s_score[warp], s_select[warp], s_group[warp], s_keep[warp], s_chosen[warp], s_exp2};
    route_token<kPerLane>(logits + static_cast<std::size_t>(t) * rule.experts, bias, t, rule, sc,
                          ids + static_cast<std::size_t>(t) * slots, weights + static_cast<std::size_t>(t) * slots,
                          nullptr, bad_token);
}

// ---- top-k and plan in one CTA (small batches) -----------------------------------------------------------

// One CTA (route_plan_cta.cuh): warp w routes tokens w, w + warps, then the plan. 256 threads up to T = 8 (a warp
// per token; the plan's barriers and scan cost less than with 1024), 1024 above. Up to the same T the layer forward
// takes this kernel after the logits (moe_route_fused_preferred); above, top-k on T / 4 CTAs + the plan kernel.
constexpr int kWarpPerTokenMaxT = 8;
template <int kPerLane, int kThreads>
__global__ void __launch_bounds__(kThreads, 1) moe_route_topk_plan_kernel(route_plan_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ unsigned long long s_exp2[32];
    __shared__ int s_bad[32];
    allow_next_kernel();
    const route_plan_smem s = route_plan_carve(smem_raw, a, s_exp2, s_bad);
    route_plan_prologue<kThreads>(a, s);
    wait_for_previous_kernel();
    route_plan_body<kPerLane, kThreads>(a, s);
}

// ---- plan ------------------------------------------------------------------------------------------------

constexpr int kPlanMaxWarps = 32;
constexpr int kPlanSmemInts = 48 * 1024 / 4; // the default dynamic shared-memory limit, no attribute needed
constexpr int kMaxPlanExperts = 2048;
constexpr int kMaskedThreads = 256;

// One CTA. Warp w owns the contiguous pairs [w * seg, (w + 1) * seg): it counts them per expert (its row of
// `wc`), a scan over warps turns the rows into per-warp bases, a scan over experts gives the offsets, and each
// warp scatters its pairs 32 at a time, ranking equal experts among the 32 with __match_any_sync. Warps own
// increasing pair ranges and walk them in order, so rows within an expert follow the pair index: the CPU's
// counting sort exactly.
__global__ void __launch_bounds__(kPlanMaxWarps * 32)
    moe_plan_kernel(const std::int32_t *__restrict__ ids, int pairs, int num_experts, int seg,
                    std::int32_t *__restrict__ counts, std::int32_t *__restrict__ offsets,
                    std::int32_t *__restrict__ perm, std::int32_t *__restrict__ inv_perm) {
    extern __shared__ int smem[];
    allow_next_kernel();
    wait_for_previous_kernel();
    const int n_warps = blockDim.x / 32;
    int *wc = smem;                        // [n_warps][num_experts] counts, then bases, then cursors
    int *cnt = wc + n_warps * num_experts; // [num_experts]
    int *off = cnt + num_experts;          // [num_experts + 1]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    int *mine = wc + warp * num_experts;
    const int begin = min(pairs, warp * seg), end = min(pairs, begin + seg);

    for (int i = tid; i < n_warps * num_experts; i += blockDim.x) wc[i] = 0;
    __syncthreads();
    for (int i = begin + lane; i < end; i += 32) {
        const int e = ids[i];
        if (e >= 0 && e < num_experts) atomicAdd(&mine[e], 1);
    }
    __syncthreads();
    for (int e = tid; e < num_experts; e += blockDim.x) {
        int run = 0;
        for (int w = 0; w < n_warps; ++w) {
            const int c = wc[w * num_experts + e];
            wc[w * num_experts + e] = run;
            run += c;
        }
        cnt[e] = run;
        counts[e] = run;
    }
    __syncthreads();
    if (warp == 0) plan_scan_offsets(cnt, num_experts, off, offsets);
    __syncthreads();
    for (int r = off[num_experts] + tid; r < pairs; r += blockDim.x) perm[r] = -1; // rows of skipped pairs
    for (int i = tid; i < n_warps * num_experts; i += blockDim.x) wc[i] += off[i % num_experts]; // absolute bases
    __syncthreads();
    plan_warp_scatter(ids, begin, end, num_experts, mine, perm, inv_perm);
}

// masked_pairs[e, i] = perm[offsets[e] + i] for i < counts[e], else -1 (the CPU's definition).
__global__ void __launch_bounds__(kMaskedThreads)
    moe_plan_masked_kernel(const std::int32_t *__restrict__ counts, const std::int32_t *__restrict__ offsets,
                           const std::int32_t *__restrict__ perm, int max_tokens,
                           std::int32_t *__restrict__ masked_pairs) {
    allow_next_kernel();
    wait_for_previous_kernel();
    const int e = blockIdx.y;
    const int i = blockIdx.x * kMaskedThreads + threadIdx.x;
    if (i >= max_tokens) return;
    masked_pairs[static_cast<std::size_t>(e) * max_tokens + i] = i < counts[e] ? perm[offsets[e] + i] : -1;
}

template <int kPerLane, int kThreads>
cudaError_t launch_topk_plan(const route_plan_args &a, cudaStream_t stream) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(moe_route_topk_plan_kernel<kPerLane, kThreads>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, int{kRoutePlanSmemMax});
    if (attr != cudaSuccess) return attr;
    return launch_pdl(moe_route_topk_plan_kernel<kPerLane, kThreads>, dim3(1), dim3(kThreads),
                      route_plan_smem_bytes(a.rule, a.tokens, a.num_experts, kThreads / 32), 1, stream, a);
}

template <int kPerLane>
cudaError_t launch_topk_plan(const route_plan_args &a, cudaStream_t stream) {
    return a.tokens <= kWarpPerTokenMaxT ? launch_topk_plan<kPerLane, 256>(a, stream)
                                         : launch_topk_plan<kPerLane, 1024>(a, stream);
}

} // namespace

cudaError_t moe_route_topk(const float *logits, const float *bias, int tokens, const route_rule &rule,
                           std::int32_t *ids, float *weights, int *bad_token, cudaStream_t stream) {
    const route_rule &r = rule;
    if (!route_rule_ok(r, tokens, bias)) return cudaErrorInvalidValue;
    if (tokens == 0) return cudaSuccess;
    if (logits == nullptr || ids == nullptr || weights == nullptr) return cudaErrorInvalidValue;
    const unsigned blocks = static_cast<unsigned>(ceil_div(tokens, kRouteWarps));
    const int per_lane = ceil_div(r.experts, 32);
    cudaError_t e;
    if (per_lane <= 1)
        e = launch_pdl(moe_route_topk_kernel<1>, dim3(blocks), dim3(kRouteWarps * 32), 0, 1, stream, logits, bias,
                       tokens, r, ids, weights, bad_token);
    else if (per_lane <= 2)
        e = launch_pdl(moe_route_topk_kernel<2>, dim3(blocks), dim3(kRouteWarps * 32), 0, 1, stream, logits, bias,
                       tokens, r, ids, weights, bad_token);
    else if (per_lane <= 4)
        e = launch_pdl(moe_route_topk_kernel<4>, dim3(blocks), dim3(kRouteWarps * 32), 0, 1, stream, logits, bias,
                       tokens, r, ids, weights, bad_token);
    else
        e = launch_pdl(moe_route_topk_kernel<8>, dim3(blocks), dim3(kRouteWarps * 32), 0, 1, stream, logits, bias,
                       tokens, r, ids, weights, bad_token);
    return e != cudaSuccess ? e : cudaGetLastError();
}

namespace {

// masked_pairs from a finished permuted plan: one grid over (row, expert). The callers checked the arguments and
// launch it only for max_tokens > 0.
cudaError_t launch_masked_fill(const plan_buffers &out, int num_experts, int max_tokens, cudaStream_t stream) {
    const dim3 grid(ceil_div(max_tokens, kMaskedThreads), num_experts);
    return launch_pdl(moe_plan_masked_kernel, grid, dim3(kMaskedThreads), 0, 1, stream,
                      static_cast<const std::int32_t *>(out.counts), static_cast<const std::int32_t *>(out.offsets),
                      static_cast<const std::int32_t *>(out.perm), max_tokens, out.masked_pairs);
}

} // namespace

cudaError_t moe_build_plan(const std::int32_t *ids, int tokens, int slots, int num_experts, int max_tokens,
                           const plan_buffers &out, cudaStream_t stream) {
    if (tokens < 0 || slots <= 0 || num_experts <= 0 || num_experts > kMaxPlanExperts || max_tokens < 0)
        return cudaErrorInvalidValue;
    const long long pairs64 = static_cast<long long>(tokens) * slots;
    if (pairs64 > (1 << 30)) return cudaErrorInvalidValue;
    const int pairs = static_cast<int>(pairs64);
    if (out.counts == nullptr || out.offsets == nullptr) return cudaErrorInvalidValue;
    if (pairs > 0 && (ids == nullptr || out.perm == nullptr || out.inv_perm == nullptr)) return cudaErrorInvalidValue;
    if (out.masked_pairs != nullptr && tokens > max_tokens) return cudaErrorInvalidValue;

    cudaError_t e0;
    if (out.scratch != nullptr && plan_multi_fits(pairs, num_experts)) {
        e0 = plan_multi_launch(ids, pairs, num_experts, out, stream);
    } else { // one CTA: as many warps as there are 32-pair steps, up to 32 and up to one row of counters each
        const int fit = (kPlanSmemInts - 2 * num_experts - 1) / num_experts;
        const int n_warps = std::max(1, std::min({kPlanMaxWarps, fit, ceil_div(pairs, 32)}));
        const int seg = ceil_div(ceil_div(pairs, n_warps), 32) * 32;
        const std::size_t smem = sizeof(int) * (static_cast<std::size_t>(n_warps + 2) * num_experts + 1);
        e0 = launch_pdl(moe_plan_kernel, dim3(1), dim3(n_warps * 32), smem, 1, stream, ids, pairs, num_experts, seg,
                        out.counts, out.offsets, out.perm, out.inv_perm);
    }
    if (e0 != cudaSuccess) return e0;
    if (out.masked_pairs != nullptr && max_tokens > 0)
        if (auto em = launch_masked_fill(out, num_experts, max_tokens, stream); em != cudaSuccess) return em;
    return cudaGetLastError();
}

std::size_t moe_plan_scratch_ints(int tokens, int slots, int num_experts) {
    return tokens < 0 || slots <= 0 ? 0 : plan_multi_scratch_ints(static_cast<long long>(tokens) * slots, num_experts);
}

bool moe_route_topk_plan_fits(int tokens, const route_rule &rule) {
    const long long pairs = static_cast<long long>(tokens) * (rule.top_k + rule.shared);
    return tokens >= 0 && tokens <= kRoutePlanMaxTokens && pairs <= kRoutePlanMaxPairs &&
           rule.experts <= kMaxRouteExperts && rule.n_group <= kMaxRouteExperts / 2 &&
           rule.experts + rule.shared <= kRoutePlanMaxExperts;
}

cudaError_t moe_route_topk_plan(const float *logits, const float *bias, int tokens, const route_rule &rule,
                                int max_tokens, std::int32_t *ids, float *weights, int *bad_token,
                                const plan_buffers &out, cudaStream_t stream) {
    const route_rule &r = rule;
    if (!route_rule_ok(r, tokens, bias) || !moe_route_topk_plan_fits(tokens, r) || max_tokens < 0)
        return cudaErrorInvalidValue;
    const int slots = r.top_k + r.shared, ne = r.experts + r.shared;
    if (out.counts == nullptr || out.offsets == nullptr) return cudaErrorInvalidValue;
    if (out.masked_pairs != nullptr && tokens > max_tokens) return cudaErrorInvalidValue;
    if (tokens == 0) return moe_build_plan(nullptr, 0, slots, ne, max_tokens, out, stream);
    if (logits == nullptr || ids == nullptr || weights == nullptr || out.perm == nullptr || out.inv_perm == nullptr)
        return cudaErrorInvalidValue;
    route_plan_args a;
    a.logits = logits, a.bias = bias, a.tokens = tokens, a.rule = r, a.num_experts = ne, a.max_tokens = max_tokens;
    a.fill_masked = out.masked_pairs != nullptr &&
                    static_cast<long long>(ne) * max_tokens <= static_cast<long long>(kRoutePlanMaskedFill);
    a.ids = ids, a.weights = weights, a.bad_token = bad_token, a.out = out;
    const int per_lane = ceil_div(r.experts, 32);
    const cudaError_t e = per_lane <= 1   ? launch_topk_plan<1>(a, stream)
                          : per_lane <= 2 ? launch_topk_plan<2>(a, stream)
                          : per_lane <= 4 ? launch_topk_plan<4>(a, stream)
                                          : launch_topk_plan<8>(a, stream);
    if (e != cudaSuccess) return e;
    if (out.masked_pairs != nullptr && !a.fill_masked && max_tokens > 0)
        if (auto em = launch_masked_fill(out, ne, max_tokens, stream); em != cudaSuccess) return em;
    return cudaGetLastError();
}

bool moe_route_fused_preferred(int tokens, const route_rule &rule) {
    return moe_route_topk_plan_fits(tokens, rule) && tokens <= kWarpPerTokenMaxT;
}

cudaError_t moe_route_fused(const std::uint16_t *x, const float *router, const float *bias, int tokens, int hidden,
                            const route_rule &rule, int max_tokens, float *logits, std::int32_t *ids, float *weights,
                            int *bad_token, const plan_buffers &out, cudaStream_t stream, bool router_bf16) {
    if (!route_rule_ok(rule, tokens, bias) || !moe_route_topk_plan_fits(tokens, rule) || hidden <= 0 ||
        max_tokens < 0 || (out.masked_pairs != nullptr && tokens > max_tokens))
        return cudaErrorInvalidValue;
    // moe_route_topk_plan's pointer checks too, before the logits launch: on an error nothing runs.
    if (out.counts == nullptr || out.offsets == nullptr) return cudaErrorInvalidValue;
    if (tokens > 0) {
        if (x == nullptr || router == nullptr || logits == nullptr || ids == nullptr || weights == nullptr ||
            out.perm == nullptr || out.inv_perm == nullptr)
            return cudaErrorInvalidValue;
        if (const cudaError_t e =
                moe_router_logits(x, router, tokens, hidden, rule.experts, logits, stream, router_bf16);
            e != cudaSuccess)
            return e;
    }
    return moe_route_topk_plan(logits, bias, tokens, rule, max_tokens, ids, weights, bad_token, out, stream);
}

} // namespace fp4moe::cuda
