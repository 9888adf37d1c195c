// Router logits of a large batch on Hopper's wgmma at fp32 accuracy (the prefill path of moe_router_logits from
// kRouterWgmmaMinTokens tokens; router_logits_mma.h's mma.sync kernel below that and on other GPUs).
//
// Numeric path: router_logits_mma.h's. Each fp32 router weight is split into three bf16 parts (exact together),
// x is bf16, so every product is exact; the tensor cores accumulate in fp32. A router whose values are all bf16
// (the checkpoints' dtype) needs only the first part. Host-includable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp4moe::cuda {

/// Tokens from which moe_router_logits uses this kernel on an sm_90 device (measured: NOTES.md, tenth session).
constexpr int kRouterWgmmaMinTokens = 256;

/// Whether this kernel runs here and takes these operands: an sm_90 device with tensor maps, H % 8 == 0 (a TMA
/// row pitch of whole 16 bytes), x 16-byte and router 8-byte aligned.
bool router_logits_wgmma_fits(int hidden, const std::uint16_t *x, const float *router);

/// The K splits (1, 2, 4 or 8: CTAs of one cluster) router_logits_wgmma uses for this batch on the current device.
int router_logits_wgmma_splits(int tokens, int hidden, int experts);

/// logits[t, e] = sum_k float(x[t, k]) * router[e, k], as router_logits_mma: x [T, H] bf16 bits, router [E, H]
/// fp32 (with `router_bf16`, every value a bf16: one part per weight), logits [T, E] fp32, T, H, E > 0. CTAs of 128
/// experts x 128 tokens: a producer warp brings x's 64-wide K chunks by TMA into a 4-stage ring; two consumer
/// warpgroups load their 64 experts' router weights straight into wgmma A-fragment registers one step ahead, split them
/// into three bf16 parts, and issue m64n128k16 per part. When the tiles are fewer than the SMs, K is split over a
/// cluster and the partial logits are summed through distributed shared memory in rank order (deterministic run to
/// run). PDL launch; returns the launch status.
cudaError_t router_logits_wgmma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                                float *logits, bool router_bf16, cudaStream_t stream);

} // namespace fp4moe::cuda
