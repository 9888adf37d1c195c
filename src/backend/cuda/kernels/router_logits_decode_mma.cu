// Router logits of a decode batch (T <= 64) on bf16 tensor cores, for routers whose values are all bf16
// (router_logits_mma.h: router_logits_decode_mma). Why: the fp32 split-K kernel of router_logits.cu spends one
// FMA per (token, expert, k) on the CUDA cores, so its time grows with T (H200, ncu: deepseek-v3 T = 64 30 us,
// glm-4.5-air 13 us) while the router bytes stay the same; here a warp's mma multiplies 16 experts by 8 tokens
// per instruction, and the kernel is bound by reading the router once.
//
// Numeric path: each router value is a bf16 (the caller guarantees it), x is bf16, so every product is exact;
// the tensor cores accumulate in fp32, and the partial sums are added in a fixed order: deterministic run to run.
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/router_logits_mma.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp4moe::cuda {

namespace {

constexpr int kRanks = 8;      // CTAs of a cluster, along K
constexpr int kWarps = 8;      // warps of a CTA, along K: 64 K slices in all
constexpr int kExperts = 16;   // experts per cluster: the mma's M
constexpr int kMaxTokens = 64; // eight 8-token tiles: the mma's N
constexpr int kSteps = 4;      // K steps of 16 whose loads are issued together
constexpr int kThreads = kWarps * 32;

namespace cg = cooperative_groups;

// Two fp32 values that are bf16 (low halves zero) as one bf16x2 register: the lower K index in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float2 v) {
    return __byte_perm(__float_as_uint(v.x), __float_as_uint(v.y), 0x7632);
}

// Grid (kRanks, ceil(E / 16)), clusters of kRanks along x. Cluster y owns experts [16 y, 16 y + 16) for all T
// tokens; warp w of rank r owns the (8 r + w)-th of 64 K slices (whole steps of 16). Per step a lane loads its four
// A values (experts g and g + 8, k = 2 q.. and 2 q + 8..: float2 each) and, per 8-token tile, its two B words;
// kSteps steps' loads are in flight before their mma. Rows past E and tokens past T read the last valid row and
// are never written out. After the K loop each CTA sums its 8 warps (in order) in shared memory and the cluster
// sums its 8 ranks (in order) through distributed shared memory.
template <int NT>
__global__ void __launch_bounds__(kThreads)
    router_logits_decode_mma_kernel(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                    int hidden, int experts, float *__restrict__ logits) {
    __shared__ float part[kWarps][kExperts][kMaxTokens];
    __shared__ float cta_sum[kExperts][kMaxTokens];
    cg::cluster_group cluster = cg::this_cluster();
    allow_next_kernel();

    const int rank = static_cast<int>(cluster.block_rank());
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int steps = hidden / 16, slice = rank * kWarps + warp;
    const int s_beg = steps * slice / (kRanks * kWarps), s_end = steps * (slice + 1) / (kRanks * kWarps);
    const int e_lo = min(blockIdx.y * kExperts + g, experts - 1),
              e_hi = min(blockIdx.y * kExperts + g + 8, experts - 1);
    const float *ra = router + static_cast<std::size_t>(e_lo) * hidden + 2 * q;
    const float *rb = router + static_cast<std::size_t>(e_hi) * hidden + 2 * q;
    // The router never depends on the previous kernel: pull this lane's rows of the slice into L2 first.
    for (int s = s_beg + (lane & 3); s < s_end; s += 4) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(ra + 16 * s));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(rb + 16 * s));
    }
    wait_for_previous_kernel();

    const std::uint32_t *xr[NT]; // the lane's B row (token 8 n + g) as bf16 pairs, at k = 2 q
#pragma unroll
    for (int n = 0; n < NT; ++n)
        xr[n] = reinterpret_cast<const std::uint32_t *>(
            x + static_cast<std::size_t>(min(8 * n + g, tokens - 1)) * hidden + 2 * q);
    float acc[NT][4] = {};
    for (int s0 = s_beg; s0 < s_end; s0 += kSteps) {
        std::uint32_t a[kSteps][4], b[kSteps][NT][2];
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
            const bool in = s0 + u < s_end; // a step past the slice multiplies zeros (x may hold inf: 0 x inf)
            const int k = 16 * (in ? s0 + u : s_beg);
            a[u][0] = in ? pack_bf16x2(__ldg(reinterpret_cast<const float2 *>(ra + k))) : 0u;
            a[u][1] = in ? pack_bf16x2(__ldg(reinterpret_cast<const float2 *>(rb + k))) : 0u;
            a[u][2] = in ? pack_bf16x2(__ldg(reinterpret_cast<const float2 *>(ra + k + 8))) : 0u;
            a[u][3] = in ? pack_bf16x2(__ldg(reinterpret_cast<const float2 *>(rb + k + 8))) : 0u;
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                b[u][n][0] = in ? __ldg(xr[n] + k / 2) : 0u;
                b[u][n][1] = in ? __ldg(xr[n] + k / 2 + 4) : 0u;
            }
        }
#pragma unroll
        for (int u = 0; u < kSteps; ++u)
#pragma unroll
            for (int n = 0; n < NT; ++n) ptx::mma_bf16(acc[n], a[u], b[u][n][0], b[u][n][1]);
    }

    // C fragment of tile n: [0], [1] = expert g, tokens 8 n + 2 q, + 1; [2], [3] = expert g + 8, same tokens.
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            part[warp][g][8 * n + 2 * q + c] = acc[n][c];
            part[warp][g + 8][8 * n + 2 * q + c] = acc[n][2 + c];
        }
    __syncthreads();
    for (int o = threadIdx.x; o < kExperts * 8 * NT; o += kThreads) {
        const int es = o / (8 * NT), t = o % (8 * NT);
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += part[w][es][t];
        cta_sum[es][t] = sum;
    }
    cluster.sync();
    for (int o = rank * kThreads + threadIdx.x; o < kExperts * tokens; o += kRanks * kThreads) {
        const int es = o / tokens, t = o % tokens, e = blockIdx.y * kExperts + es;
        if (e >= experts) continue;
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < kRanks; ++r) sum += cluster.map_shared_rank(&cta_sum[0][0], r)[es * kMaxTokens + t];
        logits[static_cast<std::size_t>(t) * experts + e] = sum;
    }
    cluster.sync(); // keep this CTA's shared memory alive until the cluster has read it
}

} // namespace

bool router_logits_decode_mma_fits(int tokens, int hidden, const std::uint16_t *x, const float *router) {
    return tokens >= 1 && tokens <= kMaxTokens && hidden % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 4 == 0 &&
           reinterpret_cast<std::uintptr_t>(router) % 8 == 0;
}

cudaError_t router_logits_decode_mma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                                     float *logits, cudaStream_t stream) {
    const dim3 grid(kRanks, (experts + kExperts - 1) / kExperts), block(kThreads);
    const auto launch = [&](auto kernel) {
        return launch_pdl(kernel, grid, block, 0, kRanks, stream, x, router, tokens, hidden, experts, logits);
    };
    if (tokens <= 8) return launch(router_logits_decode_mma_kernel<1>);
    if (tokens <= 16) return launch(router_logits_decode_mma_kernel<2>);
    if (tokens <= 32) return launch(router_logits_decode_mma_kernel<4>);
    return launch(router_logits_decode_mma_kernel<8>);
}

} // namespace fp4moe::cuda
