// The K order of cuda.grouped's token tiles (wgmma's B operand), how its gather and gate_up's epilogue produce it,
// and which token blocks each GEMM launch multiplies, as inline functions for the device and the host, so the CPU tests
// check them against mma_pack's lane order (tests/quant/test_mma_pack.cpp).
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

/// Which of an expert's token blocks one gate_up or down launch multiplies: all of them (blocks of the launch's bn
/// rows), or, where gate_up's narrow tails run in a launch of their own (grouped_tactic::tail), the blocks of
/// split_bn rows but a last, partly filled one of at most tail_rows rows (wide), or only that one (tail).
enum grouped_part { grouped_part_all, grouped_part_wide, grouped_part_tail };

struct grouped_split {
    int part;      ///< grouped_part
    int split_bn;  ///< the wide launch's bn: an expert's tail is its count mod split_bn rows
    int tail_rows; ///< the tail launch's bn: tails of at most this many rows are its own
};

/// Token blocks of an expert of c rows that a launch of bn-row blocks multiplies.
FP4MOE_HD int grouped_blocks(const grouped_split &s, int c, int bn) {
    if (s.part == grouped_part_all) return (c + bn - 1) / bn;
    const int r = c % s.split_bn;
    return s.part == grouped_part_wide ? c / s.split_bn + (r > s.tail_rows) : (r > 0 && r <= s.tail_rows);
}

/// First row (relative to the expert's first) and row count of block m of such an expert.
FP4MOE_HD void grouped_block_rows(const grouped_split &s, int c, int bn, int m, int &row0, int &rows) {
    if (s.part == grouped_part_tail) {
        rows = c % s.split_bn, row0 = c - rows;
    } else {
        row0 = m * bn, rows = c - row0 < bn ? c - row0 : bn;
    }
}

} // namespace fp4moe::cuda
