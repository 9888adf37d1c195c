// cuda.grouped kernels (moe_grouped.h has the pipeline; mma_pack.h the weight layout). Built for sm_90a only.
//
// Why this shape: with many tokens per expert the layer is bound by tensor-core rate, not bytes, and Hopper's
// rate needs wgmma (mma.sync peaks near a quarter of it: reference/kernels.md §7 b). Hopper has no FP4 math, so
// the weights are dequantized to bf16 in registers and fed as wgmma's register operand (A = 64 weight rows per
// warpgroup, exactly four of the packed 16-row tiles whose A fragments cuda.decode already uses), and the
// tokens are the shared-memory operand B (N = BN rows, TMA with 128-byte swizzle). A producer warp keeps a
// ring of K chunks in flight; a consumer warpgroup dequantizes chunk s while its wgmma of chunk s - 1 runs
// (64 weight rows per warpgroup, bn <= 128 and two warpgroups; the others wait for each step), and the
// warpgroups overlap each other. TMA cannot gather rows on sm_90, hence the gather kernel in front
// (moe_grouped_prep.cu). down's consumers hand their fp32 output tile to the producer warpgroup's three idle warps
// through shared memory, which add it to the tokens' fp32 sums (red.global.add: the weighted combine, without a pass
// over T x slots slot rows) while the consumers multiply the next tile.
#include "kernels/decode_device.cuh"
#include "kernels/grouped_layout.h"
#include "kernels/moe_grouped.h"
#include "kernels/moe_grouped_prep.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/sm90a/sm90.cuh"
#include "kernels/sm90a/wgmma.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <iterator>

namespace fp4moe::cuda {
namespace {

using namespace decode_device;
using namespace ptx;
using namespace sm90;

constexpr int kMaxExperts = 1024;
// A CTA has a producer warpgroup and CW consumer warpgroups: 2 after the producer (warps 0..3; its three idle
// warps store down's output tiles), or 3 to 5 before it (warps 4 CW .. 4 CW + 3; wgmma needs warpgroup-aligned
// warps). Four warpgroups of 64 weight rows (mt = 1) keep the 256 weight rows per token tile of two with mt = 2 and
// hide each one's depth-0 wait for its wgmma behind the other three; they have 112 registers each
// (glm-4.5-air T = 1024: 1037 -> 913 us; NOTES.md, thirteenth session). Three warpgroups fit bn = 192 (ptxas
// compiles a 512-thread CTA against its launch bound's 128 registers: 16 bytes of spills; setmaxnreg gives the
// consumers 160 at run time): an expert of up to 192 rows is one item whose weights are read and dequantized once,
// where at bn = 128 its full and its partial block each read and dequantize all of them (ncu at deepseek-v3
// T = 4096: the partial blocks ran at half the full ones' rate, their weights from HBM again; NOTES.md, fourteenth
// session). bn = 256 does not fit: m64n256 needs more than those 128 registers (C7602).
__host__ __device__ constexpr int cta_threads(int cw) {
    return 128 * (cw + 1);
}
// setmaxnreg moves registers within the CTA's allocation (the launch bound's cap, a multiple of 8, per thread): a
// warpgroup's increase waits forever for registers its CTA was never given. Producer / consumer registers:
__host__ __device__ constexpr int producer_regs(int cw) {
    return cw == 2 ? 40 : 32;
}
__host__ __device__ constexpr int consumer_regs(int cw) {
    return cw == 2 ? 232 : cw == 3 ? 160 : cw == 4 ? 112 : 88;
}
constexpr bool regs_fit(int cw) {
    return 128 * producer_regs(cw) + 128 * cw * consumer_regs(cw) <=
           cta_threads(cw) * (65536 / cta_threads(cw) / 8 * 8);
}
static_assert(regs_fit(2) && regs_fit(3) && regs_fit(4) && regs_fit(5), "setmaxnreg beyond the CTA's registers");
constexpr int kChunkBytesPerRow = 128;       // one 64-wide K chunk of bf16
constexpr int kBoxRows = 32;                 // token rows per TMA box of B for a partly filled block
constexpr int kPrefixInts = kMaxExperts + 4; // the m-block prefix, padded to keep what follows 16-byte aligned

// ---- the grouped GEMM -------------------------------------------------------------------------------------

struct gemm_args {
    const std::uint8_t *wq, *ws; // packed weights and scale codes, experts contiguous
    int tiles, ksteps;           // 16-row tiles and 64-wide K steps per expert
    const float *gs0, *gs1;      // global scales (gate_up: gate, up; down: down, unused)
    int *sched;                  // work items claimed past the first wave (zeroed by rows_kernel)
    const std::int32_t *counts, *rowbase;
    int num_experts;
    grouped_split split; // which of an expert's token blocks this launch multiplies (grouped_layout.h)
    // gate_up: act rows
    std::uint16_t *act;
    int k64_inter, inter;
    // down: each row's weighted output is added to its token's out_acc row
    const std::int32_t *pair_of_row;
    const float *topk_weights;
    float *out_acc; // gate_up: zeroed (acc_floats of it), down: added to
    long long acc_floats;
    int hidden, slots;
};

// Work item w -> m-block (expert e, its m-th block of BN rows) and n-tile (the CTA's weight rows), n fastest:
// CTAs running at once share token blocks (B from L2) and stream different weight rows.
struct work {
    int e, row0, rows, ntile;
};
__device__ __forceinline__ work find_work(const gemm_args &g, const int *mprefix, int w, int ntiles, int bn) {
    const int mb = w / ntiles;
    int lo = 0, hi = g.num_experts - 1; // last e with mprefix[e] <= mb
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (mprefix[mid] <= mb)
            lo = mid;
        else
            hi = mid - 1;
    }
    work r;
    r.e = lo, r.ntile = w % ntiles;
    grouped_block_rows(g.split, g.counts[lo], bn, mb - mprefix[lo], r.row0, r.rows);
    r.row0 += g.rowbase[lo];
    return r;
}

// Shared memory of one CTA: the B ring, its barriers, the m-block prefix, gate_up's staging tile (BN columns of
// the CTA's act features, each padded by 16 bytes so that the four column pairs a warp writes at once fall in
// different banks), down's token and scale per column, and, where it fits, down's fp32 output tile
// (BN columns of the CTA's 16 x tiles rows, padded by 4 floats: the consumers' scalar writes are conflict-free)
// with its two barriers.
template <bool GateUp, int BN, int MT, int CW>
struct cta_shape {
    static constexpr int tiles = 4 * CW * MT;  // 16-row weight tiles per CTA
    static constexpr int out_rows = 8 * tiles; // gate_up: act features per column
    static constexpr int col_bytes = GateUp ? 2 * out_rows + 16 : 0;
    static constexpr int stage_bytes = BN * kChunkBytesPerRow;
    static_assert(BN % kBoxRows == 0, "a stage is whole narrow boxes");
    static constexpr int epi_stride = 16 * tiles + 4; // down's output tile: floats per column
    // Whole 64-wide act chunks per CTA, or (three warpgroups: 96 features) half chunks stored in 8-byte units.
    static constexpr bool half_chunks = GateUp && out_rows % 64 != 0;
    static_assert(out_rows % 32 == 0, "a gate_up CTA writes whole half chunks");
    // n-tiles (CTAs' worth of weight rows) per m-block. gate_up's cover K64 of act, which down reads whole: a CTA
    // past the last weight tile writes zeros there (96-feature CTAs leave a half chunk past inter otherwise).
    __host__ __device__ static constexpr int ntiles(int weight_tiles, int k64_inter) {
        return GateUp ? (k64_inter + out_rows - 1) / out_rows : (weight_tiles + tiles - 1) / tiles;
    }
};
// Work items reach the CTA's warps through a small ring (ids, and a full and an empty barrier per slot) filled by
// the producer thread, which claims them from a global counter: dynamic scheduling, because items differ in cost
// (an expert's last block multiplies a narrower N), so a static round-robin leaves SMs idle at the end (measured:
// 1-2 % faster than the round-robin at T = 4096, less at 16384; NOTES.md g9).
constexpr int kItemSlots = 4;
template <bool GateUp, int BN, int ST, int MT, int CW>
constexpr int base_smem_bytes() {
    using C = cta_shape<GateUp, BN, MT, CW>;
    return 1024 /* alignment slack */ + ST * C::stage_bytes + 2 * ST * 8 + kItemSlots * (2 * 8 + 4) + 4 * kPrefixInts +
           BN * C::col_bytes + 8 * BN;
}
// down hands its output tile to the producer warpgroup's idle warps (which scale and store it while the consumers
// run the next tile) where the tile fits beside the ring: every tactic but bn = 256.
template <bool GateUp, int BN, int MT, int CW>
constexpr int handoff_bytes() { // the fp32 output tile and its two barriers
    return 4 * BN * cta_shape<GateUp, BN, MT, CW>::epi_stride + 16;
}
template <bool GateUp, int BN, int ST, int MT, int CW>
constexpr bool hands_off() {
    return !GateUp && base_smem_bytes<GateUp, BN, ST, MT, CW>() + handoff_bytes<GateUp, BN, MT, CW>() <= 227 * 1024;
}
template <bool GateUp, int BN, int ST, int MT, int CW>
constexpr int smem_bytes() {
    return base_smem_bytes<GateUp, BN, ST, MT, CW>() +
           (hands_off<GateUp, BN, ST, MT, CW>() ? handoff_bytes<GateUp, BN, MT, CW>() : 0);
}

template <int CW>
__device__ __forceinline__ void consumers_sync() { // the consumer warpgroups only (named barrier 1)
    asm volatile("bar.sync 1, %0;" ::"n"(128 * CW) : "memory");
}

// One persistent CTA: the producer (one thread issues the TMA copies of B) and CW consumer warpgroups (cta_threads).
// Consumer warpgroup c owns MT m64 blocks of weight rows: its warp w holds tiles (c MT + i) 4 + w.
template <bool GateUp, int BN, int ST, int MT, int CW>
__global__ void __launch_bounds__(cta_threads(CW), 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap b_map, const __grid_constant__ CUtensorMap b_map_narrow,
                        const gemm_args g) {
    using C = cta_shape<GateUp, BN, MT, CW>;
    extern __shared__ std::uint8_t smem_raw[];
    auto *ring =
        reinterpret_cast<std::uint8_t *>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
    auto *full = reinterpret_cast<std::uint64_t *>(ring + ST * C::stage_bytes);
    std::uint64_t *empty = full + ST;
    std::uint64_t *item_full = empty + ST, *item_empty = item_full + kItemSlots;
    int *item_ids = reinterpret_cast<int *>(item_empty + kItemSlots);
    int *mprefix = item_ids + kItemSlots; // m-blocks before expert e
    std::uint8_t *staging = reinterpret_cast<std::uint8_t *>(mprefix + kPrefixInts);
    int *col_token = reinterpret_cast<int *>(staging + BN * C::col_bytes);
    float *col_scale = reinterpret_cast<float *>(col_token + BN);
    constexpr bool kHandOff = hands_off<GateUp, BN, ST, MT, CW>();
    float *epi = col_scale + BN;                                                  // down's output tile
    auto *epi_full = reinterpret_cast<std::uint64_t *>(epi + BN * C::epi_stride); // written by the consumers
    std::uint64_t *epi_empty = epi_full + 1;                                      // stored by the storers
    constexpr int kStorers = 96;                                                  // the producer warpgroup's warps 1..3

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4 * CW);
        for (int s = 0; s < kItemSlots; ++s) // read by every consumer warp and the storer warps
            mbar_init(&item_full[s], 1), mbar_init(&item_empty[s], 4 * CW + (kHandOff ? kStorers / 32 : 0));
        if constexpr (kHandOff) mbar_init(epi_full, 128 * CW), mbar_init(epi_empty, kStorers);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&b_map)) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&b_map_narrow)) : "memory");
    }
    wait_for_previous_kernel(); // counts, rowbase and the B rows come from earlier kernels
    allow_next_kernel();
    if (warp == 0) { // m-block prefix over the experts: lane l sums experts 32 l .. 32 l + 31
        int local[32], sum = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int e = 32 * lane + j;
            local[j] = e < g.num_experts ? grouped_blocks(g.split, g.counts[e], BN) : 0;
        }
#pragma unroll
        for (int j = 0; j < 32; ++j) sum += local[j];
        int incl = sum;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
            if (lane >= d) incl += v;
        }
        int run = incl - sum;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int e = 32 * lane + j;
            if (e <= g.num_experts) mprefix[e] = run;
            run += local[j];
        }
    }
    __syncthreads();
    const int ntiles = C::ntiles(g.tiles, g.k64_inter);
    const int total = mprefix[g.num_experts] * ntiles;
    int islot = 0, iphase = 0;
    auto next_item = [&]() { // a reader warp's next work item; total once there are none
        mbar_wait(&item_full[islot], iphase);
        const int w = item_ids[islot];
        __syncwarp();
        if (lane == 0) mbar_arrive(&item_empty[islot]);
        if (++islot == kItemSlots) islot = 0, iphase ^= 1;
        return w;
    };

    // Producer warpgroup: one thread streams B chunks; where down hands off its output tiles, warps 1..3 store them
    // (the consumers only write a tile to shared memory and go on: the tensor cores idle through an epilogue, and
    // a build without the GEMMs' epilogues ran the layer 13-20 % faster at T >= 4096).
    constexpr int kProducerWarp = CW == 2 ? 0 : 4 * CW; // the consumers' warpgroups must be warpgroup-aligned
    const int cw = CW == 2 ? warp - 4 : warp;           // consumer warp 0 .. 4 CW - 1 (negative: producer)
    if (CW == 2 ? warp < 4 : warp >= kProducerWarp) {
        set_max_regs_dec<producer_regs(CW)>();
        if constexpr (kHandOff) {
            const int pwarp = warp - kProducerWarp; // the producer warpgroup's warp 0..3
            if (pwarp > 0) { // storers: down's output tiles, scaled by each column's router weight, added to out_acc
                const int sid = 32 * (pwarp - 1) + lane;
                int sphase = 0;
                for (;;) {
                    const int w = next_item();
                    if (w >= total) break;
                    const work wk = find_work(g, mprefix, w, ntiles, BN);
                    // the tile's (token, slot) pairs and scales, read while the consumers still multiply
                    for (int col = sid; col < wk.rows; col += kStorers) {
                        const int pair = g.pair_of_row[wk.row0 + col];
                        col_token[col] = pair / g.slots;
                        col_scale[col] = g.topk_weights[pair] * g.gs0[wk.e] * kPackedProductScale;
                    }
                    asm volatile("bar.sync 2, %0;" ::"n"(kStorers) : "memory");
                    const int h0 = wk.ntile * C::tiles * 16, vecs = min(C::tiles * 16, g.hidden - h0) / 4;
                    mbar_wait(epi_full, sphase);
#pragma unroll 1
                    for (int col = pwarp - 1; col < wk.rows; col += kStorers / 32) {
                        const float sc = col_scale[col];
                        const float *src = epi + col * C::epi_stride;
                        float *dst = g.out_acc + static_cast<std::size_t>(col_token[col]) * g.hidden + h0;
#pragma unroll 1
                        for (int x = lane; x < vecs; x += 32) {
                            float4 v = *reinterpret_cast<const float4 *>(src + 4 * x);
                            v.x *= sc, v.y *= sc, v.z *= sc, v.w *= sc;
                            atomicAdd(reinterpret_cast<float4 *>(dst + 4 * x), v); // red.global.add.v4.f32
                        }
                    }
                    mbar_arrive(epi_empty);
                    sphase ^= 1;
                    asm volatile("bar.sync 2, %0;" ::"n"(kStorers) : "memory"); // the column arrays are free again
                }
                return;
            }
        }
        if constexpr (GateUp) {
            // gate_up's three idle producer warps zero down's fp32 sums (T x H: 117 MB at deepseek-v3 T = 4096)
            // under this compute-bound GEMM rather than in the memory-bound gather; down adds to them only once
            // this grid has completed (its wait_for_previous_kernel).
            if (const int pwarp = warp - kProducerWarp; pwarp > 0) {
                auto *acc = reinterpret_cast<float4 *>(g.out_acc);
                const long long n4 = g.acc_floats / 4; // hidden % 16 == 0
                for (long long i = static_cast<long long>(blockIdx.x) * 96 + 32 * (pwarp - 1) + lane; i < n4;
                     i += static_cast<long long>(gridDim.x) * 96)
                    acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                return;
            }
        }
        if (warp != kProducerWarp || lane != 0) return;
        int stage = 0, phase = 0;
        for (int w = static_cast<int>(blockIdx.x);;) { // the first item is the CTA's own; the rest are claimed
            mbar_wait(&item_empty[islot], iphase ^ 1);
            item_ids[islot] = min(w, total);
            mbar_arrive(&item_full[islot]);
            if (++islot == kItemSlots) islot = 0, iphase ^= 1;
            if (w >= total) break;
            const int next = static_cast<int>(gridDim.x) + atomicAdd(g.sched, 1); // in flight over the copies
            const work wk = find_work(g, mprefix, w, ntiles, BN);
            // A block is one box of BN rows, except where an expert's partly filled last block (which multiplies a
            // narrower width) saves two or more 32-row boxes by loading only those that cover its rows: the rows
            // past it are L2 traffic for nothing (4-5 % of the layer at T = 1024), but a stage of several boxes
            // costs more than the one or two it saves (NOTES.md g14).
            const bool one_box = wk.rows > BN - 2 * kBoxRows;
            const int boxes = one_box ? 1 : (wk.rows + kBoxRows - 1) / kBoxRows;
            const int box_bytes = one_box ? C::stage_bytes : kBoxRows * kChunkBytesPerRow;
            for (int s = 0; s < g.ksteps; ++s) {
                mbar_wait(&empty[stage], phase ^ 1);
                mbar_expect_tx(&full[stage], boxes * box_bytes);
                if (one_box)
                    tma_load_2d(ring + stage * C::stage_bytes, &b_map, &full[stage], s * 64, wk.row0);
                else
                    for (int b = 0; b < boxes; ++b)
                        tma_load_2d(ring + stage * C::stage_bytes + b * box_bytes, &b_map_narrow, &full[stage], s * 64,
                                    wk.row0 + b * kBoxRows);
                if (++stage == ST) stage = 0, phase ^= 1;
            }
            w = next;
        }
        return;
    }

    set_max_regs_inc<consumer_regs(CW)>();
    const int ctid = 32 * cw + lane; // 0 .. 128 CW - 1
    const int c = cw / 4, wq = cw % 4;
    const int g8 = lane / 4, t4 = lane % 4;
    ring_cursor<ST> rc;
    float acc[MT][BN / 2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[m][i] = 0.0f;
    constexpr int P = 2; // K steps of weights in flight in registers (per tile)
    // Depth-1 wgmma pipelining needs two fragment buffers: with two m64 blocks per warpgroup (mt = 2) the
    // registers spill (bn = 64, with the narrow-width loop copies) or do not fit (bn = 128), and with bn = 256
    // ptxas serializes every wgmma for want of registers (C7512); those run at depth 0.
    // Three or four warpgroups (160 or 112 registers) run at depth 0: the others fill the tensor pipe through each
    // one's wait.
    constexpr bool kPipe = MT == 1 && BN <= 128 && CW == 2;
    // The narrow widths: every multiple of 8 (wgmma's N granularity) at depth 0; the depth-1 kernels keep 16 and the
    // multiples of 32, as more copies of their loop make ptxas serialize their wgmmas for want of registers (C7512).
    constexpr int kWidthStep = kPipe ? 32 : 8;

    for (int it = 0;; ++it) {
        const int w = next_item();
        if (w >= total) break;
        const work wk = find_work(g, mprefix, w, ntiles, BN);
        // down: this thread's output column's pair (its router weight is read once the pair has arrived)
        int my_pair = -1;
        if constexpr (!GateUp && !kHandOff)
            if (ctid < wk.rows) my_pair = g.pair_of_row[wk.row0 + ctid];
        float my_weight = 0.0f;

        int tile[MT];
        bool has_tile[MT];
        const std::uint8_t *qp[MT], *sp[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            tile[m] = wk.ntile * C::tiles + (c * MT + m) * 4 + wq;
            has_tile[m] = tile[m] < g.tiles;
            const std::size_t ti = static_cast<std::size_t>(wk.e) * g.tiles + (has_tile[m] ? tile[m] : 0);
            qp[m] = g.wq + ti * g.ksteps * 512 + lane * 16;
            sp[m] = g.ws + ti * g.ksteps * 64 + lane * 2;
        }
        uint4 qa[MT][P];
        std::uint32_t sa[MT][P];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int j = 0; j < P; ++j) {
                qa[m][j] = make_uint4(0, 0, 0, 0), sa[m][j] = 0;
                if (has_tile[m] && j < g.ksteps)
                    qa[m][j] = load_stream(qp[m] + j * 512), sa[m][j] = load_stream2(sp[m] + j * 64);
            }
        // One K step: dequantize step s into fragment buffer B, wait for its B chunk, issue MT x 4 wgmma. Pipelined
        // (depth 1): the previous step's wgmma may still run, it read the other buffer; once this step's are
        // issued, wait for the previous step's and release its chunk. The main loop runs whole pairs of steps
        // with no early exit, and the odd last step runs unpipelined after it: an early exit with a wgmma in
        // flight, or more than one conditional step after the loop, makes ptxas serialize every wgmma of the
        // kernel (C7513).
        std::uint32_t afrag[kPipe ? 2 : 1][MT][4][4];
        auto kstep = [&]<int J, int B, bool Pipelined, int NB>(const int s) __attribute__((always_inline)) {
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                const std::uint32_t sc_lo = scale_code_to_bf16x2<0>(sa[m][J]);
                const std::uint32_t sc_hi = scale_code_to_bf16x2<1>(sa[m][J]);
                const std::uint32_t words[4] = {qa[m][J].x, qa[m][J].y, qa[m][J].z, qa[m][J].w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    afrag[B][m][q][0] = hmul2(e2m1x2_to_bf16x2<0>(words[q]), sc_lo);
                    afrag[B][m][q][1] = hmul2(e2m1x2_to_bf16x2<1>(words[q]), sc_hi);
                    afrag[B][m][q][2] = hmul2(e2m1x2_to_bf16x2<2>(words[q]), sc_lo);
                    afrag[B][m][q][3] = hmul2(e2m1x2_to_bf16x2<3>(words[q]), sc_hi);
                }
                if (has_tile[m] && s + P < g.ksteps)
                    qa[m][J] = load_stream(qp[m] + (s + P) * 512), sa[m][J] = load_stream2(sp[m] + (s + P) * 64);
            }
            if constexpr (!GateUp && !kHandOff)
                if (s == 0 && my_pair >= 0) my_weight = g.topk_weights[my_pair];
            mbar_wait(&full[rc.stage], rc.phase);
            const std::uint64_t desc = wgmma::desc_k_major_sw128(smem_addr(ring + rc.stage * C::stage_bytes));
            wgmma::fence();
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int m = 0; m < MT; ++m)
                    wgmma::mma_rs<NB>(reinterpret_cast<float(&)[NB / 2]>(acc[m]), afrag[B][m][q], desc + 2 * q,
                                      s > 0 || q > 0);
            wgmma::commit();
            rc.template release<Pipelined>(empty, lane);
        };
        static_assert(P == 2, "the loop below runs pairs of steps");
        // The K loop for wgmma width NB: BN for full token blocks; an expert's last block, when partly filled,
        // multiplies only the narrowest wgmma width that covers its rows (multiples of 8 up to BN, each a compiled
        // copy of the loop: composing a width from two wgmmas serializes them, C7511), so padding columns cost
        // little tensor-core time: at T = 4096 an expert of deepseek-v3 holds ~100-170 rows, and widths in steps of
        // 32 still multiplied 6-8 % padding columns over the layer (NOTES.md g10, g13).
        auto kloop = [&]<int NB>() __attribute__((always_inline)) {
            int s0 = 0;
            for (; s0 + 2 <= g.ksteps; s0 += 2) {
                kstep.template operator()<0, 0, kPipe, NB>(s0);
                kstep.template operator()<1, kPipe ? 1 : 0, kPipe, NB>(s0 + 1);
            }
            if constexpr (kPipe) rc.drain(empty, lane);
            if (s0 < g.ksteps) kstep.template operator()<0, 0, false, NB>(s0);
        };
        auto by_width = [&]<int W>(auto &self) __attribute__((always_inline)) {
            if constexpr (W >= BN)
                kloop.template operator()<BN>();
            else if (wk.rows <= W)
                kloop.template operator()<W>();
            else
                self.template operator()<W == 16 && kPipe ? 32 : W + kWidthStep>(self);
        };
        // A warpgroup whose weight rows all lie past the expert's last tile only passes the ring's stages on (its
        // epilogue writes zeros or nothing, but down's columns still need its threads' router weights): gate_up's
        // last n-tile of three warpgroups, where deepseek-v3's 256 tiles make 21 1/3 CTAs of 12, had two of three
        // warpgroups multiplying zero weights.
        if (wk.ntile * C::tiles + c * MT * 4 >= g.tiles) {
            if constexpr (!GateUp && !kHandOff)
                if (my_pair >= 0) my_weight = g.topk_weights[my_pair];
            for (int s = 0; s < g.ksteps; ++s) {
                mbar_wait(&full[rc.stage], rc.phase);
                rc.template release<false>(empty, lane);
            }
        } else {
            by_width.template operator()<kPipe ? 16 : 8>(by_width);
        }
#pragma unroll
        for (int m = 0; m < MT; ++m) wgmma::fence_operands(acc[m]);

        if constexpr (kHandOff) { // down: the tile goes to shared memory once the storers are done with the last
            const int epi_phase = it & 1;
            mbar_wait(epi_empty, epi_phase ^ 1);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                const int lt = (c * MT + m) * 4 + wq;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int h = 0; h < 2; ++h)
                            epi[(8 * j + 2 * t4 + i) * C::epi_stride + 16 * lt + g8 + 8 * h] =
                                acc[m][4 * j + 2 * h + i];
            }
            mbar_arrive(epi_full);
            continue;
        }
        // Epilogue. gate_up stages its act values column by column in shared memory (they go to permuted
        // positions), then stores each column's contiguous segment with 16-byte writes; down stores fp32 rows.
        consumers_sync<CW>(); // the previous tile's epilogue is done with the staging tile and the column arrays
        if constexpr (!GateUp) {
            if (ctid < BN)
                col_token[ctid] = my_pair / g.slots, col_scale[ctid] = my_weight * g.gs0[wk.e] * kPackedProductScale;
            consumers_sync<CW>();
        }
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            const int lt = (c * MT + m) * 4 + wq; // tile within the CTA
            if constexpr (GateUp) {
                // rows g8 (gate) and g8 + 8 (up) of feature 8 tile + g8, at its position in the permuted K order.
                // A warp past the last tile writes zeros: down reads all of K64, and 0 x NaN would be NaN.
                const int f = 8 * tile[m] + g8, fl = 8 * lt + g8, fc = fl % 64;
                const int pos =
                    C::half_chunks ? grouped_half_chunk_staging(fl, f) : (fl / 64) * 64 + grouped_k_position(fc);
                const float sg = g.gs0[wk.e] * kPackedProductScale, su = g.gs1[wk.e] * kPackedProductScale;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        const int col = 8 * j + 2 * t4 + i;
                        const std::uint16_t v = has_tile[m] && f < g.inter
                                                    ? silu_mul_bf16(acc[m][4 * j + i] * sg, acc[m][4 * j + 2 + i] * su)
                                                    : std::uint16_t{0};
                        *reinterpret_cast<std::uint16_t *>(staging + col * C::col_bytes + 2 * pos) = v;
                    }
            } else {
                // added to the tokens' fp32 out_acc rows (unrounded, as cuda.decode sums its slot rows). Lanes 4 g + t
                // add to rows g8 .. g8 + 7 of four columns: each instruction touches four whole 32-byte sectors.
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        const int col = 8 * j + 2 * t4 + i;
                        if (col >= wk.rows || !has_tile[m]) continue;
                        float *dst = g.out_acc + static_cast<std::size_t>(col_token[col]) * g.hidden;
                        const float sc = col_scale[col];
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = 16 * tile[m] + g8 + 8 * h;
                            if (r < g.hidden) atomicAdd(dst + r, acc[m][4 * j + 2 * h + i] * sc);
                        }
                    }
            }
        }
        if constexpr (GateUp && C::half_chunks) { // copy-out: 8-byte units of each valid column's half chunks
            consumers_sync<CW>();
            const int h0 = wk.ntile * C::out_rows / 32;                         // first half chunk of this CTA
            const int units = 8 * min(C::out_rows / 32, g.k64_inter / 32 - h0); // units of K64 it holds
            for (int v = ctid; v < wk.rows * units; v += 128 * CW) {
                const int col = v / units, u = v % units;
                const uint2 d = *reinterpret_cast<const uint2 *>(staging + col * C::col_bytes + 8 * u);
                *reinterpret_cast<uint2 *>(g.act + static_cast<std::size_t>(wk.row0 + col) * g.k64_inter +
                                           grouped_half_chunk_slot(h0 + u / 8, u % 8)) = d;
            }
        } else if constexpr (GateUp) { // copy-out: 16-byte vectors of each valid column's act segment
            consumers_sync<CW>();
            const int seg0 = wk.ntile * C::out_rows;                   // first act column of this CTA
            const int vecs = min(C::out_rows, g.k64_inter - seg0) / 8; // k64_inter and seg0 are multiples of 64
            for (int v = ctid; v < wk.rows * vecs; v += 128 * CW) {
                const int col = v / vecs, x = v % vecs;
                const uint4 d = *reinterpret_cast<const uint4 *>(staging + col * C::col_bytes + 16 * x);
                *reinterpret_cast<uint4 *>(g.act + static_cast<std::size_t>(wk.row0 + col) * g.k64_inter + seg0 +
                                           8 * x) = d;
            }
        }
    }
}

// ---- host -------------------------------------------------------------------------------------------------

template <bool GateUp, int BN, int ST, int MT, int CW>
cudaError_t launch_gemm(const CUtensorMap &map, const CUtensorMap &map_narrow, const gemm_args &g, long long mblocks,
                        cudaStream_t stream) {
    constexpr int smem = smem_bytes<GateUp, BN, ST, MT, CW>();
    static_assert(smem <= 227 * 1024, "shared memory of a grouped tactic");
    static const cudaError_t set = cudaFuncSetAttribute(grouped_gemm_kernel<GateUp, BN, ST, MT, CW>,
                                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (set != cudaSuccess) return set;
    const long long work = mblocks * cta_shape<GateUp, BN, MT, CW>::ntiles(g.tiles, g.k64_inter);
    const int grid = static_cast<int>(std::max<long long>(1, std::min<long long>(current_sm_count(), work)));
    return launch_pdl(grouped_gemm_kernel<GateUp, BN, ST, MT, CW>, dim3(grid), dim3(cta_threads(CW)), smem, 1, stream,
                      map, map_narrow, g);
}

template <bool GateUp>
cudaError_t dispatch(const CUtensorMap &map, const CUtensorMap &map_narrow, const gemm_args &g, long long mblocks,
                     grouped_gemm_tactic t, cudaStream_t stream) {
#define FP4MOE_GROUPED_CASE(BN_, ST_, MT_, CW_)                                                                        \
    if (t.bn == BN_ && t.stages == ST_ && t.mt == MT_ && t.wg == CW_)                                                  \
        return launch_gemm<GateUp, BN_, ST_, MT_, CW_>(map, map_narrow, g, mblocks, stream);
    FP4MOE_GROUPED_CASE(128, 5, 1, 2)
    FP4MOE_GROUPED_CASE(256, 4, 1, 2)
    FP4MOE_GROUPED_CASE(64, 6, 1, 2)
    FP4MOE_GROUPED_CASE(128, 4, 2, 2)
    FP4MOE_GROUPED_CASE(128, 5, 2, 2)
    FP4MOE_GROUPED_CASE(64, 6, 2, 2)
    // Three or four warpgroups only for gate_up: down's own epilogue spills at four's 112 registers, and down at
    // bn = 160 or 192 with three (its hand-off beside 4 or 3 ring stages) was 1-2 % slower than its 256 weight rows
    // at deepseek-v3 T = 4096 (NOTES.md, fourteenth session).
    if constexpr (GateUp) {
        FP4MOE_GROUPED_CASE(128, 6, 1, 4)
        FP4MOE_GROUPED_CASE(128, 10, 1, 4)
        FP4MOE_GROUPED_CASE(192, 6, 1, 3)
        FP4MOE_GROUPED_CASE(192, 7, 1, 3)
        FP4MOE_GROUPED_CASE(64, 6, 1, 4)
        FP4MOE_GROUPED_CASE(64, 6, 1, 5)
    }
#undef FP4MOE_GROUPED_CASE
    return cudaErrorInvalidValue;
}

} // namespace

const grouped_tactic kGroupedTactics[] = {
    {{128, 5, 1}, {128, 5, 1}},
    {{256, 4, 1}, {256, 4, 1}},
    {{64, 6, 1}, {64, 6, 1}},
    {{128, 4, 2}, {128, 4, 2}},
    {{64, 6, 2}, {64, 6, 2}},
    {{256, 4, 1}, {128, 4, 2}},
    {{128, 6, 1, 4}, {128, 4, 2}},
    {{128, 10, 1, 4}, {128, 4, 2}},
    {{192, 6, 1, 3}, {128, 4, 2}},
    // A seventh ring stage for gate_up at three warpgroups, a fifth for down (216 KB with its hand-off tile): within
    // the noise at deepseek-v3 T = 4096 in same-call runs, `auto` picks them at glm-4.5-air T = 4096 and at T = 16384
    // (NOTES.md, sixteenth session).
    {{192, 7, 1, 3}, {128, 4, 2}},
    {{192, 6, 1, 3}, {128, 5, 2}},
    {{192, 7, 1, 3}, {128, 5, 2}},
    // An expert's last, partly filled block of at most 64 (or 128) rows in a launch of its own, whose CTAs have four
    // or five consumer warpgroups: such a block's few MACs per weight leave its steps bound by the dequantization's
    // issue (ncu of the launch: math-pipe throttle and not-selected stalls), which more warps share.
    {{192, 6, 1, 3}, {128, 4, 2}, {64, 6, 1, 4}},
    {{192, 6, 1, 3}, {128, 4, 2}, {64, 6, 1, 5}},
    {{192, 6, 1, 3}, {128, 4, 2}, {128, 6, 1, 4}},
};
const int kGroupedTacticCount = static_cast<int>(std::size(kGroupedTactics));

std::size_t moe_grouped_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    return make_grouped_layout(hidden, inter, num_experts, slots, max_tokens).total;
}

bool moe_grouped_supported() {
    return sm90::device_supported();
}

cudaError_t moe_grouped_run(const decode_weights &w, const decode_batch &b, grouped_tactic t, cudaStream_t stream) {
    if (!moe_batch_valid(w, b)) return cudaErrorInvalidValue;
    if (std::find(std::begin(kGroupedTactics), std::end(kGroupedTactics), t) == std::end(kGroupedTactics))
        return cudaErrorInvalidValue;
    if (b.tokens == 0) return cudaSuccess;
    const grouped_layout l = make_grouped_layout(b.hidden, b.inter, b.num_experts, b.slots, b.max_tokens);
    const grouped_buffers ws = grouped_carve(b.workspace, l);
    const int rows = b.tokens * b.slots; // rows in use are at most this

    CUtensorMap map_x, map_act, map_x_narrow, map_act_narrow;
    if (auto e = sm90::make_k_major_map(map_x, ws.xp, l.rows, l.k64_hidden, t.gate_up.bn); e != cudaSuccess) return e;
    if (auto e = sm90::make_k_major_map(map_act, ws.act, l.rows, l.k64_inter, t.down.bn); e != cudaSuccess) return e;
    if (auto e = sm90::make_k_major_map(map_x_narrow, ws.xp, l.rows, l.k64_hidden, kBoxRows); e != cudaSuccess)
        return e;
    if (auto e = sm90::make_k_major_map(map_act_narrow, ws.act, l.rows, l.k64_inter, kBoxRows); e != cudaSuccess)
        return e;

    if (auto e = grouped_prepare(b, l, ws, stream); e != cudaSuccess) return e;
    // Work bound: sum over experts of ceil(count / bn) <= rows / bn + busy experts.
    const long long busy = std::min<long long>(rows, b.num_experts);
    auto mblocks = [&](const grouped_gemm_tactic &k) { return rows / k.bn + busy; };
    gemm_args g{};
    g.counts = b.counts, g.rowbase = ws.rowbase, g.num_experts = b.num_experts;
    g.split = {grouped_part_all, t.gate_up.bn, t.tail.bn};
    g.act = ws.act, g.k64_inter = l.k64_inter, g.inter = b.inter;
    g.pair_of_row = ws.pair_of_row, g.topk_weights = b.topk_weights, g.hidden = b.hidden;
    g.out_acc = ws.out_acc, g.slots = b.slots;
    g.acc_floats = static_cast<long long>(b.tokens) * b.hidden; // zeroed by gate_up

    g.wq = w.gate_up_q, g.ws = w.gate_up_s, g.tiles = w.tiles_gu, g.ksteps = w.ksteps_gu;
    g.gs0 = w.gs_gate, g.gs1 = w.gs_up;
    if (t.tail.bn) { // the narrow tails first: their items are short, so the SMs idle little at their launch's end
        CUtensorMap map_tail;
        if (auto e = sm90::make_k_major_map(map_tail, ws.xp, l.rows, l.k64_hidden, t.tail.bn); e != cudaSuccess)
            return e;
        gemm_args tg = g;
        tg.split.part = grouped_part_tail, tg.sched = ws.sched + 2, tg.acc_floats = 0;
        if (auto e = dispatch<true>(map_tail, map_x_narrow, tg, busy, t.tail, stream); e != cudaSuccess) return e;
        g.split.part = grouped_part_wide;
    }
    g.sched = ws.sched;
    if (auto e = dispatch<true>(map_x, map_x_narrow, g, mblocks(t.gate_up), t.gate_up, stream); e != cudaSuccess)
        return e;

    g.split.part = grouped_part_all;
    g.wq = w.down_q, g.ws = w.down_s, g.tiles = w.tiles_down, g.ksteps = w.ksteps_down;
    g.gs0 = w.gs_down, g.gs1 = nullptr, g.sched = ws.sched + 1, g.acc_floats = 0;
    if (auto e = dispatch<false>(map_act, map_act_narrow, g, mblocks(t.down), t.down, stream); e != cudaSuccess)
        return e;
    return grouped_combine(b, ws, stream);
}

} // namespace fp4moe::cuda
