// Router logits on bf16 tensor cores (router_logits_mma.h). Numeric path: bf16 x times the three exact bf16
// parts of the fp32 router (exact products), fp32 accumulation in mma.sync.
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/router_logits_mma.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp4moe::cuda {

namespace {

constexpr int BLOCK_M = 128; // tokens per CTA
constexpr int BLOCK_N = 64;  // experts per CTA
constexpr int BLOCK_K = 32;
constexpr int kThreads = 256;  // 8 warps: 4 along tokens x 2 along experts, 32 x 32 logits each
constexpr int kRowHalves = 40; // shared-memory row pitch in bf16: 80 bytes, so ldmatrix's 8 rows hit 8 bank groups
constexpr int kParts = 3;      // hi, mid, lo
constexpr int kMaxSplits = 8;  // K splits: CTAs of one cluster (the portable cluster size)
constexpr int kAccFloats = 32; // logits per thread

namespace cg = cooperative_groups;

using ptx::mma_bf16;
using ptx::smem_addr;

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// v = hi + mid + lo, each part the bf16 rounding of what the previous ones left (the differences are exact in
// fp32), returned as bf16 bits.
__device__ __forceinline__ void split3(float v, std::uint32_t (&part)[kParts]) {
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
        const __nv_bfloat16 b = __float2bfloat16_rn(v);
        part[p] = __bfloat16_as_ushort(b);
        v = __fsub_rn(v, __bfloat162float(b));
    }
}

// Shared memory: the K step's operands, and after the K loop (split K) this CTA's partial logits.
struct smem_tiles {
    std::uint16_t xs[BLOCK_M][kRowHalves];
    std::uint16_t rs[kParts][BLOCK_N][kRowHalves];
};
constexpr int kPartialBytes = kThreads * kAccFloats * 4;
constexpr int kSmemBytes = static_cast<int>(sizeof(smem_tiles)) > kPartialBytes ? static_cast<int>(sizeof(smem_tiles))
                                                                                : kPartialBytes;

// One CTA: logits of tokens [m0, m0 + 128) x experts [n0, n0 + 64) over its K range. Each K step of 32 is loaded
// into registers one step ahead, then stored to shared memory: x as is, the router split into its three bf16
// parts (once per CTA, not per warp). Warp (wm, wn) multiplies tokens 32 wm .. and experts 32 wn .. with 2 x 4
// m16n8k16 tiles per part. Split K (gridDim.x = ks CTAs, one cluster): CTA rank r takes the r-th K range (in
// whole steps) and leaves its partial logits in shared memory; then rank r sums its share of every thread's
// logits (8 / ks of the thread's eight groups of four) over the ranks in rank order (deterministic) and stores it. A
// batch whose tiles alone cannot fill the GPU (T = 4096 at 128 experts: 64 CTAs) is latency-bound per K step, so fewer
// steps per CTA is the gain.
__global__ void __launch_bounds__(kThreads, 2)
    sm90_bf16x3_router_logits_mma(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                  int hidden, int experts, float *__restrict__ logits) {
    __shared__ __align__(16) std::uint8_t smem[kSmemBytes];
    auto &sm = *reinterpret_cast<smem_tiles *>(smem);
    auto &xs = sm.xs;
    auto &rs = sm.rs;
    allow_next_kernel();
    wait_for_previous_kernel();
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp % 4, wn = warp / 4;
    const int ks = static_cast<int>(gridDim.x), rank = static_cast<int>(blockIdx.x);
    const int m0 = blockIdx.z * BLOCK_M, n0 = blockIdx.y * BLOCK_N;
    const int kchunk = (hidden + ks * BLOCK_K - 1) / (ks * BLOCK_K) * BLOCK_K;
    const int k_begin = min(hidden, rank * kchunk), k_end = min(hidden, k_begin + kchunk);

    // Loader: x chunks (row tid / 4 and + 64, 8 halves at 8 (tid % 4)); router float4 (row tid / 8 and + 32,
    // k 4 (tid % 8)). Rows and K past the edges (of the data, or of this CTA's K range) load zeros.
    uint4 xr[2];
    float4 rr[2];
    auto load = [&](int k0) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int t = m0 + tid / 4 + 64 * j, k = k0 + 8 * (tid % 4);
            xr[j] = make_uint4(0, 0, 0, 0);
            if (t < tokens && k < k_end)
                xr[j] = __ldg(reinterpret_cast<const uint4 *>(x + static_cast<std::size_t>(t) * hidden + k));
            const int e = n0 + tid / 8 + 32 * j, kr = k0 + 4 * (tid % 8);
            rr[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (e < experts && kr < k_end)
                rr[j] = __ldg(reinterpret_cast<const float4 *>(router + static_cast<std::size_t>(e) * hidden + kr));
        }
    };
    auto store = [&] {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            *reinterpret_cast<uint4 *>(&xs[tid / 4 + 64 * j][8 * (tid % 4)]) = xr[j];
            std::uint32_t p0[kParts], p1[kParts], p2[kParts], p3[kParts];
            split3(rr[j].x, p0), split3(rr[j].y, p1), split3(rr[j].z, p2), split3(rr[j].w, p3);
#pragma unroll
            for (int p = 0; p < kParts; ++p)
                *reinterpret_cast<uint2 *>(&rs[p][tid / 8 + 32 * j][4 * (tid % 8)]) =
                    make_uint2(p0[p] | p1[p] << 16, p2[p] | p3[p] << 16);
        }
    };

    float acc[2][4][4] = {};
    if (k_begin < k_end) load(k_begin);
    for (int k0 = k_begin; k0 < k_end; k0 += BLOCK_K) {
        __syncthreads(); // the previous step's fragments are read
        store();
        __syncthreads();
        if (k0 + BLOCK_K < k_end) load(k0 + BLOCK_K);
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 16) {
            std::uint32_t a[2][4], b[kParts][2][4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) ldmatrix_x4(a[mi], &xs[32 * wm + 16 * mi + lane % 16][kk + 8 * (lane / 16)]);
                // x4 over experts: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
#pragma unroll
            for (int p = 0; p < kParts; ++p)
#pragma unroll
                for (int nj = 0; nj < 2; ++nj)
                    ldmatrix_x4(b[p][nj],
                                &rs[p][32 * wn + 16 * nj + lane % 8 + 8 * (lane / 16)][kk + 8 * (lane / 8 % 2)]);
#pragma unroll
            for (int p = 0; p < kParts; ++p)
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni)
                        mma_bf16(acc[mi][ni], a[mi], b[p][ni / 2][2 * (ni % 2)], b[p][ni / 2][2 * (ni % 2) + 1]);
        }
    }
    // acc[mi][ni]: c0, c1 at token g, experts 2 t4, 2 t4 + 1; c2, c3 at token g + 8.
    const int g = lane / 4, t4 = lane % 4;
    auto emit = [&](int mi, int ni, const float(&c)[4]) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int t = m0 + 32 * wm + 16 * mi + g + 8 * h;
            if (t >= tokens) continue;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int e = n0 + 32 * wn + 8 * ni + 2 * t4 + i;
                if (e < experts) logits[static_cast<std::size_t>(t) * experts + e] = c[2 * h + i];
            }
        }
    };
    if (ks == 1) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) emit(mi, ni, acc[mi][ni]);
        return;
    }
    // Split K: thread tid's 32 logits (as eight float4: one per (mi, ni)) at part[tid], rank r sums float4s
    // [r 8 / ks, (r + 1) 8 / ks) of every thread over ranks 0 .. ks - 1 in order.
    cg::cluster_group cluster = cg::this_cluster();
    __syncthreads(); // every warp is done with xs and rs
    auto *part = reinterpret_cast<float4 *>(smem);
#pragma unroll
    for (int f = 0; f < 8; ++f)
        part[tid * 8 + f] =
            make_float4(acc[f / 4][f % 4][0], acc[f / 4][f % 4][1], acc[f / 4][f % 4][2], acc[f / 4][f % 4][3]);
    cluster.sync();
    const int per = 8 / ks;
    for (int f = rank * per; f < (rank + 1) * per; ++f) {
        float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int q = 0; q < ks; ++q) {
            const float4 v = cluster.map_shared_rank(part, q)[tid * 8 + f];
            sum[0] += v.x, sum[1] += v.y, sum[2] += v.z, sum[3] += v.w;
        }
        emit(f / 4, f % 4, sum);
    }
    cluster.sync(); // keep this CTA's partials alive until the cluster has read them
}

} // namespace

bool router_logits_mma_fits(int hidden, const std::uint16_t *x, const float *router) {
    return hidden > 0 && hidden % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(router) % 16 == 0;
}

int router_logits_mma_splits(int tokens, int hidden, int experts) {
    // Split K while the CTAs are fewer than the SMs and each split keeps >= 512 of K (16 steps). On the H200,
    // glm-4.5-air's router (E = 128, H = 4096): T = 1024 257 us (GEMV) -> 34 us (8 splits), T = 4096 123 -> 86 us
    // (4 splits); splitting past one CTA per SM loses (T = 16384 in 2 splits: 172 -> 187 us; deepseek-v3 T = 4096
    // in 4: 210 -> 215 us).
    const long long tiles =
        static_cast<long long>((experts + BLOCK_N - 1) / BLOCK_N) * ((tokens + BLOCK_M - 1) / BLOCK_M);
    int ks = 1;
    while (ks < kMaxSplits && tiles * ks < current_sm_count() && hidden >= 2 * ks * 512) ks *= 2;
    return ks;
}

cudaError_t router_logits_mma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream) {
    const int ks = router_logits_mma_splits(tokens, hidden, experts);
    const dim3 grid(ks, (experts + BLOCK_N - 1) / BLOCK_N, (tokens + BLOCK_M - 1) / BLOCK_M);
    return launch_pdl(sm90_bf16x3_router_logits_mma, grid, dim3(kThreads), 0, ks, stream, x, router, tokens, hidden,
                      experts, logits);
}

} // namespace fp4moe::cuda
