// Router logits of one MoE batch on the GPU (moe_route.h): logits = x · routerᵀ in fp32, bf16 activations
// widened exactly. Four kernels by batch size: split-K over a cluster (T <= 64, the router read once; from T = 8
// a bf16 router of >= 2^19 weights goes to the tensor cores instead, router_logits_decode_mma.cu), a GEMV (the
// router read once per 8 tokens), a tiled kernel, and, for large batches, the tensor-core kernels (the router
// split into three exact bf16 parts, or one where every router value is a bf16): wgmma on sm_90 from
// kRouterWgmmaMinTokens (sm90a/router_logits_wgmma.cu), mma.sync below that and elsewhere (router_logits_mma.cu).
#include "kernels/moe_route.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/router_logits_mma.h"
#include "kernels/router_logits_wgmma.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace fp4moe::cuda {

namespace {

constexpr int kGemvThreads = 128;
constexpr int kGemvTokens = 8; // tokens per CTA of the GEMV: the router row is read once per 8 tokens
constexpr int BLOCK_M = 64;    // tokens per tile (tiled kernel)
constexpr int BLOCK_N = 64;    // experts per tile
constexpr int BLOCK_K = 16;
constexpr int kTileThreads = 256; // 16 x 16 threads, 4 x 4 outputs each
constexpr int kTiledMinTiles = 64;
// Past split-K's range (T > 64) the tensor-core kernel (split K over a cluster while its tiles are few) takes
// ~20-40 us however small the batch, the GEMV ~ T x E x H / 1.5-2 TMAC/s, so the tensor cores from ~2^25 MACs
// on (H200: qwen3-30b-a3b T = 96 GEMV 16.6 us, mma 22.6; T = 256 42 -> 23 us; deepseek-v3 T = 96 87 -> 36 us;
// glm-4.5-air T = 1024 257 -> 34 us).
constexpr int kMmaMinTokens = 65;
constexpr long long kMmaMinMacs = 1LL << 25;

__device__ __forceinline__ float bf16_lo(unsigned w) {
    return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf16_hi(unsigned w) {
    return __uint_as_float(w & 0xFFFF0000u);
}
__device__ __forceinline__ float bf16_at(const std::uint16_t *p) {
    return __uint_as_float(unsigned{*p} << 16);
}

// Small T: one CTA per (kExperts experts, 8 tokens); its 4 warps split the hidden dimension, each thread reads
// the router rows in float4 and the 8 token rows in 4 x bf16. The router is read once per 8 tokens, x once per
// kExperts experts. Per output: per-thread fp32 FMA chains, a warp butterfly, then a sum over the 4 warps.
template <int kExperts, bool kVec>
__global__ void __launch_bounds__(kGemvThreads)
    sm90_f32_router_logits_gemv(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                int hidden, int experts, float *__restrict__ logits) {
    allow_next_kernel();
    wait_for_previous_kernel();
    const int e0 = blockIdx.x * kExperts;
    const int ne = min(kExperts, experts - e0);
    const int t0 = blockIdx.y * kGemvTokens;
    const int nt = min(kGemvTokens, tokens - t0);
    const float *r = router + static_cast<std::size_t>(e0) * hidden;
    const std::uint16_t *xt = x + static_cast<std::size_t>(t0) * hidden;
    float acc[kExperts][kGemvTokens] = {};
    if constexpr (kVec) {
        const int h4 = hidden / 4;
#pragma unroll(kExperts == 1 ? 4 : 2)
        for (int k4 = threadIdx.x; k4 < h4; k4 += kGemvThreads) {
            float4 w[kExperts];
#pragma unroll
            for (int i = 0; i < kExperts; ++i)
                w[i] = i < ne ? __ldg(reinterpret_cast<const float4 *>(r + static_cast<std::size_t>(i) * hidden) + k4)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int j = 0; j < kGemvTokens; ++j) {
                if (j < nt) {
                    const uint2 v =
                        __ldg(reinterpret_cast<const uint2 *>(xt + static_cast<std::size_t>(j) * hidden) + k4);
                    const float xv[4] = {bf16_lo(v.x), bf16_hi(v.x), bf16_lo(v.y), bf16_hi(v.y)};
#pragma unroll
                    for (int i = 0; i < kExperts; ++i) {
                        acc[i][j] = fmaf(xv[0], w[i].x, acc[i][j]);
                        acc[i][j] = fmaf(xv[1], w[i].y, acc[i][j]);
                        acc[i][j] = fmaf(xv[2], w[i].z, acc[i][j]);
                        acc[i][j] = fmaf(xv[3], w[i].w, acc[i][j]);
                    }
                }
            }
        }
    } else {
        for (int k = threadIdx.x; k < hidden; k += kGemvThreads) {
            float w[kExperts];
#pragma unroll
            for (int i = 0; i < kExperts; ++i) w[i] = i < ne ? r[static_cast<std::size_t>(i) * hidden + k] : 0.0f;
#pragma unroll
            for (int j = 0; j < kGemvTokens; ++j) {
                if (j < nt) {
                    const float xv = bf16_at(xt + static_cast<std::size_t>(j) * hidden + k);
#pragma unroll
                    for (int i = 0; i < kExperts; ++i) acc[i][j] = fmaf(xv, w[i], acc[i][j]);
                }
            }
        }
    }
    constexpr int kOut = kExperts * kGemvTokens;
    __shared__ float partial[kGemvThreads / 32][kOut];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kExperts; ++i)
#pragma unroll
        for (int j = 0; j < kGemvTokens; ++j) {
            float v = acc[i][j];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
            if (lane == 0) partial[warp][i * kGemvTokens + j] = v;
        }
    __syncthreads();
    for (int o = threadIdx.x; o < kOut; o += kGemvThreads) {
        const int i = o / kGemvTokens, j = o % kGemvTokens;
        if (i >= ne || j >= nt) continue;
        float s = partial[0][o];
#pragma unroll
        for (int w = 1; w < kGemvThreads / 32; ++w) s += partial[w][o];
        logits[static_cast<std::size_t>(t0 + j) * experts + e0 + i] = s;
    }
}

// Loads this thread's 4 consecutive k of one token row and one router row (zeros past the edges).
template <bool kVec>
__device__ __forceinline__ void load_tile_regs(const std::uint16_t *__restrict__ x, const float *__restrict__ router,
                                               int tokens, int hidden, int experts, int t, int e, int k, float (&xr)[4],
                                               float (&rr)[4]) {
    if constexpr (kVec) {
        uint2 xv = make_uint2(0u, 0u);
        float4 rv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t < tokens && k < hidden)
            xv = __ldg(reinterpret_cast<const uint2 *>(x + static_cast<std::size_t>(t) * hidden + k));
        if (e < experts && k < hidden)
            rv = __ldg(reinterpret_cast<const float4 *>(router + static_cast<std::size_t>(e) * hidden + k));
        xr[0] = bf16_lo(xv.x), xr[1] = bf16_hi(xv.x), xr[2] = bf16_lo(xv.y), xr[3] = bf16_hi(xv.y);
        rr[0] = rv.x, rr[1] = rv.y, rr[2] = rv.z, rr[3] = rv.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool kin = k + i < hidden;
            xr[i] = t < tokens && kin ? bf16_at(x + static_cast<std::size_t>(t) * hidden + k + i) : 0.0f;
            rr[i] = e < experts && kin ? router[static_cast<std::size_t>(e) * hidden + k + i] : 0.0f;
        }
    }
}

// Large T: 64 x 64 output tiles, K in steps of 16 through shared memory (stored k-major so each thread reads
// its 4 tokens and 4 experts as float4), the next K step prefetched into registers. Each output is one FMA
// chain over k = 0 .. H-1, the CPU's order.
template <bool kVec>
__global__ void __launch_bounds__(kTileThreads)
    sm90_f32_router_logits_tiled(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                 int hidden, int experts, float *__restrict__ logits) {
    __shared__ __align__(16) float xs[BLOCK_K][BLOCK_M + 4];
    __shared__ __align__(16) float rs[BLOCK_K][BLOCK_N + 4];
    allow_next_kernel();
    wait_for_previous_kernel();
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
    const int lrow = tid / 4, lk = (tid % 4) * 4; // loader: row of the tile, first of its 4 k
    const int tx = tid % 16, ty = tid / 16;       // compute: experts n0 + 4 tx .., tokens m0 + 4 ty ..
    float acc[4][4] = {};
    float xr[4], rr[4];
    load_tile_regs<kVec>(x, router, tokens, hidden, experts, m0 + lrow, n0 + lrow, lk, xr, rr);
    for (int k0 = 0; k0 < hidden; k0 += BLOCK_K) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            xs[lk + i][lrow] = xr[i];
            rs[lk + i][lrow] = rr[i];
        }
        __syncthreads();
        if (k0 + BLOCK_K < hidden)
            load_tile_regs<kVec>(x, router, tokens, hidden, experts, m0 + lrow, n0 + lrow, k0 + BLOCK_K + lk, xr, rr);
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; ++kk) {
            const float4 a = *reinterpret_cast<const float4 *>(&xs[kk][ty * 4]);
            const float4 b = *reinterpret_cast<const float4 *>(&rs[kk][tx * 4]);
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int t = m0 + ty * 4 + i;
        if (t >= tokens) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int e = n0 + tx * 4 + j;
            if (e < experts) logits[static_cast<std::size_t>(t) * experts + e] = acc[i][j];
        }
    }
}

using ptx::load_stream_f4;

// Small T (<= 64, H % 4 == 0): split-K over a cluster of kSplitCluster CTAs, the router read exactly once.
// Cluster y owns experts [8 y, 8 y + 8) for every token; CTA rank r of the cluster owns the r-th of 8 K chunks
// (float4 units). Its 8 warps are WE expert groups of NE experts x WK K sub-chunks. In a warp, lane = tg * LK
// + kl: kl strides the warp's K range in float4 steps, tg picks tokens tg, tg + LT, ... (TT of them, LT * TT
// >= T). Each thread keeps NE x TT fp32 FMA chains, loading U router float4 per expert ahead; a butterfly over
// the LK lanes (halving the values held at each step while there is more than one) sums them, each warp
// leaves its partials in shared memory, and after a cluster barrier the cluster's threads sum every logit over
// (rank, sub-chunk) in that fixed order from distributed shared memory: deterministic run to run.
constexpr int kSplitCluster = 8;
constexpr int kSplitThreads = 256;
constexpr int kSplitExperts = 8; // experts per cluster
constexpr int kSplitMaxTokens = 64;

constexpr int log2_of(int v) {
    return v <= 1 ? 0 : 1 + log2_of(v / 2);
}

template <int NE, int TT, int LT, int WE, int WK, int U>
__global__ void __launch_bounds__(kSplitThreads, 2)
    sm90_f32_router_logits_splitk(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                  int hidden, int experts, float *__restrict__ logits) {
    static_assert(WE * NE == kSplitExperts && WE * WK == kSplitThreads / 32 && LT * TT <= kSplitMaxTokens);
    constexpr int LK = 32 / LT;
    constexpr int N = NE * TT;
    __shared__ float part[WK][kSplitExperts][kSplitMaxTokens];
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    allow_next_kernel();

    const int rank = static_cast<int>(cluster.block_rank());
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int we = warp / WK, wk = warp % WK, tg = lane / LK, kl = lane % LK;
    const int h4 = hidden / 4;
    const int cta_chunk = (h4 + kSplitCluster - 1) / kSplitCluster;
    const int cta_beg = min(h4, rank * cta_chunk), cta_end = min(h4, cta_beg + cta_chunk);
    const int warp_chunk = (cta_end - cta_beg + WK - 1) / WK;
    const int kb = min(cta_end, cta_beg + wk * warp_chunk), ke = min(cta_end, kb + warp_chunk);
    const int e0 = blockIdx.y * kSplitExperts + we * NE;
    const float *rrow[NE];
#pragma unroll
    for (int i = 0; i < NE; ++i) {
        rrow[i] = e0 + i < experts ? router + static_cast<std::size_t>(e0 + i) * hidden : nullptr;
    }
    // The router never depends on the previous kernel: pull this thread's first batch into L2 before waiting.
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int k4 = kb + kl + u * LK;
#pragma unroll
        for (int i = 0; i < NE; ++i)
            if (k4 < ke && rrow[i] != nullptr) asm volatile("prefetch.global.L2 [%0];" ::"l"(rrow[i] + 4 * k4));
    }
    wait_for_previous_kernel();

    // acc[i * TT + tt]: expert e0 + i, token tt * LT + tg. Token slots past T read the last token's row (every
    // load in bounds and unconditional, so a step's loads issue together) and are never written out.
    float acc[N] = {};
    const uint2 *x8 = reinterpret_cast<const uint2 *>(x); // 4 bf16 per load
    int xrow[TT];                                         // row offsets in uint2 units
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) xrow[tt] = min(tt * LT + tg, tokens - 1) * h4;
    for (int base = kb + kl; base < ke; base += LK * U) {
        float4 w[U][NE];
        uint2 xv[U][TT];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int k4 = base + u * LK;
            const bool kin = k4 < ke;
#pragma unroll
            for (int i = 0; i < NE; ++i)
                w[u][i] =
                    kin && rrow[i] != nullptr ? load_stream_f4(rrow[i] + 4 * k4) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int tt = 0; tt < TT; ++tt) xv[u][tt] = kin ? __ldg(x8 + xrow[tt] + k4) : make_uint2(0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int tt = 0; tt < TT; ++tt) {
                const float xf[4] = {bf16_lo(xv[u][tt].x), bf16_hi(xv[u][tt].x), bf16_lo(xv[u][tt].y),
                                     bf16_hi(xv[u][tt].y)};
#pragma unroll
                for (int i = 0; i < NE; ++i) {
                    float &a = acc[i * TT + tt];
                    a = fmaf(xf[0], w[u][i].x, a);
                    a = fmaf(xf[1], w[u][i].y, a);
                    a = fmaf(xf[2], w[u][i].z, a);
                    a = fmaf(xf[3], w[u][i].w, a);
                }
            }
        }
    }

    // Sum over the LK lanes (lane bits below LK). While n > 1 values remain, the lane with mask bit m set keeps
    // the upper half and sends the lower: after h halvings it holds n / 2^h consecutive values starting at
    // `first`; the last steps (n == 1) are plain butterflies.
    constexpr int kStages = log2_of(LK);
    int n = N, first = 0;
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) {
        const int m = LK >> (stage + 1);
        if (n > 1) {
            const bool upper = (lane & m) != 0;
            const int half = n / 2;
#pragma unroll
            for (int i = 0; i < N / 2; ++i) {
                if (i >= half) break;
                const float send = upper ? acc[i] : acc[i + half];
                const float keep = upper ? acc[i + half] : acc[i];
                acc[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, m);
            }
            if (upper) first += half;
            n = half;
        } else {
            acc[0] += __shfl_xor_sync(0xFFFFFFFFu, acc[0], m);
        }
    }
    // Lanes that ended in plain butterflies hold duplicates: the one with those bits 0 writes.
    constexpr int kHalvings = log2_of(N) < log2_of(LK) ? log2_of(N) : log2_of(LK);
    constexpr int kDupMask = (LK >> kHalvings) - 1;
    if ((lane & kDupMask) == 0) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            if (i >= n) break;
            const int j = first + i;
            const int t = (j % TT) * LT + tg;
            if (t < tokens) part[wk][we * NE + j / TT][t] = acc[i];
        }
    }
    cluster.sync();

    // Every logit of the cluster's experts: one thread each, summed over (rank, sub-chunk) in order.
    const int outs = kSplitExperts * tokens;
    for (int o = rank * kSplitThreads + threadIdx.x; o < outs; o += kSplitCluster * kSplitThreads) {
        const int es = o / tokens, t = o % tokens;
        const int e = blockIdx.y * kSplitExperts + es;
        if (e >= experts) continue;
        float v[kSplitCluster * WK];
#pragma unroll
        for (int q = 0; q < kSplitCluster; ++q) {
            const float *remote = cluster.map_shared_rank(&part[0][0][0], q);
#pragma unroll
            for (int s = 0; s < WK; ++s) v[q * WK + s] = remote[(s * kSplitExperts + es) * kSplitMaxTokens + t];
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kSplitCluster * WK; ++i) sum += v[i];
        logits[static_cast<std::size_t>(t) * experts + e] = sum;
    }
    cluster.sync(); // keep this CTA's shared memory alive until the cluster has read it
}

// A bf16 router on the tensor cores (router_logits_decode_mma.cu) instead of split-K's FMAs from T = 8 where the
// router holds >= 2^19 weights (H200, routing alone in the layer's graph: deepseek-v3 T = 8 / 16 / 32 / 64 22.7 /
// 26.4 / 33.3 / 48.0 -> 18.9 / 24.5 / 29.0 / 38.0 us, glm-4.5-air T = 8 / 64 12.5 / 23.0 -> 11.6 / 20.0; below
// 2^19, qwen3-30b-a3b's 2048 x 128, two K steps per warp were 0.5-1 us slower, and at T < 8 1-3 us slower).
bool router_logits_decode_mma_pays(int tokens, int hidden, int experts) {
    return tokens >= 8 && static_cast<long long>(hidden) * experts >= (1LL << 19);
}

// The tiled kernel once its grid fills about half the chip; below that the GEMV (more CTAs, the router read
// once per 8 tokens from L2).
bool router_logits_use_tiled(int tokens, int experts) {
    return static_cast<long long>(ceil_div(tokens, BLOCK_M)) * ceil_div(experts, BLOCK_N) >= kTiledMinTiles;
}

} // namespace

cudaError_t moe_router_logits(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream, bool router_bf16) {
    return moe_router_logits_splitk_max(x, router, tokens, hidden, experts, logits, kSplitMaxTokens, stream,
                                        router_bf16);
}

cudaError_t moe_router_logits_splitk_max(const std::uint16_t *x, const float *router, int tokens, int hidden,
                                         int experts, float *logits, int splitk_max, cudaStream_t stream,
                                         bool router_bf16) {
    if (tokens < 0 || hidden <= 0 || experts <= 0) return cudaErrorInvalidValue;
    if (tokens == 0) return cudaSuccess;
    if (x == nullptr || router == nullptr || logits == nullptr) return cudaErrorInvalidValue;
    if (ceil_div(tokens, BLOCK_M) > 65535) return cudaErrorInvalidValue;
    const bool vec = hidden % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 8 == 0 &&
                     reinterpret_cast<std::uintptr_t>(router) % 16 == 0;
    const bool decode = tokens <= std::min(splitk_max, kSplitMaxTokens);
    if (decode && router_bf16 && router_logits_decode_mma_pays(tokens, hidden, experts) &&
        router_logits_decode_mma_fits(tokens, hidden, x, router)) {
        const cudaError_t e = router_logits_decode_mma(x, router, tokens, hidden, experts, logits, stream);
        return e != cudaSuccess ? e : cudaGetLastError();
    }
    if (decode && vec) {
        const dim3 grid(kSplitCluster, ceil_div(experts, kSplitExperts)), block(kSplitThreads);
        const auto launch = [&](auto kernel) {
            return launch_pdl(kernel, grid, block, 0, kSplitCluster, stream, x, router, tokens, hidden, experts,
                              logits);
        };
        // <NE, TT, LT, WE, WK, U>: experts per thread, tokens per thread, token lanes, expert warps, K warps,
        // router loads ahead per expert.
        cudaError_t e;
        if (tokens == 1)
            e = launch(sm90_f32_router_logits_splitk<1, 1, 1, 8, 1, 8>);
        else if (tokens <= 4)
            e = launch(sm90_f32_router_logits_splitk<2, 4, 1, 4, 2, 4>);
        else if (tokens <= 16)
            e = launch(sm90_f32_router_logits_splitk<2, 8, 2, 4, 2, 2>);
        else if (tokens <= 32)
            e = launch(sm90_f32_router_logits_splitk<2, 8, 4, 4, 2, 2>);
        else
            e = launch(sm90_f32_router_logits_splitk<2, 16, 4, 4, 2, 1>);
        return e != cudaSuccess ? e : cudaGetLastError();
    }
    if (tokens >= kRouterWgmmaMinTokens && router_logits_wgmma_fits(hidden, x, router)) {
        const cudaError_t e = router_logits_wgmma(x, router, tokens, hidden, experts, logits, router_bf16, stream);
        return e != cudaSuccess ? e : cudaGetLastError();
    }
    const bool mma_pays = tokens >= kMmaMinTokens && static_cast<long long>(tokens) * experts * hidden >= kMmaMinMacs;
    if ((router_logits_use_tiled(tokens, experts) || mma_pays) && router_logits_mma_fits(hidden, x, router)) {
        const cudaError_t e = router_logits_mma(x, router, tokens, hidden, experts, logits, stream);
        if (e != cudaSuccess) return e;
    } else if (router_logits_use_tiled(tokens, experts)) {
        const dim3 grid(ceil_div(experts, BLOCK_N), ceil_div(tokens, BLOCK_M));
        const cudaError_t e =
            launch_pdl(vec ? sm90_f32_router_logits_tiled<true> : sm90_f32_router_logits_tiled<false>, grid,
                       dim3(kTileThreads), 0, 1, stream, x, router, tokens, hidden, experts, logits);
        if (e != cudaSuccess) return e;
    } else {
        // One expert per CTA while a single token chunk needs every CTA it can get; 4 (x read 4x less) after.
        const auto launch = [&](auto kernel, int per_cta) {
            const dim3 grid(ceil_div(experts, per_cta), ceil_div(tokens, kGemvTokens));
            return launch_pdl(kernel, grid, dim3(kGemvThreads), 0, 1, stream, x, router, tokens, hidden, experts,
                              logits);
        };
        cudaError_t e;
        if (tokens <= kGemvTokens)
            e = vec ? launch(sm90_f32_router_logits_gemv<1, true>, 1)
                    : launch(sm90_f32_router_logits_gemv<1, false>, 1);
        else
            e = vec ? launch(sm90_f32_router_logits_gemv<4, true>, 4)
                    : launch(sm90_f32_router_logits_gemv<4, false>, 4);
        if (e != cudaSuccess) return e;
    }
    return cudaGetLastError();
}

} // namespace fp4moe::cuda
