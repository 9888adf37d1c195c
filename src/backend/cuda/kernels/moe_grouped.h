// Launchers of the cuda.grouped MoE runner (sm90a/moe_grouped.cu): the prefill path. NVFP4 experts in the
// mma_pack layout (the same bytes cuda.decode reads), bf16 activations, Hopper wgmma with the dequantized
// weights as the register operand and the tokens as the shared-memory operand (TMA), fp32 accumulation.
//
// One run, after routing and the plan (moe_route.h) are on the device, six or seven kernels chained with programmatic
// dependent launches (no host synchronization, no allocation: graph-capturable):
//   rows      one CTA: each expert's first row in the compact row order (exclusive scan of the counts; the
//             permuted layout's own offsets, and the masked layout compacted the same way).
//   pairs     the (token, slot) pair of each row, and the row of each pair.
//   gather    one warp per (token, 1024 of K): x, read once, -> the xp [rows, K64] bf16 rows of its pairs (expert
//             order), each 64-wide K chunk permuted into the order the packed weights use (mma_pack.h: a lane's
//             k16 slice q takes k = 16 t + 4 q + 2 u + c), so that one 128-byte TMA row serves all four slices.
//   gate_up   (one or two launches: an expert's narrow last block may have its own, grouped_tactic::tail)
//             persistent: a producer warp claims work items from a counter (rows zeroes it) and streams 64-wide
//             K chunks of BN token rows by TMA into a shared ring;
//             two consumer warpgroups (or three or four at mt = 1) each own 64 mt weight rows (4 mt 16-row tiles), load
//             packed weights into registers, dequantize, and issue wgmma m64 x BN x k16 (an expert's last, partly
//             filled block: the narrowest N, a multiple of 8 (16 or 32 where depth-1 pipelined) up to BN, that
//             covers it); SiLU(gate) * up in the epilogue, staged in shared memory and written as bf16 act rows in
//             the same permuted K order (down's B operand).
//   down      the same kernel over H rows with K = I; the epilogue applies the global scale and the router
//             weight and adds each (token, slot) row to the token's fp32 sum (red.global.add.v4.f32 into a
//             [T, H] buffer gate_up's idle producer warps zeroed): the combine fused into down. The order in which a
//             token's slots are added varies from run to run, so outputs may differ by an fp32 rounding (after bf16
//             rounding, rarely one bf16 ulp); cuda.decode's fused combine is deterministic.
//   combine   each token's fp32 sum -> the bf16 output; a token that routing refused (first id -1) gets NaN.
// Host-includable: only cuda_runtime_api.h types; bf16 tensors are uint16 bit patterns.
#pragma once

#include "kernels/moe_decode.h"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace fp4moe::cuda {

/// One GEMM's variant: `bn` token rows per tile (the wgmma N: 64, 128, 192 or 256), `stages` K chunks in the
/// shared ring, `mt` m64 blocks of weight rows per consumer warpgroup and `wg` consumer warpgroups (a CTA owns
/// 64 mt wg weight rows: more rows share each token tile, halving its shared-memory and L2 traffic per MAC at 256).
struct grouped_gemm_tactic {
    int bn = 128;
    int stages = 4;
    int mt = 1;
    int wg = 2; // consumer warpgroups per CTA: 2, or 3 or 4 (then at mt = 1, 64 weight rows each)
    friend bool operator==(const grouped_gemm_tactic &, const grouped_gemm_tactic &) = default;
};
/// A variant of the layer: gate_up's and down's GEMMs may differ (measured: gate_up, K = hidden, is fastest with
/// bn = 256 where down, K = inter, is with bn = 128 x 256 weight rows; NOTES.md g13). Where `tail.bn` is set, an
/// expert's last, partly filled token block of at most tail.bn rows is multiplied by a gate_up launch of its own
/// with the `tail` tactic, before the gate_up launch of the rest: such a block dequantizes all its weights for few
/// MACs, and CTAs of four or five consumer warpgroups share that issue-bound work out better than the three of a
/// 192-row token tile (NOTES.md g20).
struct grouped_tactic {
    grouped_gemm_tactic gate_up, down;
    grouped_gemm_tactic tail{0, 0, 0, 0}; ///< bn = 0: no separate launch
    friend bool operator==(const grouped_tactic &, const grouped_tactic &) = default;
};

/// Every compiled tactic; index = the runner's tactic id.
extern const grouped_tactic kGroupedTactics[];
extern const int kGroupedTacticCount;

/// Scratch bytes for batches up to `max_tokens` tokens (any tactic).
std::size_t moe_grouped_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens);

/// True when the current device can run the runner's kernels (sm_90: wgmma and TMA as compiled here).
bool moe_grouped_supported();

/// Launches the six (or seven) kernels on `stream`. cudaErrorInvalidValue (nothing launched) for bad sizes or an
/// unknown tactic; cudaErrorNotSupported when the driver's tensor-map entry point is missing. T = 0 launches nothing.
/// The batch's fields are those of cuda.decode (decode_batch).
cudaError_t moe_grouped_run(const decode_weights &w, const decode_batch &b, grouped_tactic t, cudaStream_t stream);

} // namespace fp4moe::cuda
