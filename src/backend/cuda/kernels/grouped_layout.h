// The K order of cuda.grouped's token tiles (wgmma's B operand), and how its gather and gate_up's epilogue produce
// it, as inline functions for the device and the host, so the CPU tests check them against mma_pack's lane order
// (tests/quant/test_mma_pack.cpp).
//
// A packed weight word q of lane 4 g + t holds k = 16 t + 4 q + 2 u + c at mma-k 8 u + 2 t + c of k16 slice q
// (mma_pack.h). wgmma reads slice q of a token row from positions 16 q .. 16 q + 15 of its 64-wide K chunk, in
// mma-k order, so activation k must sit at position 16 q + 8 u + 2 t + c: a permutation of the chunk's bf16 pairs.
#pragma once

#include "mma_dequant.h" // FP4MOE_HD (same folder: the CPU tests include this header by another path)

namespace fp4moe::cuda {

/// Position (0..63) of activation k (0..63) in a permuted 64-wide K chunk.
FP4MOE_HD int grouped_k_position(int k) {
    return 16 * ((k % 16) / 4) + 8 * ((k % 4) / 2) + 2 * (k / 16) + k % 2;
}

/// The bf16 pair (0..31) of the natural chunk that word w (0..3) of the permuted chunk's 16-byte vector i (0..7)
/// holds: positions 8 i .. 8 i + 7 are slice q = i / 2, half u = i % 2, and word w is t = w, so pair
/// (16 w + 4 q + 2 u) / 2 = 8 w + i.
FP4MOE_HD int grouped_vector_source_pair(int i, int w) {
    return 8 * w + i;
}

} // namespace fp4moe::cuda
