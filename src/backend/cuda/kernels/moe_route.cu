// Top-k routing and the token plan of one MoE batch on the GPU (moe_route.h; the router logits are in
// router_logits.cu).
//
// Numeric path: routing repeats routing.cpp's fp32 expressions in its order, with IEEE-rounded intrinsics so nvcc
// cannot contract them, and with glibc's expf (its algorithm and table, in double with FMA: bit-identical to glibc
// 2.36's x86-64 FMA variant over all 2^32 floats, checked on the host), so scores, selection and, in practice,
// weights equal the CPU's. The softmax sum runs sequentially over experts, as the CPU's does. The plan is integer
// work: a stable counting sort.
#include "kernels/moe_plan_multi.h"
#include "kernels/moe_route.h"
#include "kernels/pdl.cuh"
#include "kernels/plan_scatter.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace fp4moe::cuda {

namespace {

// ---- top-k -----------------------------------------------------------------------------------------------

constexpr int kRouteWarps = 4;
constexpr int kMaxRouteExperts = 256;

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, 32-entry 2^(i/32) table, cubic), with the FMAs its x86-64
// FMA variant uses. Every double operation is an IEEE intrinsic, so the result is the CPU's to the bit.
__device__ const unsigned long long kExp2fTable[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull, 0x3fef72b83c7d517bull,
    0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull, 0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull,
    0x3feedea64c123422ull, 0x3feece086061892dull, 0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull,
    0x3feea47eb03a5585ull, 0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull, 0x3feee89f995ad3adull,
    0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull, 0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full,
    0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

__device__ __forceinline__ float expf_glibc(float x, const unsigned long long *table) {
    const unsigned ux = __float_as_uint(x);
    const unsigned abstop = (ux >> 20) & 0x7FFu;
    if (abstop >= 0x42Bu) { // |x| >= 88, inf or nan
        if (ux == 0xFF800000u) return 0.0f;
        if (abstop >= 0x7F8u) return x + x;
        if (x > 0x1.62e42ep6f) return __uint_as_float(0x7F800000u);
        if (x < -0x1.9fe368p6f) return 0.0f;
    }
    constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;
    constexpr double kShift = 0x1.8p+52;
    constexpr double kC0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32, kC1 = 0x1.ebfce50fac4f3p-3 / 32 / 32,
                     kC2 = 0x1.62e42ff0c52d6p-1 / 32;
    const double xd = static_cast<double>(x);
    double kd = __fma_rn(kInvLn2N, xd, kShift); // x / ln2 * 32 = k + r, k rounded to an integer by the shift
    const unsigned long long ki = static_cast<unsigned long long>(__double_as_longlong(kd));
    kd = __dsub_rn(kd, kShift);
    const double r = __fma_rn(kInvLn2N, xd, -kd);
    const double s = __longlong_as_double(static_cast<long long>(table[ki % 32] + (ki << 47)));
    const double z = __fma_rn(kC0, r, kC1);
    const double r2 = __dmul_rn(r, r);
    double y = __fma_rn(kC2, r, 1.0);
    y = __fma_rn(z, r2, y);
    return __double2float_rn(__dmul_rn(y, s));
}

// Per-warp scratch of one token's routing (shared memory).
struct route_scratch {
    float *score;                   // [E] p or s: the unbiased score (the weights)
    float *select;                  // [E] biased scores (group stage)
    float *group;                   // [n_group] group scores
    int *keep;                      // [n_group] group kept
    int *chosen;                    // [k] selected experts, in selection order
    const unsigned long long *exp2; // kExp2fTable, copied to shared memory
};

// Order-preserving key of a float (larger value, larger key; -0 and +0 equal). 0 is below every non-NaN key,
// so it marks "no candidate".
__device__ __forceinline__ unsigned order_key(float v) {
    const unsigned b = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(unsigned key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// Sigmoid scoring of one logit: s = 1 / (1 + e^-v) (a correctly rounded reciprocal is the CPU's division),
// and what the selection ranks, s + bias.
__device__ __forceinline__ void sigmoid_score(float v, float bias, const unsigned long long *exp2, float &score,
                                              float &select) {
    score = __frcp_rn(__fadd_rn(1.0f, expf_glibc(-v, exp2)));
    select = __fadd_rn(score, bias);
}

// Routes token `t` with the calling warp (whole warp, converged; no block barrier): reads its logits `row`
// [E], writes ids and weights [k + S] to id_out / w_out and, if not null, the ids to s_ids too. Lane l holds
// experts l, l + 32, ...; kPerLane = ceil(E / 32) rounded up to a power of 2.
// scores_ready (sigmoid only): score[] and select[] already hold this token's scores (computed by the whole CTA).
// finite_known (only with scores_ready): 1 / 0 = whether all the token's logits are finite, found while scoring, so the
// logits are not read again (one L2 round trip less on the routing chain); -1: read and check them here.
template <int kPerLane>
__device__ __forceinline__ void route_token(const float *row, const float *bias, int t, const route_rule &rule,
                                            const route_scratch &sc, std::int32_t *id_out, float *w_out, int *s_ids,
                                            int *bad_token, bool scores_ready = false, int finite_known = -1) {
    constexpr unsigned kFull = 0xFFFFFFFFu;
    const float kInf = __uint_as_float(0x7F800000u);
    const int lane = threadIdx.x % 32;
    const int n_exp = rule.experts, k = rule.top_k, slots = rule.top_k + rule.shared;
    float *score = sc.score;

    // The lane's logits go to score[] (its own entries: no sync needed to read them back); the score loops run
    // over experts without unrolling, so expf and the divisions are inlined once and the code stays small.
    const bool known = finite_known >= 0;
    bool finite = !known || finite_known == 1;
    unsigned mk = 0; // the max logit as a key: one redux instead of a shuffle butterfly
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = i * 32 + lane;
        if (!known && e < n_exp) {
            const float v = __ldcg(row + e);
            if (!scores_ready) score[e] = v;
            finite = finite && isfinite(v);
            mk = max(mk, order_key(v));
        }
    }
    if (!__all_sync(kFull, finite)) {
        for (int j = lane; j < slots; j += 32) {
            id_out[j] = -1;
            w_out[j] = 0.0f;
            if (s_ids != nullptr) s_ids[j] = -1;
        }
        if (lane == 0 && bad_token != nullptr) atomicMin(bad_token, t);
        return;
    }

    float sel[kPerLane]; // what the top-k ranks
    float *select = sc.select;
    if (rule.softmax) {
        const float mx = key_value(__reduce_max_sync(kFull, mk));
#pragma unroll 1
        for (int e = lane; e < n_exp; e += 32) score[e] = expf_glibc(__fsub_rn(score[e], mx), sc.exp2);
        __syncwarp();
        // NOTE: sequential over e like the CPU's loop: a tree sum could move p by an ulp and create or break a tie.
        float sum = 0.0f;
#pragma unroll 8
        for (int e = 0; e < n_exp; ++e) sum = __fadd_rn(sum, score[e]);
        __syncwarp();
#pragma unroll 1
        for (int e = lane; e < n_exp; e += 32) select[e] = score[e] = __fdiv_rn(score[e], sum);
    } else if (!scores_ready) {
#pragma unroll 1
        for (int e = lane; e < n_exp; e += 32)
            sigmoid_score(score[e], rule.correction_bias ? bias[e] : 0.0f, sc.exp2, score[e], select[e]);
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) sel[i] = i * 32 + lane < n_exp ? select[i * 32 + lane] : -kInf;
    if (!rule.softmax) {
        if (rule.n_group > 1) {
            const int per = n_exp / rule.n_group;
            float *group = sc.group;
            int *keep = sc.keep;
            __syncwarp();
            // The two largest values of each group, with multiplicity: L lanes per group (a power of 2, L *
            // n_group <= 32 where it fits) each scan every L-th member, then a butterfly over the L lanes
            // merges their (top1, top2) pairs. Their sum is the CPU's (the same two floats).
            int L = 1;
            while (L * 2 * rule.n_group <= 32) L *= 2;
            for (int g0 = 0; g0 < rule.n_group; g0 += 32 / L) { // uniform over the warp
                const int g = g0 + lane / L, sub = lane % L;
                float top1 = -kInf, top2 = -kInf;
                if (g < rule.n_group) {
                    for (int j = sub; j < per; j += L) {
                        const float x = select[g * per + j];
                        if (x > top1) {
                            top2 = top1;
                            top1 = x;
                        } else if (x > top2) {
                            top2 = x;
                        }
                    }
                }
                for (int m = 1; m < L; m <<= 1) {
                    const float o1 = __shfl_xor_sync(kFull, top1, m), o2 = __shfl_xor_sync(kFull, top2, m);
                    top2 = fmaxf(fminf(top1, o1), fmaxf(top2, o2));
                    top1 = fmaxf(top1, o1);
                }
                if (g < rule.n_group && sub == 0) group[g] = __fadd_rn(top1, top2);
            }
            __syncwarp();
            for (int g = lane; g < rule.n_group; g += 32) { // rank under (score desc, index asc)
                const float gs = group[g];
                int rank = 0;
                for (int h = 0; h < rule.n_group; ++h) rank += group[h] > gs || (group[h] == gs && h < g);
                keep[g] = rank < rule.topk_group;
            }
            __syncwarp();
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                const int e = i * 32 + lane;
                if (e < n_exp && !keep[e / per]) sel[i] = -kInf;
            }
        }
    }

    // k rounds of a warp argmax under (value desc, index asc): a redux max over order keys, then a redux min
    // over the indices holding it. Key 0 = no candidate (absent or taken): below every expert, even one at -inf.
    unsigned key[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) key[i] = i * 32 + lane < n_exp ? order_key(sel[i]) : 0u;
    int *chosen = sc.chosen;
    for (int j = 0; j < k; ++j) {
        unsigned best = 0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) best = max(best, key[i]);
        best = __reduce_max_sync(kFull, best);
        int cand = INT_MAX;
#pragma unroll
        for (int i = kPerLane - 1; i >= 0; --i)
            if (key[i] == best) cand = i * 32 + lane; // the lowest i holding it
        const int bi = __reduce_min_sync(kFull, cand);
        if (bi % 32 == lane) {
#pragma unroll
            for (int i = 0; i < kPerLane; ++i)
                if (i == bi / 32) key[i] = 0u;
        }
        if (lane == 0) chosen[j] = bi;
    }
    __syncwarp();

    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum = __fadd_rn(sum, score[chosen[j]]);
    const float denom = rule.softmax ? sum : __fadd_rn(sum, 1e-20f);
    for (int j = lane; j < slots; j += 32) {
        std::int32_t id;
        float w;
        if (j < k) {
            id = chosen[j];
            w = score[id];
            if (rule.renormalize) w = __fdiv_rn(w, denom);
            if (rule.routed_scaling_factor != 1.0f) w = __fmul_rn(w, rule.routed_scaling_factor);
        } else {
            id = n_exp + (j - k);
            w = 1.0f;
        }
        id_out[j] = id;
        w_out[j] = w;
        if (s_ids != nullptr) s_ids[j] = id;
    }
}

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

constexpr int kFusedThreads = 1024;
constexpr int kFusedMaxTokens = 64;       // a token bitmask per expert is one 64-bit word
constexpr int kFusedMaxPairs = 2048;      // T * slots
constexpr int kFusedMaxExperts = 1024;    // E + S: one thread per expert in the scan
constexpr int kFusedMaskedFill = 1 << 16; // masked_pairs entries written in-kernel; above, a separate grid

// Per-warp scratch floats/ints of route_token, and the whole dynamic shared memory of the fused kernel.
int route_scratch_words(const route_rule &r) {
    return 2 * r.experts + 2 * r.n_group + r.top_k;
}
std::size_t fused_smem_bytes(const route_rule &r, int tokens, int num_experts) {
    const int warps = std::min(32, tokens), pairs = tokens * (r.top_k + r.shared);
    return 8 * static_cast<std::size_t>(num_experts) +
           4 * (static_cast<std::size_t>(pairs) + num_experts + 1 + 32 + r.experts +
                static_cast<std::size_t>(warps) * route_scratch_words(r));
}

// One CTA of 1024 threads: warp w routes tokens w, w + 32 (ids and weights to global and to shared memory),
// then the plan from the shared ids. Ids are distinct within a token, so expert e's rows are the tokens of its
// 64-bit token mask in order: counts = popcount, row = offsets[e] + popcount of the mask below the token,
// exactly moe_plan_from_ids' order.
template <int kPerLane>
__global__ void __launch_bounds__(kFusedThreads, 1)
    moe_route_topk_plan_kernel(const float *logits, const float *__restrict__ bias, int tokens, route_rule rule,
                               int num_experts, int max_tokens, bool fill_masked, std::int32_t *__restrict__ ids,
                               float *__restrict__ weights, int *bad_token, plan_buffers out) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    allow_next_kernel();
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int slots = rule.top_k + rule.shared, pairs = tokens * slots, ne = num_experts;
    const int route_warps = min(32, tokens);
    auto *s_mask = reinterpret_cast<unsigned long long *>(smem_raw); // [ne] token mask per expert
    int *s_ids = reinterpret_cast<int *>(s_mask + ne);               // [pairs]
    int *s_off = s_ids + pairs;                                      // [ne + 1]
    int *s_wsum = s_off + ne + 1;                                    // [32]
    float *s_bias = reinterpret_cast<float *>(s_wsum + 32);          // [E]
    int *s_route = reinterpret_cast<int *>(s_bias + rule.experts);   // [route_warps][scratch words]
    __shared__ unsigned long long s_exp2[32];
    __shared__ int s_bad[32]; // scores_ready: token t has a non-finite logit
    // Before the wait: nothing here depends on the previous kernel (the bias and the table are constants).
    if (tid < 32) s_bad[tid] = 0;
    for (int e = tid; e < ne; e += kFusedThreads) s_mask[e] = 0ull;
    if (rule.correction_bias)
        for (int e = tid; e < rule.experts; e += kFusedThreads) s_bias[e] = __ldg(bias + e);
    if (tid < 32) s_exp2[tid] = kExp2fTable[tid];
    __syncthreads();
    wait_for_previous_kernel();

    const int words = 2 * rule.experts + 2 * rule.n_group + rule.top_k; // route scratch per warp
    // Sigmoid with one token per warp: the whole CTA computes the scores (an expert per thread, not E / 32
    // per lane in sequence), each into its token's warp scratch.
    const bool scores_ready = !rule.softmax && tokens <= 32;
    if (scores_ready) {
        for (int i = tid; i < tokens * rule.experts; i += kFusedThreads) {
            const int t = i / rule.experts, e = i - t * rule.experts;
            float *base = reinterpret_cast<float *>(s_route + t * words);
            const float v = __ldcg(logits + i);
            if (!isfinite(v)) s_bad[t] = 1;
            sigmoid_score(v, rule.correction_bias ? s_bias[e] : 0.0f, s_exp2, base[e], base[rule.experts + e]);
        }
        __syncthreads();
    }
    if (warp < route_warps) {
        float *base = reinterpret_cast<float *>(s_route + warp * words);
        const route_scratch sc{base,
                               base + rule.experts,
                               base + 2 * rule.experts,
                               reinterpret_cast<int *>(base + 2 * rule.experts + rule.n_group),
                               reinterpret_cast<int *>(base + 2 * rule.experts + 2 * rule.n_group),
                               s_exp2};
        for (int t = warp; t < tokens; t += route_warps) {
            const std::size_t p0 = static_cast<std::size_t>(t) * slots;
            route_token<kPerLane>(logits + static_cast<std::size_t>(t) * rule.experts, s_bias, t, rule, sc, ids + p0,
                                  weights + p0, s_ids + p0, bad_token, scores_ready, scores_ready ? 1 - s_bad[t] : -1);
            __syncwarp();
        }
    }
    __syncthreads();
    for (int p = tid; p < pairs; p += kFusedThreads) {
        const int e = s_ids[p];
        if (e >= 0 && e < ne) atomicOr(&s_mask[e], 1ull << (p / slots));
    }
    __syncthreads();

    // counts, then offsets by a block scan (one expert per thread).
    const int c = tid < ne ? __popcll(s_mask[tid]) : 0;
    if (tid < ne) out.counts[tid] = c;
    int incl = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d) incl += y;
    }
    if (lane == 31) s_wsum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const int w = s_wsum[lane];
        int wi = w;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int y = __shfl_up_sync(0xFFFFFFFFu, wi, d);
            if (lane >= d) wi += y;
        }
        s_wsum[lane] = wi - w; // exclusive base of each warp
    }
    __syncthreads();
    const int excl = s_wsum[warp] + incl - c;
    if (tid < ne) {
        s_off[tid] = excl;
        out.offsets[tid] = excl;
    }
    if (tid == ne - 1) {
        s_off[ne] = excl + c;
        out.offsets[ne] = excl + c;
    }
    __syncthreads();

    const int valid = s_off[ne];
    for (int p = tid; p < pairs; p += kFusedThreads) {
        const int e = s_ids[p];
        if (e >= 0 && e < ne) {
            const int t = p / slots;
            const int rank = __popcll(s_mask[e] & ((1ull << t) - 1ull));
            const int row = s_off[e] + rank;
            out.perm[row] = p;
            out.inv_perm[p] = row;
            if (fill_masked) out.masked_pairs[static_cast<std::size_t>(e) * max_tokens + rank] = p;
        } else {
            out.inv_perm[p] = -1;
        }
    }
    for (int r = valid + tid; r < pairs; r += kFusedThreads) out.perm[r] = -1; // rows of skipped pairs
    if (fill_masked) {
        const int n = ne * max_tokens;
        for (int i = tid; i < n; i += kFusedThreads) {
            const int e = i / max_tokens, r = i % max_tokens;
            if (r >= s_off[e + 1] - s_off[e]) out.masked_pairs[i] = -1;
        }
    }
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

// The checks of moe_desc::validate, plus what the top-k kernels support.
bool route_rule_ok(const route_rule &r, int tokens, const float *bias) {
    if (tokens < 0 || r.experts <= 0 || r.experts > kMaxRouteExperts || r.top_k <= 0 || r.top_k > r.experts ||
        r.shared < 0)
        return false;
    if (r.n_group <= 0 || r.experts % r.n_group != 0 || r.topk_group <= 0 || r.topk_group > r.n_group ||
        r.top_k > r.topk_group * (r.experts / r.n_group) || (r.n_group > 1 && r.experts / r.n_group < 2))
        return false;
    return !(r.correction_bias && (r.softmax || bias == nullptr));
}

constexpr std::size_t kFusedSmemMax =
    8 * kFusedMaxExperts + 4 * (kFusedMaxPairs + kFusedMaxExperts + 1 + 32 + kMaxRouteExperts +
                                32 * (2 * kMaxRouteExperts + 2 * (kMaxRouteExperts / 2) + kMaxRouteExperts));

template <int kPerLane>
cudaError_t launch_topk_plan(const float *logits, const float *bias, int tokens, const route_rule &r, int num_experts,
                             int max_tokens, bool fill_masked, std::int32_t *ids, float *weights, int *bad_token,
                             const plan_buffers &out, cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        moe_route_topk_plan_kernel<kPerLane>, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kFusedSmemMax});
    if (attr != cudaSuccess) return attr;
    return launch_pdl(moe_route_topk_plan_kernel<kPerLane>, dim3(1), dim3(kFusedThreads),
                      fused_smem_bytes(r, tokens, num_experts), 1, stream, logits, bias, tokens, r, num_experts,
                      max_tokens, fill_masked, ids, weights, bad_token, out);
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
// The masked layout's rows from a finished permuted plan: one grid over (row, expert), after the plan kernel.
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
    return tokens >= 0 && tokens <= kFusedMaxTokens && pairs <= kFusedMaxPairs && rule.experts <= kMaxRouteExperts &&
           rule.n_group <= kMaxRouteExperts / 2 && rule.experts + rule.shared <= kFusedMaxExperts;
}

bool moe_route_fused_preferred(int tokens, const route_rule &rule) {
    return moe_route_topk_plan_fits(tokens, rule) && tokens <= 8;
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
    const bool fill_masked = out.masked_pairs != nullptr &&
                             static_cast<long long>(ne) * max_tokens <= static_cast<long long>(kFusedMaskedFill);
    const int per_lane = ceil_div(r.experts, 32);
    cudaError_t e;
    if (per_lane <= 1)
        e = launch_topk_plan<1>(logits, bias, tokens, r, ne, max_tokens, fill_masked, ids, weights, bad_token, out,
                                stream);
    else if (per_lane <= 2)
        e = launch_topk_plan<2>(logits, bias, tokens, r, ne, max_tokens, fill_masked, ids, weights, bad_token, out,
                                stream);
    else if (per_lane <= 4)
        e = launch_topk_plan<4>(logits, bias, tokens, r, ne, max_tokens, fill_masked, ids, weights, bad_token, out,
                                stream);
    else
        e = launch_topk_plan<8>(logits, bias, tokens, r, ne, max_tokens, fill_masked, ids, weights, bad_token, out,
                                stream);
    if (e != cudaSuccess) return e;
    if (out.masked_pairs != nullptr && !fill_masked && max_tokens > 0)
        if (auto em = launch_masked_fill(out, ne, max_tokens, stream); em != cudaSuccess) return em;
    return cudaGetLastError();
}

cudaError_t moe_route_fused(const std::uint16_t *x, const float *router, const float *bias, int tokens, int hidden,
                            const route_rule &rule, int max_tokens, float *logits, std::int32_t *ids, float *weights,
                            int *bad_token, const plan_buffers &out, cudaStream_t stream, bool router_bf16) {
    if (!route_rule_ok(rule, tokens, bias) || !moe_route_topk_plan_fits(tokens, rule) || hidden <= 0 ||
        max_tokens < 0 || (out.masked_pairs != nullptr && tokens > max_tokens))
        return cudaErrorInvalidValue;
    if (tokens > 0) {
        if (x == nullptr || router == nullptr || logits == nullptr) return cudaErrorInvalidValue;
        if (const cudaError_t e =
                moe_router_logits(x, router, tokens, hidden, rule.experts, logits, stream, router_bf16);
            e != cudaSuccess)
            return e;
    }
    return moe_route_topk_plan(logits, bias, tokens, rule, max_tokens, ids, weights, bad_token, out, stream);
}

} // namespace fp4moe::cuda
