// Top-k and the plan of a small batch (T <= 64) by ONE CTA of kThreads threads: the body of moe_route.cu's
// moe_route_topk_plan kernel (256 threads up to T = 8, 1024 above). CUDA-only header.
//
// Warp w routes tokens w, w + warps, ... exactly as moe_route_topk does (route_token.cuh), writing ids and weights
// to global and to shared memory; then the plan from the shared ids. Ids are distinct within a token, so expert
// e's rows are the tokens of its 64-bit token mask in order: counts = popcount, row = offsets[e] + popcount of the
// mask below the token, exactly moe_plan_from_ids' order.
#pragma once

#include "kernels/moe_route.h"
#include "kernels/route_token.cuh"

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

constexpr int kRoutePlanMaxTokens = 64;       // a token bitmask per expert is one 64-bit word
constexpr int kRoutePlanMaxPairs = 2048;      // T * slots
constexpr int kRoutePlanMaxExperts = 1024;    // E + S
constexpr int kRoutePlanMaskedFill = 1 << 16; // masked_pairs entries written in-kernel; above, a separate grid

/// Everything the one-CTA routing reads and writes (kernel parameter; num_experts = E + S).
struct route_plan_args {
    const float *logits = nullptr; ///< [T, E], written by the previous kernel of the PDL chain
    const float *bias = nullptr;   ///< [E] when rule.correction_bias
    int tokens = 0;
    route_rule rule;
    int num_experts = 0;
    int max_tokens = 0;
    bool fill_masked = false; ///< write masked_pairs here (else a separate grid does, or there is none)
    std::int32_t *ids = nullptr;
    float *weights = nullptr;
    int *bad_token = nullptr;
    plan_buffers out;
};

/// Per-warp scratch words of route_token.
inline __host__ __device__ int route_scratch_words(const route_rule &r) {
    return 2 * r.experts + 2 * r.n_group + r.top_k;
}

/// Dynamic shared memory of the one-CTA routing with `warps` warps (16-byte aligned start).
inline __host__ __device__ std::size_t route_plan_smem_bytes(const route_rule &r, int tokens, int num_experts,
                                                             int warps) {
    const int route_warps = tokens < warps ? tokens : warps, pairs = tokens * (r.top_k + r.shared);
    return 8 * static_cast<std::size_t>(num_experts) +
           4 * (static_cast<std::size_t>(pairs) + num_experts + 1 + 32 + r.experts +
                static_cast<std::size_t>(route_warps) * route_scratch_words(r));
}
/// Its bound over every batch moe_route_topk_plan_fits takes.
constexpr std::size_t kRoutePlanSmemMax =
    8 * kRoutePlanMaxExperts + 4 * (kRoutePlanMaxPairs + kRoutePlanMaxExperts + 1 + 32 + kMaxRouteExperts +
                                    32 * (2 * kMaxRouteExperts + 2 * (kMaxRouteExperts / 2) + kMaxRouteExperts));

/// The shared memory of one CTA's routing: dynamic `raw` carved as route_plan_smem_bytes counts it, plus the
/// static exp table and per-token flags.
struct route_plan_smem {
    unsigned long long *mask; // [ne] token mask per expert
    int *ids;                 // [pairs]
    int *off;                 // [ne + 1]
    int *wsum;                // [32]
    float *bias;              // [E]
    int *route;               // [route_warps][route_scratch_words]
    unsigned long long *exp2; // [32]
    int *bad;                 // [32] scores_ready: token t has a non-finite logit
};

/// Carves `raw` for `a`; exp2 and bad are the caller's static arrays.
__device__ __forceinline__ route_plan_smem route_plan_carve(unsigned char *raw, const route_plan_args &a,
                                                            unsigned long long *exp2, int *bad) {
    route_plan_smem s;
    const int pairs = a.tokens * (a.rule.top_k + a.rule.shared);
    s.mask = reinterpret_cast<unsigned long long *>(raw);
    s.ids = reinterpret_cast<int *>(s.mask + a.num_experts);
    s.off = s.ids + pairs;
    s.wsum = s.off + a.num_experts + 1;
    s.bias = reinterpret_cast<float *>(s.wsum + 32);
    s.route = reinterpret_cast<int *>(s.bias + a.rule.experts);
    s.exp2 = exp2;
    s.bad = bad;
    return s;
}

/// What does not depend on the previous kernel (masks zeroed, bias and exp table to shared memory): before
/// griddepcontrol.wait. Ends with a CTA barrier.
template <int kThreads>
__device__ __forceinline__ void route_plan_prologue(const route_plan_args &a, const route_plan_smem &s) {
    const int tid = threadIdx.x;
    if (tid < 32) s.bad[tid] = 0;
    for (int e = tid; e < a.num_experts; e += kThreads) s.mask[e] = 0ull;
    if (a.rule.correction_bias)
        for (int e = tid; e < a.rule.experts; e += kThreads) s.bias[e] = __ldg(a.bias + e);
    if (tid < 32) s.exp2[tid] = kExp2fTable[tid];
    __syncthreads();
}

/// Top-k of every token and the plan, after the prologue and once the logits are visible (read with ld.cg: they
/// come from the previous kernel, still running when this one started). Whole CTA, converged.
template <int kPerLane, int kThreads>
__device__ __forceinline__ void route_plan_body(const route_plan_args &a, const route_plan_smem &s) {
    constexpr int kWarps = kThreads / 32;
    const route_rule &rule = a.rule;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int tokens = a.tokens, slots = rule.top_k + rule.shared, pairs = tokens * slots, ne = a.num_experts;
    const int route_warps = min(kWarps, tokens);
    const int words = route_scratch_words(rule);

    // Sigmoid with one token per warp: the whole CTA computes the scores (an expert per thread, not E / 32 per
    // lane in sequence), each into its token's warp scratch.
    const bool scores_ready = !rule.softmax && tokens <= kWarps;
    if (scores_ready) {
        for (int i = tid; i < tokens * rule.experts; i += kThreads) {
            const int t = i / rule.experts, e = i - t * rule.experts;
            float *base = reinterpret_cast<float *>(s.route + t * words);
            const float v = __ldcg(a.logits + i);
            if (!isfinite(v)) s.bad[t] = 1;
            sigmoid_score(v, rule.correction_bias ? s.bias[e] : 0.0f, s.exp2, base[e], base[rule.experts + e]);
        }
        __syncthreads();
    }
    if (warp < route_warps) {
        float *base = reinterpret_cast<float *>(s.route + warp * words);
        const route_scratch sc{base,
                               base + rule.experts,
                               base + 2 * rule.experts,
                               reinterpret_cast<int *>(base + 2 * rule.experts + rule.n_group),
                               reinterpret_cast<int *>(base + 2 * rule.experts + 2 * rule.n_group),
                               s.exp2};
        for (int t = warp; t < tokens; t += route_warps) {
            const std::size_t p0 = static_cast<std::size_t>(t) * slots;
            route_token<kPerLane>(a.logits + static_cast<std::size_t>(t) * rule.experts, s.bias, t, rule, sc,
                                  a.ids + p0, a.weights + p0, s.ids + p0, a.bad_token, scores_ready,
                                  scores_ready ? 1 - s.bad[t] : -1);
            __syncwarp();
        }
    }
    __syncthreads();
    for (int p = tid; p < pairs; p += kThreads) {
        const int e = s.ids[p];
        if (e >= 0 && e < ne) { // the 32-bit half holding the token's bit: a native shared atomic, not a CAS loop
            const int t = p / slots;
            atomicOr(reinterpret_cast<unsigned *>(&s.mask[e]) + (t >> 5), 1u << (t & 31));
        }
    }
    __syncthreads();

    // counts, then offsets by a block scan: thread tid owns the `per` consecutive experts from tid * per.
    const int per = (ne + kThreads - 1) / kThreads, e0 = tid * per;
    int mine = 0;
    for (int i = 0; i < per; ++i) {
        const int e = e0 + i;
        if (e < ne) {
            const int c = __popcll(s.mask[e]);
            a.out.counts[e] = c;
            mine += c;
        }
    }
    int incl = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d) incl += y;
    }
    if (lane == 31) s.wsum[warp] = incl;
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
        const int v = s.wsum[w];
        before += w < warp ? v : 0;
        total += v;
    }
    int run = before + incl - mine;
    for (int i = 0; i < per; ++i) {
        const int e = e0 + i;
        if (e < ne) {
            s.off[e] = run;
            a.out.offsets[e] = run;
            run += __popcll(s.mask[e]);
        }
    }
    if (tid == 0) {
        s.off[ne] = total;
        a.out.offsets[ne] = total;
    }
    __syncthreads();

    for (int p = tid; p < pairs; p += kThreads) {
        const int e = s.ids[p];
        if (e >= 0 && e < ne) {
            const int t = p / slots;
            const int rank = __popcll(s.mask[e] & ((1ull << t) - 1ull));
            const int row = s.off[e] + rank;
            a.out.perm[row] = p;
            a.out.inv_perm[p] = row;
            if (a.fill_masked) a.out.masked_pairs[static_cast<std::size_t>(e) * a.max_tokens + rank] = p;
        } else {
            a.out.inv_perm[p] = -1;
        }
    }
    for (int r = total + tid; r < pairs; r += kThreads) a.out.perm[r] = -1; // rows of skipped pairs
    if (a.fill_masked) {
        const int n = ne * a.max_tokens;
        for (int i = tid; i < n; i += kThreads) {
            const int e = i / a.max_tokens, r = i % a.max_tokens;
            if (r >= s.off[e + 1] - s.off[e]) a.out.masked_pairs[i] = -1;
        }
    }
}

} // namespace fp4moe::cuda
