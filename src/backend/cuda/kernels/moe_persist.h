// The persistent tactics of cuda.decode (moe_persist.cu), called by moe_decode_run: gate_up and down of the
// whole batch in ONE launch of at most as many CTAs as fit on the device at once.
//
// Why: at decode every warp of the per-GEMM kernels streams a short K loop (9.7 MB experts of glm-4.5-air give
// the down GEMM 22 steps), so each CTA's start (work lookup, first copies in flight) and the GPU's ramp and tail
// at both kernel boundaries cost as much as the bytes. Here each warp claims work items (an expert's 16-row
// weight tile for one group of tokens, gate_up items first) from a counter and keeps one bulk-copy ring full
// across them: weights AND the activation rows of each K step arrive by the copy engine, so a warp never waits
// on a load it issued itself. A down item of expert e needs e's SiLU(gate) * up rows: it prefetches its weights
// at once and issues the activation copies when the per-group completion counter says gate_up is done. Items
// are claimed in order (all gate_up items before any down item), so a warp only ever waits for items that
// running warps have claimed: no deadlock whatever the residency.
//
// Internal to the CUDA kernels (not a public header of the backend).
#pragma once

#include "kernels/moe_decode.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

/// Scratch the persistent launch reads and writes, carved out of the decode workspace by moe_decode.cu.
struct persist_scratch {
    std::uint16_t *act = nullptr; ///< SiLU(gate) * up rows: group gi's rows at gi * rows (row stride ld_act)
    int ld_act = 0;               ///< elements per act row (I padded to 64)
    float *partial = nullptr;     ///< [T * slots][H] fp32 rows of the down GEMM, one per (token, slot) pair
    int *sync = nullptr;          ///< [kPersistSyncHeader + groups] claim counter, then gate_up items done per
                                  ///< group; ZERO before the launch (moe_decode_clear_range)
    int *counters = nullptr;      ///< [T][down tiles] pairs combined per token and 16-row tile; ZERO before too
};

/// Token rows per group of the persistent tactics (decode_tactic::rows) lie in [kMinPersistRows, kMaxPersistRows]:
/// the workspace bounds of moe_decode.cu (groups, act rows) follow from them.
inline constexpr int kMinPersistRows = 2, kMaxPersistRows = 16;

/// Ints before the per-group counters in persist_scratch::sync (the claim counter, then padding to a line).
inline constexpr int kPersistSyncHeader = 32;

/// Launches the persistent kernel of tactic `t` (t.persistent); x must be 16-byte aligned.
cudaError_t moe_persist_run(const decode_weights &w, const decode_batch &b, decode_tactic t, const persist_scratch &s,
                            cudaStream_t stream);

} // namespace fp4moe::cuda
