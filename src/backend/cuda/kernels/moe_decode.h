// Launchers of the cuda.decode MoE runner (moe_decode.cu): NVFP4 experts in the mma_pack layout, bf16
// activations, tensor-core mma.m16n8k16 with fp32 accumulation, for any token count (fast for small ones).
//
// One run, after routing and the plan (moe_route.h) are on the device:
//   gate_up   grid (16-row weight tiles / tiles per CTA, work-group bound): each CTA finds its work group (an
//             expert and `nt` token tiles of 8 rows) from the device counts, dequantizes in registers, mma,
//             SiLU(gate) * up in the epilogue (gate and up rows interleaved per tile), bf16 act rows.
//   down      same shape over H rows (its CTAs look up their work and start their weight copies while gate_up
//             finishes, and wait for gate_up only before reading act rows); the epilogue applies the global
//             scale and the router weight, writes an fp32 row per (token, slot) pair, and the warp that
//             completes a token's last pair for a 16-row tile (an atomic counter per token and tile) sums the
//             slots in slot order into the bf16 output: the weighted combine is fused, and deterministic.
//   combine   (tactics with `combine_kernel` only) the same sums in a kernel of its own after down: down's warps
//             then end with their stores (no counter round trip, no combining warp holding its CTA), for one more
//             launch; from T = 16 this is the faster form (bench/results/h200/NOTES.md).
// Everything runs on `stream` without host synchronization or allocation (graph-capturable). Grids come from
// host upper bounds; blocks past the device-side group count exit at once.
//
// Host-includable: only cuda_runtime_api.h types; bf16 tensors are uint16 bit patterns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp4moe::cuda {

/// Repacked weights of one layer on the device (num_experts = routed + shared slots, experts contiguous).
struct decode_weights {
    const std::uint8_t *gate_up_q = nullptr; ///< [NE][tiles_gu * ksteps_gu * 512]
    const std::uint8_t *gate_up_s = nullptr; ///< [NE][tiles_gu * ksteps_gu * 64]
    const std::uint8_t *down_q = nullptr;    ///< [NE][tiles_down * ksteps_down * 512]
    const std::uint8_t *down_s = nullptr;    ///< [NE][tiles_down * ksteps_down * 64]
    const float *gs_gate = nullptr;          ///< [NE] global scales (weight_scale_2)
    const float *gs_up = nullptr;            ///< [NE]
    const float *gs_down = nullptr;          ///< [NE]
    int tiles_gu = 0, ksteps_gu = 0;         ///< ceil(I / 8), ceil(H / 64)
    int tiles_down = 0, ksteps_down = 0;     ///< ceil(H / 16), ceil(I / 64)
};

/// One batch: activations, the device plan, and scratch (sizes from moe_decode_workspace).
struct decode_batch {
    int hidden = 0, inter = 0; ///< H, I (multiples of 16)
    int num_experts = 0;       ///< E + S (<= 1024)
    int slots = 0;             ///< k + S
    int shared = 0;            ///< S: the last S experts serve every token (their weights are prefetched into L2)
    int tokens = 0;            ///< T of this batch
    int max_tokens = 0;        ///< the plan's capacity (masked layout row stride)
    bool masked = false;       ///< rows from masked_pairs instead of perm
    const std::uint16_t *x = nullptr;           ///< [T, H] bf16
    std::uint16_t *out = nullptr;               ///< [T, H] bf16
    const std::int32_t *topk_ids = nullptr;     ///< [T * slots]; a token whose first id is -1 gets NaN output
    const float *topk_weights = nullptr;        ///< [T * slots]
    const std::int32_t *counts = nullptr;       ///< [NE]
    const std::int32_t *offsets = nullptr;      ///< [NE + 1] (permuted)
    const std::int32_t *perm = nullptr;         ///< [T * slots] (permuted)
    const std::int32_t *masked_pairs = nullptr; ///< [NE * max_tokens] (masked)
    void *workspace = nullptr;                  ///< moe_decode_workspace(...) bytes, 256-byte aligned
};

/// A variant: `nt` token tiles of 8 per warp, `ksplit` warps sharing one weight tile's K; weights stream either
/// through registers (`stages` = 0: each lane keeps `inflight` 64-wide K steps of loads in flight) or through a
/// shared-memory ring of `stages` bulk copies of `inflight` K steps each (the copy engine; no registers held).
/// `mt` > 1: each warp multiplies that many consecutive weight tiles with the same activations.
/// `down_ksplit` > 0: the down GEMM (K = I, often much shorter than gate_up's K = H) splits K this many ways.
/// Only the combinations in kDecodeTactics are compiled.
struct decode_tactic {
    int nt = 1;
    int ksplit = 1;
    int inflight = 4;
    int stages = 0;
    int down_ksplit = 0;
    int mt = 1;                  ///< 16-row weight tiles per warp (bulk ring only), sharing the B fragments
    int min_ctas = 0;            ///< > 1: registers capped so this many CTAs fit on an SM (a grid of one wave at T = 1)
    bool combine_kernel = false; ///< the weighted combine as a third kernel instead of down's last warp per token
    int warps = 4;               ///< warps per CTA (a multiple of ksplit and of down_ksplit)
    /// > nt: token tiles per work group of an expert with more than nt tiles of rows (the shared experts from T = 9;
    /// named for them, which it was first built for), so each dequantized step feeds more rows (bulk ring only)
    int shared_nt = 0;
    /// gate_up launched in plain stream order after routing instead of as a programmatic dependent launch, whose CTAs
    /// become resident and wait while routing runs. Which one is faster depends on the tactic and T (H100, T = 1:
    /// 0.3-3.7 us faster for some tactics, 1-2 us slower for others; bench/results/h200/NOTES.md, s36): a tuning
    /// choice.
    bool gate_up_in_order = false;
};

/// Whether `w` and `b` describe a batch the CUDA runners accept: positive sizes, H and I multiples of 16, fewer
/// than 1024 experts, T within the plan's capacity, a workspace, and weights tiled for this H and I.
bool moe_batch_valid(const decode_weights &w, const decode_batch &b);

/// Every compiled tactic; index = the runner's tactic id.
extern const decode_tactic kDecodeTactics[];
extern const int kDecodeTacticCount;

/// Scratch bytes for batches up to `max_tokens` tokens (any tactic).
std::size_t moe_decode_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens);

/// Launches gate_up and down (programmatic dependent launches: each may start while the previous kernel
/// drains; gate_up in plain stream order where t.gate_up_in_order). cudaErrorInvalidValue (nothing launched) for bad
/// sizes or an unknown tactic. T = 0 launches nothing.
cudaError_t moe_decode_run(const decode_weights &w, const decode_batch &b, decode_tactic t, cudaStream_t stream);

} // namespace fp4moe::cuda
