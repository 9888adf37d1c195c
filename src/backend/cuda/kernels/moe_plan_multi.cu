// The multi-CTA plan (moe_plan_multi.h). A single CTA writing a large batch's rows is limited by one SM's
// scattered stores (~160 us for 147 k pairs on the H200); the chunks here spread them over the chip. Integer
// work: the result equals the one-CTA kernel's bit for bit.
#include "kernels/moe_plan_multi.h"
#include "kernels/pdl.cuh"
#include "kernels/plan_scatter.cuh"

#include <cuda_runtime.h>

namespace fp4moe::cuda {

namespace {

constexpr int kChunkWarps = 8;
constexpr int kScanThreads = 1024;

// chunk_counts[b][e] = pairs of chunk b routed to expert e.
__global__ void __launch_bounds__(kChunkWarps * 32)
    moe_plan_count_kernel(const std::int32_t *__restrict__ ids, int pairs, int num_experts,
                          std::int32_t *__restrict__ chunk_counts) {
    extern __shared__ int cnt[]; // [num_experts]
    allow_next_kernel();
    wait_for_previous_kernel();
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    const int begin = blockIdx.x * kPlanChunk, end = min(pairs, begin + kPlanChunk);
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const int e = ids[i];
        if (e >= 0 && e < num_experts) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x)
        chunk_counts[static_cast<std::size_t>(blockIdx.x) * num_experts + e] = cnt[e];
}

// One CTA: chunk_counts becomes each (chunk, expert)'s first row; counts, offsets; perm -1 past the last row.
__global__ void __launch_bounds__(kScanThreads)
    moe_plan_bases_kernel(int chunks, int pairs, int num_experts, std::int32_t *__restrict__ chunk_counts,
                          std::int32_t *__restrict__ counts, std::int32_t *__restrict__ offsets,
                          std::int32_t *__restrict__ perm) {
    extern __shared__ int smem[];
    int *cnt = smem, *off = smem + num_experts; // [num_experts], [num_experts + 1]
    allow_next_kernel();
    wait_for_previous_kernel();
    // An expert's chunk counts are read kBatch at a time, all loads issued before the first sum: read one by one,
    // each waited for the last (the stores between them), 18 L2 round trips at deepseek-v3 T = 4096 (ncu: 8.9 us).
    constexpr int kBatch = 16;
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
        int run = 0;
        for (int b0 = 0; b0 < chunks; b0 += kBatch) {
            int n[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; ++j)
                n[j] = b0 + j < chunks ? chunk_counts[static_cast<std::size_t>(b0 + j) * num_experts + e] : 0;
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                if (b0 + j < chunks) chunk_counts[static_cast<std::size_t>(b0 + j) * num_experts + e] = run;
                run += n[j];
            }
        }
        cnt[e] = run;
        counts[e] = run;
    }
    __syncthreads();
    if (threadIdx.x < 32) plan_scan_offsets(cnt, num_experts, off, offsets);
    __syncthreads();
    for (int r = off[num_experts] + threadIdx.x; r < pairs; r += blockDim.x) perm[r] = -1; // skipped pairs' rows
    for (int i = threadIdx.x; i < chunks * num_experts; i += blockDim.x) chunk_counts[i] += off[i % num_experts];
}

// Chunk b: per-warp counts again, per-warp bases from the chunk's bases, then each warp's stable scatter.
__global__ void __launch_bounds__(kChunkWarps * 32)
    moe_plan_scatter_kernel(const std::int32_t *__restrict__ ids, int pairs, int num_experts,
                            const std::int32_t *__restrict__ chunk_bases, std::int32_t *__restrict__ perm,
                            std::int32_t *__restrict__ inv_perm) {
    extern __shared__ int wc[]; // [kChunkWarps][num_experts]
    allow_next_kernel();
    wait_for_previous_kernel(); // the bases (and, through the chain, the ids)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = threadIdx.x; i < kChunkWarps * num_experts; i += blockDim.x) wc[i] = 0;
    __syncthreads();
    constexpr int seg = kPlanChunk / kChunkWarps;
    const int begin = min(pairs, blockIdx.x * kPlanChunk + warp * seg), end = min(pairs, begin + seg);
    int *mine = wc + warp * num_experts;
    for (int i = begin + lane; i < end; i += 32) {
        const int e = ids[i];
        if (e >= 0 && e < num_experts) atomicAdd(&mine[e], 1);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
        int run = chunk_bases[static_cast<std::size_t>(blockIdx.x) * num_experts + e];
        for (int w = 0; w < kChunkWarps; ++w) {
            const int c = wc[w * num_experts + e];
            wc[w * num_experts + e] = run;
            run += c;
        }
    }
    __syncthreads();
    plan_warp_scatter(ids, begin, end, num_experts, mine, perm, inv_perm);
}

int chunks_of(long long pairs) {
    return static_cast<int>((pairs + kPlanChunk - 1) / kPlanChunk);
}

} // namespace

bool plan_multi_fits(long long pairs, int num_experts) {
    return pairs >= 4LL * kPlanChunk && num_experts <= kPlanMultiMaxExperts;
}

std::size_t plan_multi_scratch_ints(long long pairs, int num_experts) {
    return plan_multi_fits(pairs, num_experts) ? static_cast<std::size_t>(chunks_of(pairs)) * num_experts : 0;
}

cudaError_t plan_multi_launch(const std::int32_t *ids, int pairs, int num_experts, const plan_buffers &out,
                              cudaStream_t stream) {
    const int chunks = chunks_of(pairs);
    const std::size_t e4 = sizeof(int) * static_cast<std::size_t>(num_experts);
    if (auto e = launch_pdl(moe_plan_count_kernel, dim3(chunks), dim3(kChunkWarps * 32), e4, 1, stream, ids, pairs,
                            num_experts, out.scratch);
        e != cudaSuccess)
        return e;
    if (auto e = launch_pdl(moe_plan_bases_kernel, dim3(1), dim3(kScanThreads), 2 * e4 + sizeof(int), 1, stream, chunks,
                            pairs, num_experts, out.scratch, out.counts, out.offsets, out.perm);
        e != cudaSuccess)
        return e;
    return launch_pdl(moe_plan_scatter_kernel, dim3(chunks), dim3(kChunkWarps * 32), kChunkWarps * e4, 1, stream, ids,
                      pairs, num_experts, static_cast<const std::int32_t *>(out.scratch), out.perm, out.inv_perm);
}

} // namespace fp4moe::cuda
