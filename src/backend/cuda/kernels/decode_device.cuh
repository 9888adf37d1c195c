// Device pieces of the cuda.decode kernels (moe_decode.cu): the bf16 mma, one K step of dequantize-and-multiply,
// SiLU(gate) * up, and the down GEMM's fused weighted combine. CUDA-only header.
#pragma once

#include "kernels/mma_dequant.h"
#include "kernels/ptx.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace fp4moe::cuda::decode_device {

__device__ __forceinline__ std::uint32_t hmul2(std::uint32_t a, std::uint32_t b) {
    std::uint32_t d;
    // Exact here (2 x 4 significant bits); the E2M1 code 1 is a bf16 subnormal, which mul.bf16x2 keeps.
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

using ptx::mma_bf16;

/// One 64-wide K step of a warp: the lane's four A fragments (one 16-byte word of packed E2M1 and its two scale
/// codes) dequantized in registers and multiplied with every 8-token tile's B fragments `b[n]` (16 bf16 of the
/// lane's K block: slices 0/1 in b[n][0], 2/3 in b[n][1]). Slice s accumulates into chain s % kChains:
/// consecutive mma on one accumulator wait for each other, so one token tile spreads a step over four chains.
template <int NT, int kChains>
__device__ __forceinline__ void mma_kstep(float (&chain)[NT][kChains][4], const uint4 &qv, std::uint32_t codes,
                                          const uint4 (&b)[NT][2]) {
    // Block scales of rows g and g + 8 for this lane's K block: the same for all four slices.
    const std::uint32_t sc_lo = scale_code_to_bf16x2<0>(codes), sc_hi = scale_code_to_bf16x2<1>(codes);
    const std::uint32_t words[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
    for (int sl = 0; sl < 4; ++sl) {
        const std::uint32_t w = words[sl];
        const std::uint32_t a[4] = {hmul2(e2m1x2_to_bf16x2<0>(w), sc_lo), hmul2(e2m1x2_to_bf16x2<1>(w), sc_hi),
                                    hmul2(e2m1x2_to_bf16x2<2>(w), sc_lo), hmul2(e2m1x2_to_bf16x2<3>(w), sc_hi)};
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const uint4 &half = b[n][sl / 2];
            mma_bf16(chain[n][sl % kChains], a, sl % 2 ? half.z : half.x, sl % 2 ? half.w : half.y);
        }
    }
}

__device__ __forceinline__ int atomic_add_relaxed_gpu(int *p, int v) {
    int old;
    asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void fence_release_gpu() {
    asm volatile("fence.release.gpu;" ::: "memory");
}
__device__ __forceinline__ void fence_acq_rel_gpu() {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

/// The fused weighted combine of the down GEMM, called by a whole warp after its fp32 partial rows (one per
/// (token, slot) pair, already scaled by the router weight) of the MT 16-row weight tiles from `tile` on are
/// stored: lane i < rows reports token `token_of_lane` (-1 for none) on the counter of each (token, tile); the warp
/// that brings a token's last (`slots`-th) pair sums the slots in slot order (deterministic) and writes the 16 bf16
/// output values. One __syncwarp and one release fence order all the warp's rows before its increments (an SC
/// fence per tile, as first written, cost ~1-2 % of the layer: H200, bench/results/h200/NOTES.md), the MT
/// increments are in flight together, and only a warp that combines fences again (acquire) before its loads.
template <int MT>
__device__ __forceinline__ void combine_tiles(int token_of_lane, int tile, int tiles, int slots, int hidden,
                                              int *counters, const float *partial, std::uint16_t *out) {
    const int lane = threadIdx.x % 32;
    __syncwarp();
    fence_release_gpu();
    int last[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m)
        last[m] = token_of_lane >= 0 && tile + m < tiles &&
                  atomic_add_relaxed_gpu(&counters[token_of_lane * tiles + tile + m], 1) == slots - 1;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        unsigned todo = __ballot_sync(0xFFFFFFFFu, last[m]);
        if (todo) fence_acq_rel_gpu(), __syncwarp();
        while (todo) {
            const int src_lane = __ffs(todo) - 1;
            todo &= todo - 1;
            const int tok = __shfl_sync(0xFFFFFFFFu, token_of_lane, src_lane);
            const int row = (tile + m) * 16 + lane;
            if (lane < 16 && row < hidden) {
                const float *src = partial + static_cast<std::size_t>(tok) * slots * hidden + row;
                // Slots in batches of 8, loads first (one L2 round trip per batch), adds in slot order.
                float sum = 0.0f;
                for (int j0 = 0; j0 < slots; j0 += 8) {
                    float v[8];
#pragma unroll
                    for (int j = 0; j < 8; ++j)
                        if (j0 + j < slots) v[j] = __ldcg(src + static_cast<std::size_t>(j0 + j) * hidden);
#pragma unroll
                    for (int j = 0; j < 8; ++j)
                        if (j0 + j < slots) sum += v[j];
                }
                const __nv_bfloat16 r = __float2bfloat16_rn(sum);
                out[static_cast<std::size_t>(tok) * hidden + row] = *reinterpret_cast<const std::uint16_t *>(&r);
            }
        }
    }
}

/// SiLU(gate) * up of one output feature, rounded to bf16 bits (gate, up: the fp32 accumulators times their
/// global scales).
__device__ __forceinline__ std::uint16_t silu_mul_bf16(float gate, float up) {
    const __nv_bfloat16 hb = __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
    return *reinterpret_cast<const std::uint16_t *>(&hb);
}

} // namespace fp4moe::cuda::decode_device
