// The plan of a large batch over many CTAs (moe_build_plan's path when the caller gives scratch). Host-includable.
#pragma once

#include "kernels/moe_route.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

/// Pairs per CTA of the multi-CTA plan; batches of fewer than 4 chunks use the one-CTA kernel.
constexpr int kPlanChunk = 2048;
/// Experts of the multi-CTA plan at most (its scatter CTA holds 8 rows of counters in 32 KB of shared memory).
constexpr int kPlanMultiMaxExperts = 1024;

/// Whether `pairs` pairs over `num_experts` take the multi-CTA path (given scratch).
bool plan_multi_fits(long long pairs, int num_experts);

/// Scratch ints of the multi-CTA plan for `pairs` pairs over `num_experts` (0 when it would not run).
std::size_t plan_multi_scratch_ints(long long pairs, int num_experts);

/// counts, offsets, perm and inv_perm of `out` (masked_pairs is the caller's) from ids [pairs], exactly as the
/// one-CTA kernel writes them, in three PDL-chained kernels: per-chunk counts (one CTA per kPlanChunk pairs),
/// one CTA turning them into (chunk, expert) row bases and the offsets, then the chunks' stable scatter.
/// out.scratch holds plan_multi_scratch_ints(pairs, num_experts) ints. Returns the launch status.
cudaError_t plan_multi_launch(const std::int32_t *ids, int pairs, int num_experts, const plan_buffers &out,
                              cudaStream_t stream);

} // namespace fp4moe::cuda
