// The cuda.grouped runner's kernels around its two GEMMs (moe_grouped_prep.cu), shared with sm90a/moe_grouped.cu:
// the workspace layout, the launches that put the tokens in expert order before gate_up (rows, pairs, gather) and
// the one that rounds down's fp32 sums after it (combine). Plain CUDA: nothing here needs sm_90a. Host-includable.
#pragma once

#include "kernels/moe_decode.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

/// Work-item counters of the GEMM launches (gate_up, down, gate_up's narrow tails), zeroed by the rows kernel.
constexpr int kGroupedCounters = 3;

/// Byte offsets of the workspace regions, from the same upper bounds on host and device. out_acc is the fp32
/// [T, H] sum of each token's weighted slot rows, zeroed by gate_up's idle producer warps and added to by down's
/// epilogue; xp and act are [rows, K64] bf16 rows in expert order, each 64-wide K chunk permuted (grouped_layout.h).
struct grouped_layout {
    std::size_t rowbase, sched, pair_of_row, row_of_pair, xp, act, out_acc, total;
    int rows, k64_hidden, k64_inter; ///< rows: max_tokens x slots; K rounded up to 64
};
grouped_layout make_grouped_layout(int hidden, int inter, int num_experts, int slots, int max_tokens);

/// The regions of one workspace.
struct grouped_buffers {
    std::int32_t *rowbase;     ///< [E + 1] each expert's first row in the compact order
    int *sched;                ///< [kGroupedCounters] the GEMM launches' work-item counters
    std::int32_t *pair_of_row; ///< [rows] each row's (token, slot) pair
    std::int32_t *row_of_pair; ///< [T x slots] each pair's row
    std::uint16_t *xp, *act;   ///< gate_up's and down's token rows (wgmma's B operand)
    float *out_acc;            ///< [T, H]
};
grouped_buffers grouped_carve(void *workspace, const grouped_layout &l);

/// rows, pairs and gather on `stream` (PDL-chained): rowbase, the work-item counters zeroed, pair_of_row,
/// row_of_pair and xp.
cudaError_t grouped_prepare(const decode_batch &b, const grouped_layout &l, const grouped_buffers &ws,
                            cudaStream_t stream);

/// combine on `stream`: out = bf16(out_acc), NaN for a token routing refused.
cudaError_t grouped_combine(const decode_batch &b, const grouped_buffers &ws, cudaStream_t stream);

} // namespace fp4moe::cuda
