// Router logits of a large batch on bf16 tensor cores at fp32 accuracy (the prefill path of moe_router_logits).
//
// Numeric path: x is bf16, so each product x[t, k] * r[e, k] is exact in fp32 once r is split into three bf16
// parts (r = hi + mid + lo, each the bf16 rounding of what the previous parts left: together exact to 2^-24
// relative); the tensor cores multiply x by each part (exact products) and accumulate in fp32. Logits differ
// from the fp32 CUDA-core kernels by summation order and the tensor cores' accumulation only (within the same
// gamma_H bound the router tests check). Host-includable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp4moe::cuda {

/// Whether router_logits_mma takes these operands: H % 8 == 0 (whole 16-byte bf16 chunks per row) and x and
/// router 16-byte aligned.
bool router_logits_mma_fits(int hidden, const std::uint16_t *x, const float *router);

/// logits[t, e] = sum_k float(x[t, k]) * router[e, k] for T > 0 tokens: x [T, H] bf16 bits, router [E, H] fp32,
/// logits [T, E] fp32. 128 x 64 (token, expert) tiles, K in steps of 32 through shared memory: the router tile is
/// split once per CTA into its three bf16 parts as it is staged, mma.sync m16n8k16 (sm_80+) per part. When the
/// tiles make fewer than two CTAs per SM, K is split over a cluster of up to 8 CTAs (router_logits_mma_splits)
/// whose partial logits are summed through distributed shared memory in rank order: deterministic run to run.
/// PDL launch (waits for the previous kernel before reading x). The caller checks router_logits_mma_fits and
/// T, H, E > 0; returns the launch status.
/// The K splits router_logits_mma uses for this batch (1, 2, 4 or 8) on the current device.
int router_logits_mma_splits(int tokens, int hidden, int experts);

cudaError_t router_logits_mma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                              float *logits, cudaStream_t stream);

/// Whether router_logits_decode_mma takes this batch: 1 <= T <= 64, H % 16 == 0, x 4-byte and router 8-byte
/// aligned.
bool router_logits_decode_mma_fits(int tokens, int hidden, const std::uint16_t *x, const float *router);

/// As router_logits_mma for a decode batch whose router values are ALL bf16 (low 16 bits zero; other values
/// give wrong logits): one bf16 part, K split 64 ways over a cluster of 8 CTAs x 8 warps, 16 experts per
/// cluster, mma.sync m16n8k16 over 8-token tiles; partial sums added in a fixed (warp, then rank) order. PDL
/// launch (prefetches its router slice into L2, then waits for the previous kernel before reading x). The caller
/// checks router_logits_decode_mma_fits and E > 0; returns the launch status.
cudaError_t router_logits_decode_mma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                                     float *logits, cudaStream_t stream);

} // namespace fp4moe::cuda
