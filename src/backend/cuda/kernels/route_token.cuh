// Routing of one token by one warp, with the CPU's arithmetic (moe_route.h's promise: scores, selection and, in
// practice, weights equal routing.cpp's): shared by moe_route.cu's top-k kernel and its one-CTA top-k + plan
// (route_plan_cta.cuh). CUDA-only header.
//
// Numeric path: routing.cpp's fp32 expressions in its order, with IEEE-rounded intrinsics so nvcc cannot contract
// them, and with glibc's expf (its algorithm and table, in double with FMA: bit-identical to glibc 2.36's x86-64
// FMA variant over all 2^32 floats, checked on the host). The softmax sum runs sequentially over experts, as the
// CPU's does.
#pragma once

#include "kernels/moe_route.h"

#include <climits>
#include <cstdint>

namespace fp4moe::cuda {

constexpr int kMaxRouteExperts = 256;

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, 32-entry 2^(i/32) table, cubic), with the FMAs its x86-64
// FMA variant uses. Every double operation is an IEEE intrinsic, so the result is the CPU's to the bit.
static __device__ const unsigned long long kExp2fTable[32] = {
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

// Group-limited selection (DeepSeek-V3, n_group > 1): a group's score is the sum of its two largest biased scores
// (with multiplicity), the topk_group best groups (score desc, index asc) stay, the others' sel become -inf.
// L lanes per group (a power of 2, L * n_group <= 32 where it fits) each scan every L-th member from shared
// memory, then a butterfly over the L lanes merges their (top1, top2) pairs: the sum is the CPU's (the same two
// floats). The group ranks go through shared memory. Whole warp, converged. (An in-register form, a redux and a
// ballot per group, was slower on the H200: 27th session, experiments/2026-12-04-s27.)
template <int kPerLane>
__device__ __forceinline__ void keep_groups(float (&sel)[kPerLane], const float *select, const route_rule &rule,
                                            int per, float *group, int *keep) {
    constexpr unsigned kFull = 0xFFFFFFFFu;
    const float kInf = __uint_as_float(0x7F800000u);
    const int lane = threadIdx.x % 32, n_exp = rule.experts;
    __syncwarp();
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
        // The lane's exps are independent chains: unrolled, they overlap.
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            if (i * 32 + lane < n_exp) score[i * 32 + lane] = expf_glibc(__fsub_rn(score[i * 32 + lane], mx), sc.exp2);
        __syncwarp();
        // NOTE: sequential over e like the CPU's loop: a tree sum could move p by an ulp and create or break a tie.
        float sum = 0.0f;
#pragma unroll 8
        for (int e = 0; e < n_exp; ++e) sum = __fadd_rn(sum, score[e]);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            if (i * 32 + lane < n_exp)
                select[i * 32 + lane] = score[i * 32 + lane] = __fdiv_rn(score[i * 32 + lane], sum);
    } else if (!scores_ready) {
#pragma unroll 1
        for (int e = lane; e < n_exp; e += 32)
            sigmoid_score(score[e], rule.correction_bias ? bias[e] : 0.0f, sc.exp2, score[e], select[e]);
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) sel[i] = i * 32 + lane < n_exp ? select[i * 32 + lane] : -kInf;
    if (!rule.softmax && rule.n_group > 1) {
        const int per = n_exp / rule.n_group;
        keep_groups<kPerLane>(sel, select, rule, per, sc.group, sc.keep);
    }

    // k rounds of a warp argmax under (value desc, index asc): a redux max over order keys, then a redux min over
    // the indices holding it. Key 0 = no candidate (absent or taken): below every expert, even one at -inf. The
    // weight sum follows the CPU's order (selection order) off the rounds' dependent chain. (A ballot per register
    // slot instead of the redux min was no faster: experiments/2026-12-04-s27.)
    __syncwarp(); // the rounds read other lanes' score[] (votes order no memory)
    unsigned key[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) key[i] = i * 32 + lane < n_exp ? order_key(sel[i]) : 0u;
    int *chosen = sc.chosen;
    float sum = 0.0f;
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
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) key[i] = i * 32 + lane == bi ? 0u : key[i];
        if (lane == 0) chosen[j] = bi;
        sum = __fadd_rn(sum, score[bi]);
    }
    __syncwarp();

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

// The checks of moe_desc::validate, plus what the top-k kernels support.
inline bool route_rule_ok(const route_rule &r, int tokens, const float *bias) {
    if (tokens < 0 || r.experts <= 0 || r.experts > kMaxRouteExperts || r.top_k <= 0 || r.top_k > r.experts ||
        r.shared < 0)
        return false;
    if (r.n_group <= 0 || r.experts % r.n_group != 0 || r.topk_group <= 0 || r.topk_group > r.n_group ||
        r.top_k > r.topk_group * (r.experts / r.n_group) || (r.n_group > 1 && r.experts / r.n_group < 2))
        return false;
    return !(r.correction_bias && (r.softmax || bias == nullptr));
}

} // namespace fp4moe::cuda
