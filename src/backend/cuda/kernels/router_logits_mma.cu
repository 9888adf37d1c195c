// Router logits on bf16 tensor cores (router_logits_mma.h). Numeric path: bf16 x times the three exact bf16
// parts of the fp32 router (exact products), fp32 accumulation in mma.sync.
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/router_logits_mma.h"

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

// One CTA: logits of tokens [m0, m0 + 128) x experts [n0, n0 + 64). Each K step of 32 is loaded into registers
// one step ahead, then stored to shared memory: x as is, the router split into its three bf16 parts (once per
// CTA, not per warp). Warp (wm, wn) multiplies tokens 32 wm .. and experts 32 wn .. with 2 x 4 m16n8k16 tiles
// per part.
__global__ void __launch_bounds__(kThreads, 2)
    sm90_bf16x3_router_logits_mma(const std::uint16_t *__restrict__ x, const float *__restrict__ router, int tokens,
                                  int hidden, int experts, float *__restrict__ logits) {
    __shared__ __align__(16) std::uint16_t xs[BLOCK_M][kRowHalves];
    __shared__ __align__(16) std::uint16_t rs[kParts][BLOCK_N][kRowHalves];
    allow_next_kernel();
    wait_for_previous_kernel();
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp % 4, wn = warp / 4;
    const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;

    // Loader: x chunks (row tid / 4 and + 64, 8 halves at 8 (tid % 4)); router float4 (row tid / 8 and + 32,
    // k 4 (tid % 8)). Rows and K past the edges load zeros.
    uint4 xr[2];
    float4 rr[2];
    auto load = [&](int k0) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int t = m0 + tid / 4 + 64 * j, k = k0 + 8 * (tid % 4);
            xr[j] = make_uint4(0, 0, 0, 0);
            if (t < tokens && k < hidden)
                xr[j] = __ldg(reinterpret_cast<const uint4 *>(x + static_cast<std::size_t>(t) * hidden + k));
            const int e = n0 + tid / 8 + 32 * j, kr = k0 + 4 * (tid % 8);
            rr[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (e < experts && kr < hidden)
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
    load(0);
    for (int k0 = 0; k0 < hidden; k0 += BLOCK_K) {
        __syncthreads(); // the previous step's fragments are read
        store();
        __syncthreads();
        if (k0 + BLOCK_K < hidden) load(k0 + BLOCK_K);
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
    // c0, c1: token g, experts 2 t4, 2 t4 + 1; c2, c3: token g + 8.
    const int g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int t = m0 + 32 * wm + 16 * mi + g + 8 * h;
            if (t >= tokens) continue;
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int e = n0 + 32 * wn + 8 * ni + 2 * t4 + i;
                    if (e < experts) logits[static_cast<std::size_t>(t) * experts + e] = acc[mi][ni][2 * h + i];
                }
        }
}

} // namespace

bool router_logits_mma_fits(int hidden, const std::uint16_t *x, const float *router) {
    return hidden > 0 && hidden % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(router) % 16 == 0;
}

cudaError_t router_logits_mma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream) {
    const dim3 grid((experts + BLOCK_N - 1) / BLOCK_N, (tokens + BLOCK_M - 1) / BLOCK_M);
    return launch_pdl(sm90_bf16x3_router_logits_mma, grid, dim3(kThreads), 0, 1, stream, x, router, tokens, hidden,
                      experts, logits);
}

} // namespace fp4moe::cuda
