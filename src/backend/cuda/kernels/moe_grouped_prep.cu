// cuda.grouped's kernels around its GEMMs (moe_grouped_prep.h; moe_grouped.h has the pipeline). TMA cannot gather
// rows on sm_90, hence the gather in front of gate_up: the tokens of each expert's rows, in expert order.
#include "kernels/moe_grouped_prep.h"

#include "kernels/grouped_layout.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

#include <cuda_bf16.h>

namespace fp4moe::cuda {
namespace {

using namespace ptx;

// rowbase[e] = sum of counts[0 .. e): each expert's first row in the compact order (rowbase[NE] = rows in use).
// Also zeroes the GEMMs' work-item counters (every kernel after this one waits for it to complete).
__global__ void __launch_bounds__(1024)
    rows_kernel(const std::int32_t *counts, int num_experts, std::int32_t *rowbase, int *sched) {
    wait_for_previous_kernel();
    allow_next_kernel();
    if (threadIdx.x < kGroupedCounters) sched[threadIdx.x] = 0;
    __shared__ int warp_sums[32];
    const int i = threadIdx.x, lane = i % 32, warp = i / 32;
    const int c = i < num_experts ? counts[i] : 0;
    int incl = c;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int s = warp_sums[lane];
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const int v = __shfl_up_sync(0xFFFFFFFFu, s, d);
            if (lane >= d) s += v;
        }
        warp_sums[lane] = s; // inclusive over warps
    }
    __syncthreads();
    const int base = (warp ? warp_sums[warp - 1] : 0) + incl - c;
    if (i < num_experts) rowbase[i] = base;
    if (i == num_experts - 1) rowbase[num_experts] = base + c;
}

struct gather_args {
    const std::uint16_t *x;
    const std::int32_t *rowbase, *perm, *masked_pairs;
    int num_experts, slots, max_tokens, tokens, hidden, k64;
    bool masked;
    std::uint16_t *xp;
    std::int32_t *pair_of_row, *row_of_pair;
};

// One thread per row in use: its (token, slot) pair, both ways. A pair the plan does not list keeps a stale
// row_of_pair entry; the gather checks it against pair_of_row, which holds every row in use.
__global__ void __launch_bounds__(256) pairs_kernel(gather_args a) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (row >= a.rowbase[a.num_experts]) return;
    int pair;
    if (!a.masked) {
        pair = a.perm[row];
    } else { // the expert whose compact range holds `row`: binary search over rowbase
        int lo = 0, hi = a.num_experts - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (a.rowbase[mid] <= row)
                lo = mid;
            else
                hi = mid - 1;
        }
        pair = a.masked_pairs[static_cast<std::size_t>(lo) * a.max_tokens + (row - a.rowbase[lo])];
    }
    a.pair_of_row[row] = pair;
    if (pair >= 0 && pair < a.tokens * a.slots) a.row_of_pair[pair] = row;
}

constexpr int kGatherWarps = 8; // warps per CTA
constexpr int kGatherVecs = 4;  // 16-byte vectors per lane per warp: a warp copies 32 x 4 vectors of K (1024)

// x rows -> xp rows, one warp per (token, 1024-wide slice of K): the slice of x is read once and written to the
// rows of every pair of the token (the rows of one token are far apart in expert order, so gathering by row
// re-read x from HBM once per slot when x is larger than L2; slices keep small batches' warps numerous).
// Vector i of a 64-wide chunk (positions 8 i .. 8 i + 7: slice q = i / 2, half u = i % 2) holds the chunk's
// words (bf16 pairs) 8 t + i for t = 0..3 (k = 16 t + 4 q + 2 u + c, mma_pack.h): eight consecutive lanes read
// 32 contiguous bytes per t, and the stores are contiguous. K past H reads zeros.
__global__ void __launch_bounds__(32 * kGatherWarps) gather_kernel(gather_args a, int slices) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int lane = threadIdx.x % 32;
    const long long w = static_cast<long long>(blockIdx.x) * kGatherWarps + threadIdx.x / 32;
    const int t = static_cast<int>(w / slices);
    if (t >= a.tokens) return;
    const int v0 = static_cast<int>(w % slices) * 32 * kGatherVecs + lane;
    const auto *__restrict__ src =
        reinterpret_cast<const std::uint32_t *>(a.x + static_cast<std::size_t>(t) * a.hidden);
    const int words = a.hidden / 2, vecs = a.k64 / 8;
    uint4 v[kGatherVecs]; // all loads are issued before the stores
#pragma unroll
    for (int u = 0; u < kGatherVecs; ++u) {
        const int i = v0 + 32 * u;
        std::uint32_t q[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int pw = (i / 8) * 32 + grouped_vector_source_pair(i % 8, k);
            q[k] = i < vecs && pw < words ? src[pw] : 0u;
        }
        v[u] = make_uint4(q[0], q[1], q[2], q[3]);
    }
    for (int s0 = 0; s0 < a.slots; s0 += 32) { // one round of 32 slots for every model we know
        int row = -1; // lane l: the row of pair (t, s0 + l), or -1 when the plan does not list it
        if (s0 + lane < a.slots) {
            const int pair = t * a.slots + s0 + lane, r = a.row_of_pair[pair];
            if (r >= 0 && r < a.rowbase[a.num_experts] && a.pair_of_row[r] == pair) row = r;
        }
        const int ns = min(32, a.slots - s0);
        for (int s = 0; s < ns; ++s) {
            const int r = __shfl_sync(0xFFFFFFFFu, row, s);
            if (r < 0) continue;
            uint4 *__restrict__ dst = reinterpret_cast<uint4 *>(a.xp + static_cast<std::size_t>(r) * a.k64);
#pragma unroll
            for (int u = 0; u < kGatherVecs; ++u)
                if (v0 + 32 * u < vecs) dst[v0 + 32 * u] = v[u];
        }
    }
}

// ---- combine ----------------------------------------------------------------------------------------------

// out[t][h..h+7] = bf16(out_acc[t][h..h+7]), the sum of the token's weighted slot rows that down's epilogue added.
__global__ void __launch_bounds__(256) combine_kernel(const float *out_acc, const std::int32_t *topk_ids, int tokens,
                                                      int slots, int hidden, std::uint16_t *out) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int vecs = hidden / 8;
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(tokens) * vecs) return;
    const int t = static_cast<int>(idx / vecs), v = static_cast<int>(idx % vecs);
    uint4 o;
    auto *ob = reinterpret_cast<std::uint16_t *>(&o);
    if (topk_ids[static_cast<std::size_t>(t) * slots] < 0) {
        for (int i = 0; i < 8; ++i) ob[i] = 0x7FC0; // NaN: routing refused the token
    } else {
        const float *src = out_acc + static_cast<std::size_t>(t) * hidden + 8 * v;
        const float4 a = load_stream_f4(src), b = load_stream_f4(src + 4);
        const float sum[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const __nv_bfloat16 r = __float2bfloat16_rn(sum[i]);
            ob[i] = *reinterpret_cast<const std::uint16_t *>(&r);
        }
    }
    *reinterpret_cast<uint4 *>(out + static_cast<std::size_t>(t) * hidden + 8 * v) = o;
}

__host__ __device__ constexpr std::size_t align256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

} // namespace

grouped_layout make_grouped_layout(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    grouped_layout l{};
    l.rows = max_tokens * slots;
    l.k64_hidden = (hidden + 63) / 64 * 64, l.k64_inter = (inter + 63) / 64 * 64;
    std::size_t off = 0;
    l.rowbase = off, off += align256(4 * static_cast<std::size_t>(num_experts + 1));
    l.sched = off, off += align256(4 * kGroupedCounters);
    l.pair_of_row = off, off += align256(4 * static_cast<std::size_t>(l.rows));
    l.row_of_pair = off, off += align256(4 * static_cast<std::size_t>(l.rows));
    l.xp = off, off += align256(2 * static_cast<std::size_t>(l.rows) * l.k64_hidden);
    l.act = off, off += align256(2 * static_cast<std::size_t>(l.rows) * l.k64_inter);
    l.out_acc = off, off += align256(4 * static_cast<std::size_t>(max_tokens) * hidden);
    l.total = off;
    return l;
}

grouped_buffers grouped_carve(void *workspace, const grouped_layout &l) {
    auto *base = static_cast<std::uint8_t *>(workspace);
    grouped_buffers ws{};
    ws.rowbase = reinterpret_cast<std::int32_t *>(base + l.rowbase);
    ws.sched = reinterpret_cast<int *>(base + l.sched);
    ws.pair_of_row = reinterpret_cast<std::int32_t *>(base + l.pair_of_row);
    ws.row_of_pair = reinterpret_cast<std::int32_t *>(base + l.row_of_pair);
    ws.xp = reinterpret_cast<std::uint16_t *>(base + l.xp);
    ws.act = reinterpret_cast<std::uint16_t *>(base + l.act);
    ws.out_acc = reinterpret_cast<float *>(base + l.out_acc);
    return ws;
}

cudaError_t grouped_prepare(const decode_batch &b, const grouped_layout &l, const grouped_buffers &ws,
                            cudaStream_t stream) {
    const int rows = b.tokens * b.slots; // rows in use are at most this
    if (auto e =
            launch_pdl(rows_kernel, dim3(1), dim3(1024), 0, 1, stream, b.counts, b.num_experts, ws.rowbase, ws.sched);
        e != cudaSuccess)
        return e;
    gather_args ga{};
    ga.x = b.x, ga.rowbase = ws.rowbase, ga.perm = b.perm, ga.masked_pairs = b.masked_pairs;
    ga.num_experts = b.num_experts, ga.slots = b.slots, ga.max_tokens = b.max_tokens, ga.tokens = b.tokens;
    ga.hidden = b.hidden, ga.k64 = l.k64_hidden, ga.masked = b.masked, ga.xp = ws.xp;
    ga.pair_of_row = ws.pair_of_row, ga.row_of_pair = ws.row_of_pair;
    if (auto e = launch_pdl(pairs_kernel, dim3(static_cast<unsigned>((rows + 255) / 256)), dim3(256), 0, 1, stream, ga);
        e != cudaSuccess)
        return e;
    const int slices = (l.k64_hidden / 8 + 32 * kGatherVecs - 1) / (32 * kGatherVecs);
    const long long gather_warps = static_cast<long long>(b.tokens) * slices;
    if (auto e =
            launch_pdl(gather_kernel, dim3(static_cast<unsigned>((gather_warps + kGatherWarps - 1) / kGatherWarps)),
                       dim3(32 * kGatherWarps), 0, 1, stream, ga, slices);
        e != cudaSuccess)
        return e;
    return cudaSuccess;
}

cudaError_t grouped_combine(const decode_batch &b, const grouped_buffers &ws, cudaStream_t stream) {
    const long long cthreads = static_cast<long long>(b.tokens) * (b.hidden / 8);
    if (auto e =
            launch_pdl(combine_kernel, dim3(static_cast<unsigned>((cthreads + 255) / 256)), dim3(256), 0, 1, stream,
                       static_cast<const float *>(ws.out_acc), b.topk_ids, b.tokens, b.slots, b.hidden, b.out);
        e != cudaSuccess)
        return e;
    return cudaGetLastError();
}

} // namespace fp4moe::cuda
