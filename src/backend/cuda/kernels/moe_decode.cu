// cuda.decode kernels (see moe_decode.h for the pipeline and mma_pack.h for the weight layout).
//
// Why this shape: at decode an MoE layer is a stream of expert weights, each read once. Weight tiles are the
// mma A operand (16 output rows x 16 K), tokens the B operand (n = 8 per mma), so one token still uses the
// tensor cores, and every weight byte is dequantized once however many tokens share it. One 16-byte read per
// lane per 64 K carries four A fragments, a 2-byte read its two block scales. The copy engine keeps S chunks of
// U K steps in flight per warp while the current chunk is dequantized and multiplied. On the H200 the loop is
// issue-bound (bench/results/h200/NOTES.md): every instruction in it costs time, which is why it has no per-step
// guards. A full chunk's SASS is 64 instructions per 576-byte K step (gate_up, U = 4, one tile per warp; 76 before
// the thirty-ninth session's bit layout, mma_dequant.h); issuing the next chunk's copies costs 38 more for two tiles'
// four copies (one elected lane, warp-uniform operands; 93 with the lane test before the fortieth session).
#include "kernels/decode_device.cuh"
#include "kernels/mma_dequant.h"
#include "kernels/moe_decode.h"
#include "kernels/pdl.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <iterator>

namespace fp4moe::cuda {
namespace {

using namespace decode_device;
using namespace ptx;

constexpr int kMaxExperts = 1024;

// 16 bf16 zeros: the B operand of a lane whose K block lies past the data.
__device__ __align__(16) const std::uint16_t kZeroRow[16] = {};

__host__ __device__ constexpr std::size_t align256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

// Workspace regions, all derived from the same upper bounds on host and device.
struct layout {
    std::size_t act, partial, counters, total;
    int max_rows, k_pad_inter;
};

__host__ __device__ inline layout make_layout(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    layout l{};
    const long long pairs = static_cast<long long>(max_tokens) * slots;
    const long long busy = pairs < num_experts ? pairs : num_experts; // experts that can hold a token
    l.max_rows = static_cast<int>(pairs + 7 * busy);                  // sum ceil(c/8)*8
    l.k_pad_inter = (inter + 63) / 64 * 64;
    std::size_t off = 0;
    // act first, then partial (never empty): down's full chunks may prefetch B up to 4 steps (512 bytes) past act's
    // last row, which must stay inside the workspace.
    l.act = off, off += align256(2 * static_cast<std::size_t>(l.max_rows) * l.k_pad_inter);
    l.partial = off, off += align256(4 * static_cast<std::size_t>(pairs) * hidden);
    l.counters = off, off += align256(4 * static_cast<std::size_t>(max_tokens) * ((hidden + 15) / 16));
    l.total = off;
    return l;
}

// ---- work lookup --------------------------------------------------------------------------------------

// Where work group `gi` lies: expert `e`, its first 8-row token tile, and the expert's first row in the padded
// act layout. Every CTA scans the per-expert counts itself (<= 1024 ints from L2, a block scan of 128
// threads): cheaper than a separate one-CTA kernel and its launch between routing and the GEMMs.
struct group_pos {
    int e, tile0, pad_row, valid;
    int nt; // token tiles of this group
};

// An expert with more than `nt` tiles of rows (the shared experts from T = 9, a routed one with 9 or more tokens at
// nt = 1) is cut into groups of `nt_shared` >= nt tiles (the name is the tactic field's, shared_nt), so each
// dequantized weight step feeds more of its rows; the others make groups of `nt`. `shared_first`: the shared experts'
// groups (and act rows) come first, so their longer CTAs start in the first wave instead of lengthening the last.
//
// NT and NTS are template arguments so that the tiles-to-groups divisions are by constants (a shift or a multiply),
// not the ~40-instruction integer division by a runtime value that every thread ran once per expert it scans.
template <int W, int NT, int NTS>
__device__ group_pos find_group(const std::int32_t *__restrict__ counts, int num_experts, int shared, bool shared_first,
                                int gi) {
    constexpr int nt = NT, nt_shared = NTS;
    // Groups of an expert with `tiles` row tiles (each branch divides by a constant).
    auto groups_of = [](int tiles) { return tiles > nt ? (tiles + nt_shared - 1) / nt_shared : (tiles + nt - 1) / nt; };
    const int rot = shared_first ? num_experts - shared : 0; // scan position i holds expert (i + rot) % num_experts
    __shared__ int warp_g[W], warp_t[W];
    __shared__ group_pos found;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int per = (num_experts + W * 32 - 1) / (W * 32), first = tid * per;
    if (tid == 0) found.valid = 0;
    int my_g = 0, my_t = 0;
    for (int i = 0; i < per; ++i) {
        if (first + i >= num_experts) break;
        const int e = first + i + rot < num_experts ? first + i + rot : first + i + rot - num_experts;
        const int tiles = (counts[e] + 7) / 8;
        my_t += tiles, my_g += groups_of(tiles);
    }
    int inc_g = my_g, inc_t = my_t; // inclusive warp scan
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int og = __shfl_up_sync(0xFFFFFFFFu, inc_g, d), ot = __shfl_up_sync(0xFFFFFFFFu, inc_t, d);
        if (lane >= d) inc_g += og, inc_t += ot;
    }
    if (lane == 31) warp_g[warp] = inc_g, warp_t[warp] = inc_t;
    __syncthreads();
    int base_g = inc_g - my_g, base_t = inc_t - my_t;
    for (int w = 0; w < warp; ++w) base_g += warp_g[w], base_t += warp_t[w];
    if (gi >= base_g && gi < base_g + my_g) {
        for (int i = 0; i < per; ++i) {
            const int e = first + i + rot < num_experts ? first + i + rot : first + i + rot - num_experts;
            const int tiles = (counts[e] + 7) / 8, n = tiles > nt ? nt_shared : nt, ng = groups_of(tiles);
            if (gi < base_g + ng) {
                found = {e, (gi - base_g) * n, 8 * base_t, 1, n};
                break;
            }
            base_g += ng, base_t += tiles;
        }
    }
    __syncthreads();
    return found;
}

// ---- the grouped mma kernel -----------------------------------------------------------------------------

struct gemm_args {
    const std::uint8_t *wq, *ws;    // packed weights and scale codes of expert 0
    std::size_t expert_q, expert_s; // per-expert strides in bytes
    int tiles, ksteps;              // weight tiles, K steps
    int k_valid;                    // K columns that hold data (B loads past it are zero)
    const std::uint16_t *b;         // B rows: x [T, H] (gate_up) or act [rows, k_pad] (down)
    int ldb;                        // B row stride in elements
    const std::int32_t *counts, *offsets, *perm, *masked_pairs;
    int slots, max_tokens, inter, hidden;
    bool masked;
    int num_experts;
    const float *gs0, *gs1; // gate_up: gate/up global scales; down: down scale (gs1 unused)
    const float *topk_weights;
    std::uint16_t *act; // gate_up output
    int ld_act;
    float *partial; // down output: one fp32 row per (token, slot) pair
    int *counters;  // [T][down tiles]: pairs done per token and 16-row tile (the last one combines)
    int tokens, down_tiles;
    int shared; // always-used expert slots at the end (shared experts): their weights are prefetched
    const std::int32_t *topk_ids;
    std::uint16_t *out;
    bool fused_combine; // down's last warp per (token, tile) combines; else moe_combine_kernel runs after down
};

// Pair (token * slots + slot) of row `rr` of expert `e`.
__device__ __forceinline__ int pair_of(const gemm_args &g, int e, int rr) {
    return g.masked ? g.masked_pairs[e * g.max_tokens + rr] : g.perm[g.offsets[e] + rr];
}

// Bytes of one stage of the bulk-copy ring (U ksteps of weights + their scale codes), and of a CTA's rings.
__host__ __device__ constexpr int stage_bytes(int u) {
    return u * (512 + 64);
}
__host__ __device__ constexpr int ring_smem_bytes(int u, int stages, int mt, int warps) {
    return stages ? warps * stages * (mt * stage_bytes(u) + 8) : 0;
}

template <bool GateUp, int NT, int KS, int U, int S, int MT, int W, int P>
__device__ __forceinline__ void gemm_group(const gemm_args &g, const group_pos &gp, float *red);

// S = 0: each lane keeps U ksteps of its weights in flight in registers (a ring of 16-byte loads).
// S > 0: lane 0 of each warp keeps S stages of U ksteps in flight with bulk copies into shared memory.
// MT > 1 (bulk ring only): each warp multiplies MT consecutive 16-row weight tiles with the same B fragments
// (one B load and one chunk's bookkeeping per MT tiles' steps; MT independent dequant streams).
// W: warps per CTA. MB: CTAs per SM the compiler must fit (registers capped at 65536 / (32 W MB)); 1 leaves it to
// the compiler (0 in the bounds emits no .minnctapersm: an explicit 1 changed ptxas's choices, 2.6 % slower at
// glm-4.5-air T = 64).
// NTS: token tiles per group of an expert with more than NT tiles of rows (find_group). At T = 64 a shared expert's
// 64 rows were 8 groups of NT = 1, each dequantizing the expert's weights again (~5 % of both GEMMs at
// glm-4.5-air); NTS > NT multiplies each dequantized step with NTS token tiles instead. Its B ring is NT / NTS as deep,
// so both group kinds hold the same registers for B.
template <bool GateUp, int NT, int KS, int U, int S, int MT, int MB, int W, int NTS>
__global__ void __launch_bounds__(W * 32, MB > 1 ? MB : 0) moe_gemm_kernel(const gemm_args g) {
    static_assert(MT == 1 || S > 0, "several tiles per warp need the bulk-copy ring");
    static_assert(NTS == NT || S > 0, "wider groups (NTS) need the bulk-copy ring");
    // Programmatic dependent launch. gate_up lets down launch only once it has waited for routing: down's CTAs
    // may then read the plan (and, with the bulk ring, issue their first weight copies) while gate_up's last
    // CTAs still run, and wait for gate_up's act rows only before their first activation load.
    if constexpr (!GateUp) allow_next_kernel();
    if (GateUp && g.shared > 0 && threadIdx.x == 0) {
        // Shared experts are used by every token whatever the routing: pull their weights into L2 while routing
        // still runs. 32 KB pieces spread over the CTAs.
        const std::size_t cta = blockIdx.y * static_cast<std::size_t>(gridDim.x) + blockIdx.x;
        const std::size_t ctas = static_cast<std::size_t>(gridDim.x) * gridDim.y, piece = 32768;
        const std::size_t first = static_cast<std::size_t>(g.num_experts - g.shared);
        const std::uint8_t *q = g.wq + first * g.expert_q, *sc = g.ws + first * g.expert_s;
        const std::size_t qbytes = g.shared * g.expert_q, sbytes = g.shared * g.expert_s;
        for (std::size_t off = cta * piece; off < qbytes; off += ctas * piece)
            prefetch_l2(q + off, static_cast<std::uint32_t>(qbytes - off < piece ? qbytes - off : piece));
        for (std::size_t off = cta * piece; off < sbytes; off += ctas * piece)
            prefetch_l2(sc + off, static_cast<std::uint32_t>(sbytes - off < piece ? sbytes - off : piece));
    }
    if constexpr (GateUp) {
        wait_for_previous_kernel();
        allow_next_kernel();
    } else if constexpr (S == 0) {
        wait_for_previous_kernel();
    }
    if constexpr (GateUp) {
        if (blockIdx.y == 0) {
            // For the down kernel (which waits for this one): zero the combine counters; a token that routing
            // refused (ids -1: non-finite logits) gets NaN outputs, never stale data.
            if (g.fused_combine)
                for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < g.tokens * g.down_tiles;
                     i += gridDim.x * blockDim.x)
                    g.counters[i] = 0;
            for (int t = blockIdx.x; t < g.tokens; t += gridDim.x)
                if (g.topk_ids[static_cast<std::size_t>(t) * g.slots] < 0)
                    for (int h = threadIdx.x; h < g.hidden; h += blockDim.x)
                        g.out[static_cast<std::size_t>(t) * g.hidden + h] = 0x7FC0;
        }
    }
    const group_pos gp = find_group<W, NT, NTS>(g.counts, g.num_experts, g.shared, NTS != NT, blockIdx.y);
    if (!gp.valid) return;
    // The K parts' partial sums meet in shared memory: with the bulk ring, in each warp's own ring (free once its
    // K loop is done; the ring is larger than any warp's partials); with the register ring, in this array.
    __shared__ float red[S == 0 && KS > 1 ? W * MT * NT * 4 * 32 : 1];
    constexpr int P = U < 4 ? U : 4; // B's lead in K steps (bulk ring)
    if constexpr (NTS != NT)
        if (gp.nt == NTS) {
            gemm_group<GateUp, NTS, KS, U, S, MT, W, (P * NT / NTS > 0 ? P * NT / NTS : 1)>(g, gp, red);
            return;
        }
    gemm_group<GateUp, NT, KS, U, S, MT, W, P>(g, gp, red);
}

// The GEMM of one work group (expert gp.e, token tiles gp.tile0 ..+NT) for this CTA's weight tiles. P: how many K
// steps ahead B is loaded (bulk ring; the register ring loads it U steps ahead). `red`: the register ring's K-part
// buffer ([W][MT * NT * 4][32] floats).
template <bool GateUp, int NT, int KS, int U, int S, int MT, int W, int P>
__device__ __forceinline__ void gemm_group(const gemm_args &g, const group_pos &gp, float *red) {
    const int e = gp.e, tile0 = gp.tile0;
    const int count = g.counts[e];
    // The warp index broadcast from lane 0: ptxas then knows it is warp-uniform, so the ring and tile addresses the
    // bulk copies take live in uniform registers (no per-copy move into them).
    const int warp = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 32), 0);
    const int lane = threadIdx.x % 32, lg = lane / 4, lt = lane % 4;
    const int tile = (blockIdx.x * (W / KS) + warp / KS) * MT, kpart = warp % KS; // the warp's first tile
    const bool has_tile = tile < g.tiles;

    // down's epilogue needs the (token, slot) pair of each accumulator row and of the lane's combine row, and the
    // pairs' router weights: dependent global reads that would stall the warp for a few round trips after its
    // last K step, holding its slot on the SM. The plan is complete when down starts (gate_up released it after
    // waiting for routing), so the pairs are read now and the weights once the pairs have arrived (after the wait
    // for gate_up below), both long done by the epilogue.
    int ep_pair[NT][2], cmb_pair = -1;
    float ep_weight[NT][2];
    if constexpr (!GateUp) {
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int rr = (tile0 + n) * 8 + 2 * lt + c;
                ep_pair[n][c] = rr < count ? pair_of(g, e, rr) : -1;
            }
        if (lane < 8 * NT && tile0 * 8 + lane < count) cmb_pair = pair_of(g, e, tile0 * 8 + lane);
    }
    auto load_epilogue_weights = [&] {
        if constexpr (!GateUp)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) ep_weight[n][c] = ep_pair[n][c] >= 0 ? g.topk_weights[ep_pair[n][c]] : 0.0f;
    };
    if constexpr (S == 0) load_epilogue_weights(); // the register ring waited for gate_up at the top

    // B row of this lane (row lg of each 8-row token tile), offset to its 16-column block. A padding row (past
    // the expert's count) reads the group's first row instead: its token column is never stored, so no load
    // needs a guard in the K loop. Found after the first weight copies are issued (gate_up's rows need the
    // plan's permutation: one more dependent read, which then overlaps the weights' first round trip).
    const std::uint16_t *brow[NT];
    auto find_rows = [&] {
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            int rr = (tile0 + n) * 8 + lg;
            if (rr >= count) rr = tile0 * 8;
            if constexpr (GateUp)
                brow[n] = g.b + static_cast<std::size_t>(pair_of(g, e, rr) / g.slots) * g.ldb + 16 * lt;
            else
                brow[n] = g.b + static_cast<std::size_t>(gp.pad_row + rr) * g.ldb + 16 * lt;
        }
    };

    // Independent accumulator chains per token tile (4 / NT of them): consecutive mma on one accumulator wait
    // for each other (tens of cycles each), so with one token tile the four k-slices of a step go to four.
    constexpr int kChains = 4 / (NT * MT) > 0 ? 4 / (NT * MT) : 1;
    float chain[MT][NT][kChains][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < kChains; ++c)
                chain[m][n][c][0] = chain[m][n][c][1] = chain[m][n][c][2] = chain[m][n][c][3] = 0.0f;

    const int k_begin = g.ksteps * kpart / KS, k_end = g.ksteps * (kpart + 1) / KS;
    const std::uint8_t *tq = g.wq + e * g.expert_q + (static_cast<std::size_t>(tile) * g.ksteps) * 512;
    const std::uint8_t *ts = g.ws + e * g.expert_s + (static_cast<std::size_t>(tile) * g.ksteps) * 64;
    const std::uint8_t *aq = tq + lane * 16, *as = ts + lane * 2;

    // B (16 contiguous activations per lane and token tile) for step k. B is loaded U steps ahead into a ring of
    // U slots: an L2 round trip hides behind U steps of work (one step was not enough: loads of B were the main
    // stall). Steps past k_end load step k_end - 1 again (never used); a lane whose 16 columns lie past the data
    // (K % 64 != 0, last step) reads zeros: the weights there are 0, and 0 x NaN would not be.
    const int k_lane_end = min(k_end, (g.k_valid - 16 * lt + 63) / 64);
    auto load_b = [&](int k, uint4(&dst)[NT][2]) {
        const int kk = min(k, k_end - 1);
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const std::uint16_t *p = kk < k_lane_end ? brow[n] + kk * 64 : kZeroRow;
            dst[n][0] = __ldg(reinterpret_cast<const uint4 *>(p));
            dst[n][1] = __ldg(reinterpret_cast<const uint4 *>(p + 8));
        }
    };
    uint4 bring[S == 0 ? U : P][NT][2];
    auto step = [&](const uint4 &qv, std::uint32_t codes, const uint4(&b)[NT][2]) { // register ring: MT = 1
        mma_kstep<NT, kChains>(chain[0], qv, codes, b);
    };

    if constexpr (S == 0) {
        find_rows();
        if (has_tile) {
            // Step k is consumed, then the loads of step k + U take its slots.
            uint4 q[U];
            std::uint32_t s[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                q[u] = make_uint4(0, 0, 0, 0), s[u] = 0;
                if (k_begin + u < k_end)
                    q[u] = load_stream(aq + (k_begin + u) * 512), s[u] = load_stream2(as + (k_begin + u) * 64);
                load_b(k_begin + u, bring[u]);
            }
            for (int k0 = k_begin; k0 < k_end; k0 += U) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int k = k0 + u;
                    if (k >= k_end) break;
                    const uint4 qv = q[u];
                    const std::uint32_t codes = s[u];
                    if (k + U < k_end) q[u] = load_stream(aq + (k + U) * 512), s[u] = load_stream2(as + (k + U) * 64);
                    step(qv, codes, bring[u]);
                    load_b(k + U, bring[u]);
                }
            }
        }
    } else {
        extern __shared__ __align__(128) std::uint8_t ring_smem[];
        // A stage: for each of the MT tiles, U steps of packed weights then their scale codes.
        constexpr int kStageQ = U * 512, kStageM = stage_bytes(U), kStage = MT * kStageM;
        std::uint8_t *ring = ring_smem + warp * S * kStage;
        auto *bars = reinterpret_cast<std::uint64_t *>(ring_smem + W * S * kStage) + warp * S;
        if (lane == 0)
            for (int st = 0; st < S; ++st) mbar_init(&bars[st], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        __syncwarp();
        const int chunks = (k_end - k_begin + U - 1) / U;
        const int mt_valid = min(MT, g.tiles - tile); // tiles past the matrix (last warp) are not copied
        // One elected lane issues a chunk's copies (elect_one: ptxas then emits each copy once, where a lane test
        // compiled to a loop over the active lanes per copy). A full chunk's byte counts are constants.
        auto issue_steps = [&](int st, int k, int n) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); // our reads of the slot come first
            mbar_expect_tx(&bars[st], static_cast<std::uint32_t>(mt_valid * n * (512 + 64)));
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                if (m >= mt_valid) break;
                const std::size_t tile_off = static_cast<std::size_t>(m) * g.ksteps; // tiles are K-step runs
                bulk_copy(ring + st * kStage + m * kStageM, tq + (tile_off + k) * 512, n * 512, &bars[st]);
                bulk_copy(ring + st * kStage + m * kStageM + kStageQ, ts + (tile_off + k) * 64, n * 64, &bars[st]);
            }
        };
        auto issue = [&](int c) {
            const int st = c % S, k = k_begin + c * U;
            if (k + U <= k_end)
                issue_steps(st, k, U);
            else
                issue_steps(st, k, k_end - k);
        };
        // B runs P steps ahead (its own register ring, at most 4 deep however long a chunk is). A chunk whose
        // steps and prefetches all lie inside the data (warp-uniform test) loads B at constant offsets from one
        // pointer per token tile: no clamp, no select, no address math per step.
        const int k_full = min(k_end, g.k_valid / 64);
        // The last chunk start that needs no checks: all U steps inside the K part and every prefetch a step uses
        // inside the data. down's prefetches may also run past its K part (never used): they read act's next row,
        // or past the last one into the workspace's next region (make_layout), where gate_up's x has no such slack.
        const int k0_full = GateUp || k_end > k_full ? k_full - U - P : k_end - U;
        if (has_tile && elect_one())
            for (int c = 0; c < S && c < chunks; ++c) issue(c);
        if constexpr (!GateUp) wait_for_previous_kernel(); // gate_up's act rows (and counters) from here on
        load_epilogue_weights();
        if (has_tile) {
            find_rows();
#pragma unroll
            for (int u = 0; u < P; ++u) load_b(k_begin + u, bring[u]);
            for (int c = 0; c < chunks; ++c) {
                const int st = c % S;
                mbar_wait(&bars[st], static_cast<std::uint32_t>((c / S) & 1));
                const std::uint8_t *buf = ring + st * kStage;
                const int k0 = k_begin + c * U;
                auto consume = [&](int u) { // a tile past the matrix multiplies stale bytes, never stored
#pragma unroll
                    for (int m = 0; m < MT; ++m) {
                        const std::uint8_t *bm = buf + m * kStageM;
                        const uint4 qv = *reinterpret_cast<const uint4 *>(bm + u * 512 + lane * 16);
                        const std::uint32_t codes =
                            *reinterpret_cast<const unsigned short *>(bm + kStageQ + u * 64 + lane * 2);
                        mma_kstep<NT, kChains>(chain[m], qv, codes, bring[u % P]);
                    }
                };
                if (k0 <= k0_full) { // a full chunk: no checks
                    const std::uint16_t *bnext[NT];
#pragma unroll
                    for (int n = 0; n < NT; ++n) bnext[n] = brow[n] + (k0 + P) * 64;
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        consume(u);
#pragma unroll
                        for (int n = 0; n < NT; ++n) {
                            bring[u % P][n][0] = __ldg(reinterpret_cast<const uint4 *>(bnext[n] + u * 64));
                            bring[u % P][n][1] = __ldg(reinterpret_cast<const uint4 *>(bnext[n] + u * 64 + 8));
                        }
                    }
                } else {
#pragma unroll
                    for (int u = 0; u < U; ++u)
                        if (k0 + u < k_end) consume(u), load_b(k0 + u + P, bring[u % P]);
                }
                __syncwarp();
                if (c + S < chunks && elect_one()) issue(c + S);
            }
        }
    }

    float acc[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                acc[m][n][i] = chain[m][n][0][i];
#pragma unroll
                for (int c = 1; c < kChains; ++c) acc[m][n][i] += chain[m][n][c][i];
            }

    if constexpr (KS > 1) {
        constexpr int kRows = MT * NT * 4; // a warp's partials: [kRows][32] floats
        static_assert(S == 0 || S * MT * stage_bytes(U) >= kRows * 32 * 4, "a warp's ring holds its partials");
        auto part_of = [&](int w) { // warp w's partials
            if constexpr (S > 0) {
                extern __shared__ __align__(128) std::uint8_t ring_smem[];
                return reinterpret_cast<float *>(ring_smem + w * S * MT * stage_bytes(U));
            } else {
                return red + w * kRows * 32;
            }
        };
        if (kpart != 0) {
            float *mine = part_of(warp);
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int n = 0; n < NT; ++n)
#pragma unroll
                    for (int i = 0; i < 4; ++i) mine[((m * NT + n) * 4 + i) * 32 + lane] = acc[m][n][i];
        }
        __syncthreads();
        if (kpart != 0) return;
#pragma unroll
        for (int p = 1; p < KS; ++p) {
            const float *theirs = part_of(warp + p);
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int n = 0; n < NT; ++n)
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[m][n][i] += theirs[((m * NT + n) * 4 + i) * 32 + lane];
        }
    }
    if (!has_tile) return;

#pragma unroll
    for (int m = 0; m < MT; ++m) {
        const int tm = tile + m;
        if (tm >= g.tiles) break;
            // C fragment: acc[m][n][0..1] = row lg, tokens 2 lt, 2 lt + 1; [2..3] = row lg + 8, same tokens.
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int rr = (tile0 + n) * 8 + 2 * lt + c;
                if (rr >= count) continue;
                if constexpr (GateUp) {
                    const int feature = tm * 8 + lg;
                    if (feature >= g.ld_act) continue;
                    const float gate = acc[m][n][c] * (g.gs0[e] * kPackedProductScale);
                    const float up = acc[m][n][2 + c] * (g.gs1[e] * kPackedProductScale);
                    g.act[static_cast<std::size_t>(gp.pad_row + rr) * g.ld_act + feature] =
                        feature < g.inter ? silu_mul_bf16(gate, up) : std::uint16_t{0};
                } else {
                    const int pair = ep_pair[n][c];
                    const float scale = g.gs0[e] * kPackedProductScale * ep_weight[n][c];
                    const int row = tm * 16 + lg;
                    float *dst = g.partial + static_cast<std::size_t>(pair) * g.hidden;
                    if (row < g.hidden) dst[row] = acc[m][n][c] * scale;
                    if (row + 8 < g.hidden) dst[row + 8] = acc[m][n][2 + c] * scale;
                }
            }
    }
    if constexpr (!GateUp) {
        // Weighted combine, fused (decode_device::combine_tiles). Lane i reports token row i of the group
        // (8 NT <= 32 rows): one atomic round trip per warp for its MT tiles.
        if (g.fused_combine)
            combine_tiles<MT>(cmb_pair >= 0 ? cmb_pair / g.slots : -1, tile, g.tiles, g.slots, g.hidden, g.counters,
                              g.partial, g.out);
    }
}

template <bool GateUp, int NT, int KS, int U, int S, int MT, int MB, int W, int NTS>
cudaError_t launch_gemm(const gemm_args &g, int max_groups, bool in_order, cudaStream_t stream) {
    static_assert(W % KS == 0, "a tile's K parts are warps of one CTA");
    constexpr int per_cta = W / KS * MT; // weight tiles per CTA
    const dim3 grid((g.tiles + per_cta - 1) / per_cta, max_groups);
    constexpr int smem = ring_smem_bytes(U, S, MT, W);
    auto *const kernel = moe_gemm_kernel<GateUp, NT, KS, U, S, MT, MB, W, NTS>;
    if constexpr (smem > 48 * 1024) { // once per instance: not a stream operation, fine during capture
        static const cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (set != cudaSuccess) return set;
    }
    if (in_order) return launch_in_order(kernel, grid, dim3(W * 32), smem, stream, g);
    return launch_pdl(kernel, grid, dim3(W * 32), smem, 1, stream, g);
}

// The weighted combine as a kernel of its own (tactics with `combine_kernel`): out[t] = the sum over slots, in
// slot order, of token t's fp32 partial rows (router weight and global scale applied by down), rounded to bf16:
// the same sums, in the same order, as the fused combine. Four features per thread. A token that routing refused
// keeps the NaN row gate_up wrote (it has no partial rows).
__global__ void __launch_bounds__(256)
    moe_combine_kernel(const float *__restrict__ partial, const std::int32_t *__restrict__ topk_ids, int slots,
                       int hidden, std::uint16_t *__restrict__ out) {
    allow_next_kernel();
    // Tokens on x (no 65535 limit); down's partial rows are read after the wait.
    const int t = blockIdx.x, h = (blockIdx.y * blockDim.x + threadIdx.x) * 4;
    wait_for_previous_kernel();
    if (h >= hidden || topk_ids[static_cast<std::size_t>(t) * slots] < 0) return;
    const float *src = partial + static_cast<std::size_t>(t) * slots * hidden + h;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Slots in batches of 8 whose loads are all issued before the first add: one L2 round trip per batch, where a
    // loop of load-then-add waited on one per slot or two. The adds stay in slot order (the CPU's sums).
    constexpr int kBatch = 8;
    for (int j0 = 0; j0 < slots; j0 += kBatch) {
        float4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
            if (j0 + j < slots)
                v[j] = __ldcg(reinterpret_cast<const float4 *>(src + static_cast<std::size_t>(j0 + j) * hidden));
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
            if (j0 + j < slots) sum.x += v[j].x, sum.y += v[j].y, sum.z += v[j].z, sum.w += v[j].w;
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(sum.x, sum.y), hi = __floats2bfloat162_rn(sum.z, sum.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const std::uint32_t *>(&lo), packed.y = *reinterpret_cast<const std::uint32_t *>(&hi);
    *reinterpret_cast<uint2 *>(out + static_cast<std::size_t>(t) * hidden + h) = packed;
}

} // namespace

// The tactic table: (nt, ksplit, ksteps per load group, bulk-copy stages or 0 for the register ring[, ksplit
// of the down GEMM[, weight tiles per warp[, CTAs per SM[, combine kernel[, warps per CTA[, token tiles per
// group of an expert with more than nt tiles[, gate_up in stream order]]]]]]]). Then the T = 1
// favourites of the H200 sweep held to 6 CTAs per SM (glm-4.5-air's gate_up at T = 1 is 792 CTAs: one wave at 6, 1.2
// at 5), the sweep's T >= 4 favourites with the combine as a kernel of its own, and CTAs of 8 warps. Why those: an
// SM's warp schedulers favour the warps of the CTAs that arrived first, so with one wave of six 4-warp CTAs per SM
// each CTA's K loop takes ~1.8 us longer than the one before it (glm-4.5-air T = 1, gate_up: 10.1 -> 18.8 us) and the
// last one runs alone, one warp per scheduler; 3 CTAs of 8 warps leave two per scheduler at the end (qwen3-30b-a3b
// T = 1 on the H200: 28.0 against 30.4 us; no gain at the larger shapes, bench/results/h200/NOTES.md). Last, the
// T = 64 favourites with the rows of every expert holding more than one token tile (the shared experts from T = 9,
// a routed expert with 9+ tokens) in groups of 2 tiles (each dequantized step serves 16 tokens instead of 8), as
// compiled (4 CTAs per SM) and held to 5 CTAs per SM. (4 token tiles spill: 128 registers and 192 bytes of
// spill stores in down.) Last, T <= 4 candidates with gate_up launched in stream order after routing instead of as a
// programmatic dependent launch (decode_tactic::gate_up_in_order): which is faster depends on the tactic and T.
const decode_tactic kDecodeTactics[] = {{1, 2, 2, 4},
                                        {1, 1, 2, 4},
                                        {1, 4, 2, 4},
                                        {1, 2, 2, 8},
                                        {2, 1, 2, 4},
                                        {2, 2, 2, 4},
                                        {4, 1, 2, 4},
                                        {4, 2, 2, 4},
                                        {1, 2, 4, 2},
                                        {1, 1, 4, 2},
                                        {1, 4, 4, 2},
                                        {1, 2, 4, 4},
                                        {2, 2, 4, 2},
                                        {1, 2, 4, 0},
                                        {1, 4, 4, 0},
                                        {1, 2, 4, 2, 1},
                                        {1, 1, 4, 2, 2},
                                        {1, 4, 4, 2, 1},
                                        {1, 4, 4, 2, 2},
                                        {1, 2, 2, 4, 1},
                                        {1, 1, 8, 2},
                                        {1, 2, 8, 2},
                                        {1, 2, 8, 2, 1},
                                        {1, 1, 8, 3},
                                        {1, 1, 4, 2, 0, 2},
                                        {1, 2, 4, 2, 1, 2},
                                        {1, 2, 4, 2, 1, 1, 6},
                                        {1, 4, 4, 2, 2, 1, 6},
                                        {1, 4, 4, 2, 1, 1, 6},
                                        {1, 1, 4, 2, 0, 1, 6},
                                        {1, 1, 4, 2, 0, 2, 0, true},
                                        {1, 2, 4, 2, 1, 2, 0, true},
                                        {1, 1, 4, 2, 0, 1, 0, true},
                                        {1, 1, 8, 2, 0, 1, 0, true},
                                        {1, 1, 4, 2, 0, 1, 6, true},
                                        {1, 2, 4, 2, 1, 1, 3, false, 8},
                                        {1, 4, 4, 2, 2, 1, 3, false, 8},
                                        {1, 1, 4, 2, 0, 2, 2, true, 8},
                                        {1, 1, 4, 2, 0, 2, 0, true, 4, 2},
                                        {1, 1, 4, 2, 0, 2, 5, true, 4, 2},
                                        {1, 2, 4, 2, 1, 2, 5, true, 4, 2},
                                        {1, 2, 4, 2, 1, 2, 0, true, 4, 2},
                                        {1, 2, 4, 2, 0, 1, 0, false, 4, 0, true},
                                        {1, 2, 8, 2, 0, 1, 0, false, 4, 0, true},
                                        {1, 1, 4, 2, 0, 1, 0, true, 4, 0, true},
                                        {1, 2, 4, 2, 1, 1, 6, false, 4, 0, true},
                                        {1, 2, 4, 2, 1, 2, 0, false, 4, 0, true},
                                        {1, 2, 4, 2, 1, 2, 0, true, 4, 0, true},
                                        {1, 1, 4, 2, 0, 2, 0, true, 4, 2, true},
                                        {1, 2, 4, 2, 1, 2, 0, true, 4, 2, true}};
const int kDecodeTacticCount = static_cast<int>(std::size(kDecodeTactics));

namespace {

template <bool GateUp>
cudaError_t dispatch(const gemm_args &g, int max_groups, decode_tactic t, cudaStream_t stream) {
#define FP4MOE_DECODE_CASE_NTS(NT_, KS_, U_, S_, MT_, MB_, W_, NTS_)                                                   \
    if (t.nt == NT_ && t.ksplit == KS_ && t.inflight == U_ && t.stages == S_ && t.mt == MT_ &&                         \
        std::max(1, t.min_ctas) == MB_ && t.warps == W_ && (t.shared_nt > 0 ? t.shared_nt : t.nt) == NTS_)             \
        return launch_gemm<GateUp, NT_, KS_, U_, S_, MT_, MB_, W_, NTS_>(g, max_groups, GateUp && t.gate_up_in_order,  \
                                                                         stream);
#define FP4MOE_DECODE_CASE_W(NT_, KS_, U_, S_, MT_, MB_, W_) FP4MOE_DECODE_CASE_NTS(NT_, KS_, U_, S_, MT_, MB_, W_, NT_)
#define FP4MOE_DECODE_CASE_OCC(NT_, KS_, U_, S_, MT_, MB_) FP4MOE_DECODE_CASE_W(NT_, KS_, U_, S_, MT_, MB_, 4)
#define FP4MOE_DECODE_CASE_MT(NT_, KS_, U_, S_, MT_) FP4MOE_DECODE_CASE_OCC(NT_, KS_, U_, S_, MT_, 1)
#define FP4MOE_DECODE_CASE(NT_, KS_, U_, S_) FP4MOE_DECODE_CASE_MT(NT_, KS_, U_, S_, 1)
    FP4MOE_DECODE_CASE(1, 2, 2, 4)
    FP4MOE_DECODE_CASE(1, 1, 2, 4)
    FP4MOE_DECODE_CASE(1, 4, 2, 4)
    FP4MOE_DECODE_CASE(1, 2, 2, 8)
    FP4MOE_DECODE_CASE(2, 1, 2, 4)
    FP4MOE_DECODE_CASE(2, 2, 2, 4)
    FP4MOE_DECODE_CASE(4, 1, 2, 4)
    FP4MOE_DECODE_CASE(4, 2, 2, 4)
    FP4MOE_DECODE_CASE(1, 2, 4, 2)
    FP4MOE_DECODE_CASE(1, 1, 4, 2)
    FP4MOE_DECODE_CASE(1, 4, 4, 2)
    FP4MOE_DECODE_CASE(1, 2, 4, 4)
    FP4MOE_DECODE_CASE(2, 2, 4, 2)
    FP4MOE_DECODE_CASE(1, 2, 4, 0)
    FP4MOE_DECODE_CASE(1, 4, 4, 0)
    FP4MOE_DECODE_CASE(1, 1, 8, 2)
    FP4MOE_DECODE_CASE(1, 2, 8, 2)
    FP4MOE_DECODE_CASE(1, 1, 8, 3)
    FP4MOE_DECODE_CASE_MT(1, 1, 4, 2, 2)
    FP4MOE_DECODE_CASE_MT(1, 2, 4, 2, 2)
    FP4MOE_DECODE_CASE_OCC(1, 2, 4, 2, 1, 6)
    FP4MOE_DECODE_CASE_OCC(1, 4, 4, 2, 1, 6)
    FP4MOE_DECODE_CASE_OCC(1, 1, 4, 2, 1, 6)
    FP4MOE_DECODE_CASE_W(1, 2, 4, 2, 1, 3, 8)
    FP4MOE_DECODE_CASE_W(1, 4, 4, 2, 1, 3, 8)
    FP4MOE_DECODE_CASE_W(1, 1, 4, 2, 1, 3, 8)
    FP4MOE_DECODE_CASE_W(1, 1, 4, 2, 2, 2, 8)
    FP4MOE_DECODE_CASE_NTS(1, 1, 4, 2, 2, 1, 4, 2)
    FP4MOE_DECODE_CASE_NTS(1, 1, 4, 2, 2, 5, 4, 2)
    FP4MOE_DECODE_CASE_NTS(1, 2, 4, 2, 2, 5, 4, 2)
    FP4MOE_DECODE_CASE_NTS(1, 2, 4, 2, 2, 1, 4, 2)
#undef FP4MOE_DECODE_CASE_NTS
#undef FP4MOE_DECODE_CASE_W
#undef FP4MOE_DECODE_CASE_OCC
#undef FP4MOE_DECODE_CASE_MT
#undef FP4MOE_DECODE_CASE
    return cudaErrorInvalidValue;
}

} // namespace

std::size_t moe_decode_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    return make_layout(hidden, inter, num_experts, slots, max_tokens).total;
}

bool moe_batch_valid(const decode_weights &w, const decode_batch &b) {
    if (b.hidden <= 0 || b.inter <= 0 || b.hidden % 16 || b.inter % 16 || b.num_experts <= 0 ||
        b.num_experts >= kMaxExperts || b.slots <= 0 || b.tokens < 0 || b.tokens > b.max_tokens || !b.workspace)
        return false;
    return w.tiles_gu == (b.inter + 7) / 8 && w.ksteps_gu == (b.hidden + 63) / 64 &&
           w.tiles_down == (b.hidden + 15) / 16 && w.ksteps_down == (b.inter + 63) / 64;
}

cudaError_t moe_decode_run(const decode_weights &w, const decode_batch &b, decode_tactic t, cudaStream_t stream) {
    if (!moe_batch_valid(w, b)) return cudaErrorInvalidValue;
    if (b.tokens == 0) return cudaSuccess;
    const layout l = make_layout(b.hidden, b.inter, b.num_experts, b.slots, b.max_tokens);
    auto *base = static_cast<std::uint8_t *>(b.workspace);
    auto *act = reinterpret_cast<std::uint16_t *>(base + l.act);
    float *partial = reinterpret_cast<float *>(base + l.partial);

    // Bounds for this batch (not the capacity): smaller grids at small T. An expert with c pairs makes
    // ceil(c / m) <= 1 + (c - 1) / m groups of m = 8 nt rows, so B busy experts make at most B + (pairs - B) / m,
    // which grows with B <= min(pairs, experts) (at T = 1: exactly the k + S groups, no grid row left idle).
    const long long pairs = static_cast<long long>(b.tokens) * b.slots;
    const long long busy = std::min<long long>(pairs, b.num_experts);
    const int max_groups = static_cast<int>(busy + (pairs - busy) / (8LL * t.nt));

    gemm_args g{};
    g.counts = b.counts, g.offsets = b.offsets, g.perm = b.perm, g.masked_pairs = b.masked_pairs;
    g.slots = b.slots, g.max_tokens = b.max_tokens, g.inter = b.inter, g.hidden = b.hidden, g.masked = b.masked;
    g.num_experts = b.num_experts, g.topk_weights = b.topk_weights;
    g.act = act, g.ld_act = l.k_pad_inter, g.partial = partial;
    g.counters = reinterpret_cast<int *>(base + l.counters), g.tokens = b.tokens, g.down_tiles = w.tiles_down;
    g.topk_ids = b.topk_ids, g.out = b.out, g.shared = b.shared;
    g.fused_combine = !t.combine_kernel;

    // gate_up: B = x rows, K = H.
    g.wq = w.gate_up_q, g.ws = w.gate_up_s;
    g.tiles = w.tiles_gu, g.ksteps = w.ksteps_gu;
    g.expert_q = static_cast<std::size_t>(w.tiles_gu) * w.ksteps_gu * 512;
    g.expert_s = static_cast<std::size_t>(w.tiles_gu) * w.ksteps_gu * 64;
    g.k_valid = b.hidden, g.b = b.x, g.ldb = b.hidden;
    g.gs0 = w.gs_gate, g.gs1 = w.gs_up;
    if (auto st = dispatch<true>(g, max_groups, t, stream); st != cudaSuccess) return st;

    // down: B = act rows, K = I (padded row stride).
    g.wq = w.down_q, g.ws = w.down_s;
    g.tiles = w.tiles_down, g.ksteps = w.ksteps_down;
    g.expert_q = static_cast<std::size_t>(w.tiles_down) * w.ksteps_down * 512;
    g.expert_s = static_cast<std::size_t>(w.tiles_down) * w.ksteps_down * 64;
    g.k_valid = b.inter, g.b = act, g.ldb = l.k_pad_inter;
    g.gs0 = w.gs_down, g.gs1 = nullptr;
    decode_tactic td = t;
    if (t.down_ksplit > 0) td.ksplit = t.down_ksplit;
    if (auto st = dispatch<false>(g, max_groups, td, stream); st != cudaSuccess) return st;

    if (t.combine_kernel) {
        constexpr int kThreads = 256;
        const dim3 grid(b.tokens, ceil_div(b.hidden, 4 * kThreads));
        if (auto st = launch_pdl(moe_combine_kernel, grid, dim3(kThreads), 0, 1, stream,
                                 static_cast<const float *>(partial), b.topk_ids, b.slots, b.hidden, b.out);
            st != cudaSuccess)
            return st;
    }

    return cudaGetLastError();
}

} // namespace fp4moe::cuda
