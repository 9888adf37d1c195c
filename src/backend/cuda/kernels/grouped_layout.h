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

/// Element offset, in an act row of whole permuted chunks, of unit j (0..7) of half chunk h: act features
/// 32 h .. 32 h + 31 (k = 0..31 or 32..63 of chunk h / 2) sit at positions 16 q + 8 u + 2 t + c with t < 2 or
/// t >= 2, i.e. in the first or the last 8 bytes of each of the chunk's eight 16-byte vectors; unit j is those
/// 8 bytes of vector j. A gate_up CTA of three warpgroups writes 96 features, three half chunks: it stores 8-byte
/// units where a CTA of 64 or 128 features stores whole vectors.
FP4MOE_HD int grouped_half_chunk_slot(int h, int j) {
    return 64 * (h / 2) + 8 * j + 4 * (h % 2);
}

/// Where such a CTA stages act feature f, its local feature fl = f - (its first feature, a multiple of 32): half
/// chunk fl / 32 is 32 elements, unit j of it elements 4 j .. 4 j + 3, in the order the copy-out stores them.
FP4MOE_HD int grouped_half_chunk_staging(int fl, int f) {
    const int p = grouped_k_position(f % 64);
    return 32 * (fl / 32) + 4 * (p / 8) + p % 4;
}

} // namespace fp4moe::cuda
