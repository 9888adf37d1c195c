// Persistent cuda.decode kernel: gate_up and down of a whole batch in one launch (see moe_persist.h for why,
// mma_pack.h for the weight layout, decode_device.cuh for the K step).
//
// Work items, in claim order: gate_up items (group gi, 16-row gate/up tile), then down items (group gi, 16-row
// down tile). A group is `NT` 8-token tiles of one expert's rows; groups are numbered expert by expert. Every
// item runs over its whole K. Each warp owns a ring of S stages; a stage holds U K steps of the item's packed
// weights and scale codes plus the matching columns of its (up to R) activation rows, all brought by bulk
// copies completing on the stage's mbarrier (two arrivals: weights, activation rows). The warp issues the
// copies of the item after the current one while it multiplies the current one, so the ring never drains
// between items.
#include "kernels/decode_device.cuh"
#include "kernels/moe_persist.h"
#include "kernels/pdl.cuh"

#include <cuda_bf16.h>

namespace fp4moe::cuda {
namespace {

using namespace decode_device;

constexpr int kWarps = 4; // warps per CTA
constexpr int kMaxExperts = 1024;

struct persist_args {
    decode_weights w;
    int hidden, inter, slots, num_experts, tokens, max_tokens;
    bool masked;
    const std::uint16_t *x;
    std::uint16_t *out;
    const std::int32_t *topk_ids, *counts, *offsets, *perm, *masked_pairs;
    const float *topk_weights;
    persist_scratch s;
};

// Stage layout: U x 512 bytes of packed weights, U x 64 of scale codes, then the group's R activation rows of
// U x 64 bf16, each padded by 16 bytes so the rows' 16-byte reads by the 8 row groups of a warp fall on different
// banks. R (rows per group) is a tactic: small groups leave more shared memory to weights in flight.
template <int R, int U>
struct stage_shape {
    static constexpr int q = 0, codes = U * 512, rows = U * 576;
    static constexpr int row_bytes = U * 128 + 16;
    static constexpr int bytes = rows + R * row_bytes;
};
// Dynamic shared memory: the warps' rings and barriers, then the per-expert tables (group prefix, counts, offsets).
template <int R, int U, int S>
__host__ __device__ constexpr int persist_smem_bytes(int num_experts) {
    return kWarps * S * (stage_shape<R, U>::bytes + 8) + 4 * (3 * num_experts + 1);
}

// One claimed work item as every lane of the warp sees it; `pair` is this lane's row (lane r < R holds row r of
// the group, -1 past the expert's count). Loads are issued when the item is claimed and their values used
// later (pair when its rows are copied, done_seen when it is resolved), so their latency hides behind work.
struct item {
    bool valid = false, down = false, resolved = false, ready = true;
    int gi = 0, e = 0, tile = 0, rows = 0, ksteps = 0, k_valid = 0;
    int deferred = 0; // chunks issued before the activation rows could be (down items)
    const std::uint8_t *q = nullptr, *sc = nullptr;
    int pair = -1;
    float weight = 0.0f;
    int done_seen = 0; // the group's gate_up items done, read when claimed (down items)
};

// A counter another SM bumps: relaxed reads to poll (an acquire load also invalidates the SM's L1 each time), one
// acquire fence once the wanted value is seen.
__device__ __forceinline__ int load_relaxed(const int *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
// After seeing a group's gate_up done: its act rows (written by other SMs) are visible to us, and to the bulk
// copies (async proxy) we issue next.
__device__ __forceinline__ void fence_acquire_rows() {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

// Per CTA, once: counts and offsets into shared memory and the groups before each expert (a block scan).
__device__ void group_prefix(const persist_args &g, int rows_per_group, int *s_gp, int *s_cnt, int *s_off) {
    __shared__ int warp_sum[kWarps];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, ne = g.num_experts;
    for (int e = tid; e < ne; e += kWarps * 32) s_cnt[e] = g.counts[e], s_off[e] = g.offsets[e];
    __syncthreads();
    const int per = (ne + kWarps * 32 - 1) / (kWarps * 32), first = tid * per;
    int mine = 0;
    for (int i = 0; i < per && first + i < ne; ++i) mine += (s_cnt[first + i] + rows_per_group - 1) / rows_per_group;
    int inc = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int o = __shfl_up_sync(0xFFFFFFFFu, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == 31) warp_sum[warp] = inc;
    __syncthreads();
    int base = inc - mine;
    for (int w = 0; w < warp; ++w) base += warp_sum[w];
    for (int i = 0; i < per && first + i < ne; ++i) {
        s_gp[first + i] = base;
        base += (s_cnt[first + i] + rows_per_group - 1) / rows_per_group;
    }
    if (tid == kWarps * 32 - 1) s_gp[ne] = base; // the last thread's running sum is the total
    __syncthreads();
}

template <int R, int U, int S>
__global__ void __launch_bounds__(kWarps * 32, 5) moe_persist_kernel(const persist_args g) {
    constexpr int NT = (R + 7) / 8; // 8-token mma tiles per group
    using shape = stage_shape<R, U>;
    extern __shared__ __align__(128) std::uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lg = lane / 4, lt = lane % 4;
    std::uint8_t *ring = smem + warp * S * shape::bytes;
    auto *bars = reinterpret_cast<std::uint64_t *>(smem + kWarps * S * shape::bytes) + warp * S;
    int *s_gp = reinterpret_cast<int *>(smem + kWarps * S * (shape::bytes + 8));
    int *s_cnt = s_gp + g.num_experts + 1, *s_off = s_cnt + g.num_experts;

    allow_next_kernel();
    if (lane == 0)
        for (int st = 0; st < S; ++st) mbar_init(&bars[st], 2);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    wait_for_previous_kernel();

    // A token that routing refused (ids -1: non-finite logits) has no pairs: it gets NaN outputs, never stale data.
    for (int t = blockIdx.x; t < g.tokens; t += gridDim.x)
        if (g.topk_ids[static_cast<std::size_t>(t) * g.slots] < 0)
            for (int h = threadIdx.x; h < g.hidden; h += blockDim.x)
                g.out[static_cast<std::size_t>(t) * g.hidden + h] = 0x7FC0;

    group_prefix(g, R, s_gp, s_cnt, s_off);
    const int ne = g.num_experts, groups = s_gp[ne];
    const int items_gu = groups * g.w.tiles_gu, items = items_gu + groups * g.w.tiles_down;
    const int W = gridDim.x * kWarps, wid = blockIdx.x * kWarps + warp;
    int *claim = g.s.sync, *done = g.s.sync + kPersistSyncHeader;
    // Gate_up items below the warp count are owned statically (they never wait); every other item is claimed.
    const int static_items = min(W, items_gu);
    auto claim_next = [&]() {
        int v = 0;
        if (lane == 0) v = atomicAdd(claim, 1);
        return v; // lane 0's value; the caller broadcasts it when it needs it
    };

    auto decode = [&](int id) {
        item it;
        if (id >= items) return it;
        it.valid = true;
        it.down = id >= items_gu;
        const int tiles = it.down ? g.w.tiles_down : g.w.tiles_gu;
        const int local = it.down ? id - items_gu : id;
        it.gi = local / tiles, it.tile = local - it.gi * tiles;
        int lo = 0, hi = ne - 1; // the expert: the last e with s_gp[e] <= gi (experts without rows add nothing)
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (s_gp[mid] <= it.gi)
                lo = mid;
            else
                hi = mid - 1;
        }
        it.e = lo;
        const int row0 = (it.gi - s_gp[lo]) * R, count = s_cnt[lo];
        it.rows = min(R, count - row0);
        const std::size_t e = static_cast<std::size_t>(lo);
        if (it.down) {
            it.ksteps = g.w.ksteps_down, it.k_valid = g.inter;
            it.q = g.w.down_q + (e * g.w.tiles_down + it.tile) * g.w.ksteps_down * 512;
            it.sc = g.w.down_s + (e * g.w.tiles_down + it.tile) * g.w.ksteps_down * 64;
        } else {
            it.ksteps = g.w.ksteps_gu, it.k_valid = g.hidden;
            it.q = g.w.gate_up_q + (e * g.w.tiles_gu + it.tile) * g.w.ksteps_gu * 512;
            it.sc = g.w.gate_up_s + (e * g.w.tiles_gu + it.tile) * g.w.ksteps_gu * 64;
        }
        if (lane < it.rows) {
            const int rr = row0 + lane;
            it.pair = g.masked ? g.masked_pairs[e * g.max_tokens + rr] : g.perm[s_off[lo] + rr];
        }
        if (it.down) it.done_seen = load_relaxed(done + it.gi); // consumed later: the load's latency hides
        return it;
    };

    // The ring: chunk c (c-th issued by this warp) sits in stage c % S, phase parity (c / S) & 1.
    int issued = 0, consumed = 0;
    auto issue_rows = [&](const item &it, int k, int n, int stage) {
        const int bytes = max(0, min(n * 64, it.k_valid - k * 64)) * 2;
        if (lane == 0) mbar_expect_tx(&bars[stage], static_cast<std::uint32_t>(bytes * it.rows));
        __syncwarp();
        if (bytes > 0 && lane < it.rows) {
            // gate_up: the token's x row; down: the group's act row (written by this launch's gate_up items).
            const std::uint16_t *src = it.down ? g.s.act + (static_cast<std::size_t>(it.gi) * R + lane) * g.s.ld_act
                                               : g.x + static_cast<std::size_t>(it.pair / g.slots) * g.hidden;
            bulk_copy(ring + stage * shape::bytes + shape::rows + lane * shape::row_bytes, src + k * 64,
                      static_cast<std::uint32_t>(bytes), &bars[stage]);
        }
    };
    auto issue = [&](item &it, int k) {
        const int n = min(U, it.ksteps - k), stage = issued % S;
        if (lane == 0) {
            fence_async_shared(); // our reads of the stage's last contents come first
            mbar_expect_tx(&bars[stage], static_cast<std::uint32_t>(n * 576));
            bulk_copy(ring + stage * shape::bytes + shape::q, it.q + static_cast<std::size_t>(k) * 512, n * 512,
                      &bars[stage]);
            bulk_copy(ring + stage * shape::bytes + shape::codes, it.sc + static_cast<std::size_t>(k) * 64, n * 64,
                      &bars[stage]);
        }
        if (it.ready)
            issue_rows(it, k, n, stage);
        else
            ++it.deferred;
        ++issued;
    };

    const int first = wid < static_items ? wid : -1;
    int pending = claim_next();
    item cur = decode(first >= 0 ? first : static_items + __shfl_sync(0xFFFFFFFFu, pending, 0));
    if (first < 0) pending = claim_next();
    item nxt;
    bool nxt_decoded = false;
    auto ensure_next = [&]() {
        if (nxt_decoded) return;
        nxt = decode(static_items + __shfl_sync(0xFFFFFFFFu, pending, 0));
        pending = claim_next(), nxt_decoded = true;
    };
    auto resolve = [&](item &it) {
        if (it.resolved) return;
        it.ready = !it.down || __shfl_sync(0xFFFFFFFFu, it.done_seen, 0) >= g.w.tiles_gu;
        if (it.down && it.ready) fence_acquire_rows();
        it.resolved = true;
    };
    int p_k = 0;            // next K step the producer issues (of cur while p_on_next is false, else of nxt)
    bool p_on_next = false; // the producer has issued all of cur

    auto produce = [&]() {
        while (issued - consumed < S) {
            if (!p_on_next) {
                if (p_k < cur.ksteps) {
                    issue(cur, p_k), p_k += U;
                    continue;
                }
                ensure_next();
                resolve(nxt);
                p_on_next = true, p_k = 0;
            }
            if (!nxt.valid || p_k >= nxt.ksteps) break;
            issue(nxt, p_k), p_k += U;
        }
    };

    // An item's completion is published (fence, then the counter; for down items the combine) two chunks into
    // the next item: the fence then finds the epilogue's stores long done instead of stalling the warp, whose
    // ring is full of the next item's bytes. Flushed before any wait, so no warp waits on a signal it holds.
    int sig_gi = -1, cmb_tok = -1, cmb_tile = -1, age = 0;
    bool cmb = false;
    auto flush = [&]() {
        if (sig_gi >= 0) {
            __threadfence();
            __syncwarp();
            if (lane == 0) atomicAdd(done + sig_gi, 1); // after every lane's rows are visible
            sig_gi = -1;
        }
        if (cmb) {
            combine_tile(cmb_tok, cmb_tile, g.w.tiles_down, g.slots, g.hidden, g.s.counters, g.s.partial, g.out);
            cmb = false;
        }
    };

    // One K step from the ring: the lane's packed word and scale codes, and its B fragments. Rows past R (R < 8)
    // re-read a real row: those token columns are never stored, so any finite or not value there is harmless.
    constexpr int kChains = 4 / NT;
    float chain[NT][kChains][4];
    const int q_off = shape::q + lane * 16, c_off = shape::codes + lane * 2;
    const int b_off = shape::rows + (R >= 8 ? lg : lg % R) * shape::row_bytes + lt * 32;
    auto kstep = [&](const std::uint8_t *buf, int u) {
        const uint4 qv = *reinterpret_cast<const uint4 *>(buf + q_off + u * 512);
        const std::uint32_t codes = *reinterpret_cast<const unsigned short *>(buf + c_off + u * 64);
        uint4 b[NT][2];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const std::uint8_t *row = buf + b_off + n * 8 * shape::row_bytes + u * 128;
            b[n][0] = *reinterpret_cast<const uint4 *>(row);
            b[n][1] = *reinterpret_cast<const uint4 *>(row + 16);
        }
        mma_kstep<NT, kChains>(chain, qv, codes, b);
    };

    while (cur.valid) {
        resolve(cur);
        if (!cur.ready) {
            flush();
            // A down item whose gate_up rows were not done when it was claimed: its weights are on their way;
            // wait for the group's gate_up items, then bring the rows of the chunks already issued.
            while (true) {
                int v = lane == 0 ? load_relaxed(done + cur.gi) : 0;
                v = __shfl_sync(0xFFFFFFFFu, v, 0);
                if (v >= g.w.tiles_gu) break;
                __nanosleep(64);
            }
            fence_acquire_rows();
            cur.ready = true;
            for (int j = 0; j < cur.deferred; ++j) {
                const int k = j * U;
                issue_rows(cur, k, min(U, cur.ksteps - k), (consumed + j) % S);
            }
            cur.deferred = 0;
        }
        produce();
        ensure_next(); // claim and look up the next item now: its loads complete while this one streams
        if (cur.down && lane < cur.rows) cur.weight = g.topk_weights[cur.pair]; // used by the epilogue

#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < kChains; ++c) chain[n][c][0] = chain[n][c][1] = chain[n][c][2] = chain[n][c][3] = 0.0f;
        for (int k0 = 0; k0 < cur.ksteps; k0 += U) {
            const int stage = consumed % S, n = min(U, cur.ksteps - k0);
            mbar_wait(&bars[stage], static_cast<std::uint32_t>((consumed / S) & 1));
            std::uint8_t *buf = ring + stage * shape::bytes;
            if (k0 + n == cur.ksteps && cur.k_valid < cur.ksteps * 64) {
                // K past the data (K % 64 != 0): weights there are 0, so the rows must be finite: zero them.
                const int from = (cur.k_valid - k0 * 64) / 8, pieces = n * 8 - from; // 16-byte pieces per row
                for (int i = lane; i < R * pieces; i += 32)
                    *reinterpret_cast<uint4 *>(buf + shape::rows + (i / pieces) * shape::row_bytes +
                                               16 * (from + i % pieces)) = make_uint4(0, 0, 0, 0);
                __syncwarp();
            }
            if (n == U) {
#pragma unroll
                for (int u = 0; u < U; ++u) kstep(buf, u);
            } else {
#pragma unroll 1
                for (int u = 0; u < n; ++u) kstep(buf, u);
            }
            __syncwarp();
            ++consumed;
            produce();
            if ((sig_gi >= 0 || cmb) && ++age >= 2) flush();
        }
        flush(); // at most one item's signal pending

        float acc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                acc[n][i] = chain[n][0][i];
#pragma unroll
                for (int c = 1; c < kChains; ++c) acc[n][i] += chain[n][c][i];
            }

        // C fragment: acc[n][0..1] = row lg, token rows n*8 + 2 lt + {0,1}; acc[n][2..3] = row lg + 8, same rows.
        const int e = cur.e;
        if (!cur.down) {
            const float sg = g.w.gs_gate[e] * kPackedProductScale, su = g.w.gs_up[e] * kPackedProductScale;
            const int feature = cur.tile * 8 + lg;
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int r = n * 8 + 2 * lt + c;
                    if (r < cur.rows)
                        g.s.act[(static_cast<std::size_t>(cur.gi) * R + r) * g.s.ld_act + feature] =
                            silu_mul_bf16(acc[n][c] * sg, acc[n][2 + c] * su);
                }
            sig_gi = cur.gi, age = 0;
        } else {
            const float sd = g.w.gs_down[e] * kPackedProductScale;
            const int row = cur.tile * 16 + lg;
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int r = n * 8 + 2 * lt + c;
                    const int pair = __shfl_sync(0xFFFFFFFFu, cur.pair, r % 32);
                    const float wgt = __shfl_sync(0xFFFFFFFFu, cur.weight, r % 32);
                    if (r < cur.rows) {
                        float *dst = g.s.partial + static_cast<std::size_t>(pair) * g.hidden;
                        if (row < g.hidden) dst[row] = acc[n][c] * sd * wgt;
                        if (row + 8 < g.hidden) dst[row + 8] = acc[n][2 + c] * sd * wgt;
                    }
                }
            cmb = true, cmb_tok = lane < cur.rows ? cur.pair / g.slots : -1, cmb_tile = cur.tile, age = 0;
        }

        // The next item: the producer may already have issued some of its chunks.
        ensure_next();
        cur = nxt, nxt_decoded = false, nxt = item{};
        if (p_on_next)
            p_on_next = false; // p_k already counts cur's issued steps
        else
            p_k = 0;
    }
    flush();
}

template <int R, int U, int S>
cudaError_t launch(const persist_args &a, int max_items, cudaStream_t stream) {
    const int smem = persist_smem_bytes<R, U, S>(a.num_experts);
    // Once per instance and per table size: not stream operations, fine during capture.
    static int sms = 0, per_sm = 0, per_sm_smem = -1;
    if (sms == 0) {
        if (auto e = cudaFuncSetAttribute(moe_persist_kernel<R, U, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          persist_smem_bytes<R, U, S>(kMaxExperts));
            e != cudaSuccess)
            return e;
        int dev = 0;
        if (auto e = cudaGetDevice(&dev); e != cudaSuccess) return e;
        if (auto e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    }
    if (per_sm_smem != smem) {
        if (auto e =
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_persist_kernel<R, U, S>, kWarps * 32, smem);
            e != cudaSuccess)
            return e;
        if (per_sm < 1) return cudaErrorInvalidConfiguration;
        per_sm_smem = smem;
    }
    // Never more CTAs than fit at once: a waiting warp's gate_up items then always get an SM.
    const int grid = std::max(1, std::min(sms * per_sm, (max_items + kWarps - 1) / kWarps));
    return launch_pdl(moe_persist_kernel<R, U, S>, dim3(grid), dim3(kWarps * 32), smem, 1, stream, a);
}

} // namespace

cudaError_t moe_persist_run(const decode_weights &w, const decode_batch &b, decode_tactic t, const persist_scratch &s,
                            cudaStream_t stream) {
    if (reinterpret_cast<std::uintptr_t>(b.x) % 16 || s.ld_act % 8 || t.rows < kMinPersistRows ||
        t.rows > kMaxPersistRows)
        return cudaErrorInvalidValue;
    persist_args a{};
    a.w = w, a.hidden = b.hidden, a.inter = b.inter, a.slots = b.slots, a.num_experts = b.num_experts;
    a.tokens = b.tokens, a.max_tokens = b.max_tokens, a.masked = b.masked, a.x = b.x, a.out = b.out;
    a.topk_ids = b.topk_ids, a.counts = b.counts, a.offsets = b.offsets, a.perm = b.perm;
    a.masked_pairs = b.masked_pairs, a.topk_weights = b.topk_weights, a.s = s;
    // Groups of this batch at most: one partial group per busy expert plus full ones.
    const long long pairs = static_cast<long long>(b.tokens) * b.slots;
    const long long busy = std::min<long long>(pairs, b.num_experts);
    const long long groups = busy + (pairs + t.rows - 1) / t.rows;
    const long long max_items = groups * (w.tiles_gu + w.tiles_down);
    const int mi = static_cast<int>(std::min<long long>(max_items, 1LL << 30));
#define FP4MOE_PERSIST_CASE(R_, U_, S_)                                                                                \
    if (t.rows == R_ && t.inflight == U_ && t.stages == S_) return launch<R_, U_, S_>(a, mi, stream);
    FP4MOE_PERSIST_CASE(2, 4, 2)
    FP4MOE_PERSIST_CASE(2, 4, 3)
    FP4MOE_PERSIST_CASE(2, 4, 4)
    FP4MOE_PERSIST_CASE(4, 4, 3)
    FP4MOE_PERSIST_CASE(8, 2, 4)
    FP4MOE_PERSIST_CASE(8, 4, 2)
    FP4MOE_PERSIST_CASE(16, 2, 3)
#undef FP4MOE_PERSIST_CASE
    return cudaErrorInvalidValue;
}

} // namespace fp4moe::cuda
