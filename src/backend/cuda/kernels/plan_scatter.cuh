// The stable scatter shared by the plan kernels (moe_route.cu, moe_plan_multi.cu). CUDA-only header.
#pragma once

#include <cstdint>

namespace fp4moe::cuda {

/// One warp places the pairs [begin, end) in order: pair i of expert e goes to row base[e] (this warp's next
/// row of e, in shared memory) plus its rank among the lanes of the same 32-pair step holding e
/// (__match_any_sync); ids outside [0, num_experts) get inv_perm -1. Walking the range in order keeps rows
/// within an expert in pair order: with bases in (CTA, warp) order, the CPU's stable counting sort exactly.
/// Called by all 32 lanes with the same range.
__device__ __forceinline__ void plan_warp_scatter(const std::int32_t *__restrict__ ids, int begin, int end,
                                                  int num_experts, int *base, std::int32_t *__restrict__ perm,
                                                  std::int32_t *__restrict__ inv_perm) {
    const int lane = threadIdx.x % 32;
    const unsigned lower = (1u << lane) - 1u;
    int next = begin + lane < end ? ids[begin + lane] : -1;
    for (int b = begin; b < end; b += 32) { // uniform per warp
        const int i = b + lane;
        const int v = next;
        next = b + 32 + lane < end ? ids[b + 32 + lane] : -1;
        const int e = i < end && v >= 0 && v < num_experts ? v : -1;
        const unsigned same = __match_any_sync(0xFFFFFFFFu, e);
        if (e >= 0) {
            const int row = base[e] + __popc(same & lower);
            perm[row] = i;
            inv_perm[i] = row;
        } else if (i < end) {
            inv_perm[i] = -1;
        }
        __syncwarp();
        if (e >= 0 && (same >> lane) == 1u) base[e] += __popc(same); // the group's highest lane advances
        __syncwarp();
    }
}

/// Exclusive scan of cnt [num_experts] (shared memory) by warp 0 into off (shared) and offsets (global), both
/// [num_experts + 1]; lane l takes a contiguous run of experts.
__device__ __forceinline__ void plan_scan_offsets(const int *cnt, int num_experts, int *off,
                                                  std::int32_t *__restrict__ offsets) {
    const int lane = threadIdx.x % 32;
    const int per = (num_experts + 31) / 32;
    const int lo = min(num_experts, lane * per), hi = min(num_experts, lo + per);
    int s = 0;
    for (int e = lo; e < hi; ++e) s += cnt[e];
    int incl = s;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d) incl += y;
    }
    int run = incl - s;
    for (int e = lo; e < hi; ++e) {
        off[e] = run;
        offsets[e] = run;
        run += cnt[e];
    }
    if (lane == 31) {
        off[num_experts] = incl;
        offsets[num_experts] = incl;
    }
}

} // namespace fp4moe::cuda
