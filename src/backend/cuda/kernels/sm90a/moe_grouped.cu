// cuda.grouped kernels (moe_grouped.h has the pipeline; mma_pack.h the weight layout). Built for sm_90a only.
//
// Why this shape: with many tokens per expert the layer is bound by tensor-core rate, not bytes, and Hopper's
// rate needs wgmma (mma.sync peaks near a quarter of it: reference/kernels.md §7 b). Hopper has no FP4 math, so
// the weights are dequantized to bf16 in registers and fed as wgmma's register operand (A = 64 weight rows per
// warpgroup, exactly four of the packed 16-row tiles whose A fragments cuda.decode already uses), and the
// tokens are the shared-memory operand B (N = BN rows, TMA with 128-byte swizzle). A producer warp keeps a
// ring of K chunks in flight; while one consumer warpgroup dequantizes its next chunk the other's wgmma runs.
// TMA cannot gather rows on sm_90, hence the gather kernel in front.
#include "kernels/decode_device.cuh"
#include "kernels/moe_grouped.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/sm90a/wgmma.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <iterator>

namespace fp4moe::cuda {
namespace {

using namespace decode_device;
using namespace ptx;

constexpr int kMaxExperts = 1024;
constexpr int kConsumers = 2;                           // consumer warpgroups per CTA
constexpr int kThreads = 128 * (1 + kConsumers);        // + the producer warpgroup
constexpr int kRowsPerCta = 64 * kConsumers;            // weight rows: 16-row tiles per CTA = 8
constexpr int kTilesPerCta = kRowsPerCta / 16;
constexpr int kChunkBytesPerRow = 128;                  // one 64-wide K chunk of bf16

__host__ __device__ constexpr std::size_t align256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

// Workspace regions, from the same upper bounds on host and device. xp (gate_up's B) is dead once gate_up
// has run, so down's partial rows reuse it.
struct layout {
    std::size_t rowbase, pair_of_row, xp, act, total;
    int rows, k64_hidden, k64_inter;
};
inline layout make_layout(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    layout l{};
    l.rows = max_tokens * slots;
    l.k64_hidden = (hidden + 63) / 64 * 64, l.k64_inter = (inter + 63) / 64 * 64;
    std::size_t off = 0;
    l.rowbase = off, off += align256(4 * static_cast<std::size_t>(num_experts + 1));
    l.pair_of_row = off, off += align256(4 * static_cast<std::size_t>(l.rows));
    const std::size_t xp = 2 * static_cast<std::size_t>(l.rows) * l.k64_hidden;
    const std::size_t partial = 2 * static_cast<std::size_t>(l.rows) * hidden;
    l.xp = off, off += align256(std::max(xp, partial));
    l.act = off, off += align256(2 * static_cast<std::size_t>(l.rows) * l.k64_inter);
    l.total = off;
    return l;
}

// ---- rows and gather ------------------------------------------------------------------------------------

// rowbase[e] = sum of counts[0 .. e): each expert's first row in the compact order (rowbase[NE] = rows in use).
__global__ void __launch_bounds__(1024) rows_kernel(const std::int32_t *counts, int num_experts, std::int32_t *rowbase) {
    wait_for_previous_kernel();
    allow_next_kernel();
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
    int num_experts, slots, max_tokens, hidden, k64, max_rows;
    bool masked;
    std::uint16_t *xp;
    std::int32_t *pair_of_row;
};

// One thread per (row, 64-wide K chunk): reads the chunk's 32 words (pairs of bf16) and writes them in the
// packed weights' K order. Output vector i (positions 8 i .. 8 i + 7 = slice q = i / 2, half u = i % 2) holds
// real pairs 8 t + i for t = 0..3 (k = 16 t + 4 q + 2 u + c, mma_pack.h). K past H reads zeros.
__global__ void __launch_bounds__(256) gather_kernel(gather_args a) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int chunks = a.k64 / 64;
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int row = static_cast<int>(idx / chunks), chunk = static_cast<int>(idx % chunks);
    if (row >= a.max_rows || row >= a.rowbase[a.num_experts]) return;
    int pair;
    if (!a.masked) {
        pair = a.perm[row];
    } else { // the expert whose compact range holds `row`: binary search over rowbase
        int lo = 0, hi = a.num_experts - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (a.rowbase[mid] <= row) lo = mid;
            else hi = mid - 1;
        }
        pair = a.masked_pairs[static_cast<std::size_t>(lo) * a.max_tokens + (row - a.rowbase[lo])];
    }
    if (chunk == 0) a.pair_of_row[row] = pair;
    const int token = pair / a.slots;
    const std::uint16_t *src = a.x + static_cast<std::size_t>(token) * a.hidden + chunk * 64;
    std::uint32_t w[32];
#pragma unroll
    for (int v = 0; v < 8; ++v) { // 8 bf16 per vector; H % 16 == 0, so a vector is all in or all out
        uint4 q = make_uint4(0, 0, 0, 0);
        if (chunk * 64 + 8 * v < a.hidden) q = *reinterpret_cast<const uint4 *>(src + 8 * v);
        w[4 * v] = q.x, w[4 * v + 1] = q.y, w[4 * v + 2] = q.z, w[4 * v + 3] = q.w;
    }
    uint4 *dst = reinterpret_cast<uint4 *>(a.xp + static_cast<std::size_t>(row) * a.k64 + chunk * 64);
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = make_uint4(w[i], w[8 + i], w[16 + i], w[24 + i]);
}

// ---- the grouped GEMM -------------------------------------------------------------------------------------

struct gemm_args {
    const std::uint8_t *wq, *ws;       // packed weights and scale codes, experts contiguous
    int tiles, ksteps;                 // 16-row tiles and 64-wide K steps per expert
    const float *gs0, *gs1;            // global scales (gate_up: gate, up; down: down, unused)
    const std::int32_t *counts, *rowbase;
    int num_experts;
    // gate_up: act rows
    std::uint16_t *act;
    int k64_inter, inter;
    // down: partial rows per (token, slot) pair
    const std::int32_t *pair_of_row;
    const float *topk_weights;
    std::uint16_t *partial;
    int hidden;
};

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, std::uint64_t *bar, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
template <int Regs>
__device__ __forceinline__ void set_max_regs_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void set_max_regs_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

// Work item w -> m-block (expert e, its m-th block of BN rows) and n-tile (kRowsPerCta weight rows), n fastest:
// CTAs running at once share token blocks (B from L2) and stream different weight rows.
struct work {
    int e, row0, rows, ntile;
};
__device__ __forceinline__ work find_work(const int *mprefix, int num_experts, int w, int ntiles, int bn,
                                          const std::int32_t *rowbase, const std::int32_t *counts) {
    const int mb = w / ntiles;
    int lo = 0, hi = num_experts - 1; // last e with mprefix[e] <= mb
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (mprefix[mid] <= mb) lo = mid;
        else hi = mid - 1;
    }
    work r;
    r.e = lo, r.ntile = w % ntiles;
    const int m = mb - mprefix[lo];
    r.row0 = rowbase[lo] + m * bn;
    r.rows = min(bn, counts[lo] - m * bn);
    return r;
}

template <int BN>
constexpr int stage_bytes() {
    return BN * kChunkBytesPerRow;
}
template <int BN, int ST>
constexpr int smem_bytes() {
    return 1024 /* alignment slack */ + ST * stage_bytes<BN>() + 2 * ST * 8 + 4 * (kMaxExperts + 1);
}

template <bool GateUp, int BN, int ST>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(const __grid_constant__ CUtensorMap b_map,
                                                                   const gemm_args g) {
    extern __shared__ std::uint8_t smem_raw[];
    auto *ring = reinterpret_cast<std::uint8_t *>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
    auto *full = reinterpret_cast<std::uint64_t *>(ring + ST * stage_bytes<BN>());
    std::uint64_t *empty = full + ST;
    int *mprefix = reinterpret_cast<int *>(empty + ST); // m-blocks before expert e

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4 * kConsumers);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&b_map)) : "memory");
    }
    wait_for_previous_kernel(); // counts, rowbase and the B rows come from earlier kernels
    allow_next_kernel();
    if (warp == 0) { // m-block prefix over the experts: lane l sums experts 32 l .. 32 l + 31
        int local[32], sum = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int e = 32 * lane + j;
            local[j] = e < g.num_experts ? (g.counts[e] + BN - 1) / BN : 0;
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
    const int ntiles = (g.tiles + kTilesPerCta - 1) / kTilesPerCta;
    const int total = mprefix[g.num_experts] * ntiles;

    if (warp < 4) { // producer warpgroup: one thread streams B chunks
        set_max_regs_dec<40>();
        if (warp != 0 || lane != 0) return;
        int stage = 0, phase = 0;
        for (int w = blockIdx.x; w < total; w += gridDim.x) {
            const work wk = find_work(mprefix, g.num_experts, w, ntiles, BN, g.rowbase, g.counts);
            for (int s = 0; s < g.ksteps; ++s) {
                mbar_wait(&empty[stage], phase ^ 1);
                mbar_expect_tx(&full[stage], stage_bytes<BN>());
                tma_load_2d(ring + stage * stage_bytes<BN>(), &b_map, &full[stage], s * 64, wk.row0);
                if (++stage == ST) stage = 0, phase ^= 1;
            }
        }
        return;
    }

    // consumers: warpgroup c owns tiles 4 c .. 4 c + 3 of the CTA's n-tile; this warp one of them
    set_max_regs_inc<232>();
    const int c = warp / 4 - 1, wq = warp % 4;
    const int g8 = lane / 4, t4 = lane % 4;
    int stage = 0, phase = 0;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    constexpr int P = 4; // K steps of weights in flight in registers

    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const work wk = find_work(mprefix, g.num_experts, w, ntiles, BN, g.rowbase, g.counts);
        const int tile = wk.ntile * kTilesPerCta + 4 * c + wq;
        const bool has_tile = tile < g.tiles;
        const std::size_t tile_index = static_cast<std::size_t>(wk.e) * g.tiles + (has_tile ? tile : 0);
        const std::uint8_t *qp = g.wq + tile_index * g.ksteps * 512 + lane * 16;
        const std::uint8_t *sp = g.ws + tile_index * g.ksteps * 64 + lane * 2;

        uint4 qa[P];
        std::uint32_t sa[P];
#pragma unroll
        for (int j = 0; j < P; ++j) {
            qa[j] = make_uint4(0, 0, 0, 0), sa[j] = 0;
            if (has_tile && j < g.ksteps) qa[j] = load_stream(qp + j * 512), sa[j] = load_stream2(sp + j * 64);
        }
        std::uint32_t afrag[4][4];
        for (int s0 = 0; s0 < g.ksteps; s0 += P) {
#pragma unroll
            for (int j = 0; j < P; ++j) {
                const int s = s0 + j;
                if (s >= g.ksteps) break;
                // dequantize step s into the register operand (the previous step's wgmma has completed)
                const std::uint32_t sc_lo = scale_code_to_bf16x2<0>(sa[j]), sc_hi = scale_code_to_bf16x2<1>(sa[j]);
                const std::uint32_t words[4] = {qa[j].x, qa[j].y, qa[j].z, qa[j].w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    afrag[q][0] = hmul2(e2m1x2_to_bf16x2<0>(words[q]), sc_lo);
                    afrag[q][1] = hmul2(e2m1x2_to_bf16x2<1>(words[q]), sc_hi);
                    afrag[q][2] = hmul2(e2m1x2_to_bf16x2<2>(words[q]), sc_lo);
                    afrag[q][3] = hmul2(e2m1x2_to_bf16x2<3>(words[q]), sc_hi);
                }
                if (has_tile && s + P < g.ksteps)
                    qa[j] = load_stream(qp + (s + P) * 512), sa[j] = load_stream2(sp + (s + P) * 64);
                mbar_wait(&full[stage], phase);
                const std::uint64_t desc = wgmma::desc_k_major_sw128(smem_addr(ring + stage * stage_bytes<BN>()));
                wgmma::fence();
#pragma unroll
                for (int q = 0; q < 4; ++q) wgmma::mma_rs<BN>(acc, afrag[q], desc + 2 * q, s > 0 || q > 0);
                wgmma::commit();
                // Depth 0: waiting for this step's wgmma before the next step's dequantization writes registers
                // keeps ptxas from serializing every wgmma (C7513: it cannot tell the double-buffered fragments
                // apart); the two consumer warpgroups still overlap each other's dequantization and MMA.
                wgmma::wait<0>();
                if (lane == 0) mbar_arrive(&empty[stage]);
                if (++stage == ST) stage = 0, phase ^= 1;
            }
        }
        wgmma::fence_operands(acc);

        if constexpr (GateUp) {
            // rows g8 (gate) and g8 + 8 (up) of feature 8 tile + g8; act column in the permuted K order. A warp
            // past the last tile still writes its columns (zeros): down reads all of K64, and 0 x NaN is NaN.
            const int f = 8 * tile + g8, fl = f % 64;
            const int pos = (f / 64) * 64 + 16 * ((fl % 16) / 4) + 8 * ((fl % 4) / 2) + 2 * (fl / 16) + fl % 2;
            const float sg = g.gs0[wk.e] * kPackedProductScale, su = g.gs1[wk.e] * kPackedProductScale;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int col = 8 * j + 2 * t4 + i;
                    if (col < wk.rows)
                        g.act[static_cast<std::size_t>(wk.row0 + col) * g.k64_inter + pos] =
                            has_tile && f < g.inter ? silu_mul_bf16(acc[4 * j + i] * sg, acc[4 * j + 2 + i] * su)
                                                    : std::uint16_t{0};
                }
        } else {
            if (!has_tile) continue;
            const float sd = g.gs0[wk.e] * kPackedProductScale;
            const int r0 = tile * 16 + g8;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int col = 8 * j + 2 * t4 + i;
                    if (col >= wk.rows) continue;
                    const int pair = g.pair_of_row[wk.row0 + col];
                    const float scale = sd * g.topk_weights[pair];
                    std::uint16_t *dst = g.partial + static_cast<std::size_t>(pair) * g.hidden;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int r = r0 + 8 * h;
                        const __nv_bfloat16 v = __float2bfloat16_rn(acc[4 * j + 2 * h + i] * scale);
                        if (r < g.hidden) dst[r] = *reinterpret_cast<const std::uint16_t *>(&v);
                    }
                }
        }
    }
}

// ---- combine ----------------------------------------------------------------------------------------------

// out[t][h..h+7] = sum over slots (in slot order, fp32) of the partial rows of pairs t * slots + s.
__global__ void __launch_bounds__(256) combine_kernel(const std::uint16_t *partial, const std::int32_t *topk_ids,
                                                      int tokens, int slots, int hidden, std::uint16_t *out) {
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
        float sum[8] = {};
        for (int s = 0; s < slots; ++s) {
            const uint4 p = *reinterpret_cast<const uint4 *>(partial + (static_cast<std::size_t>(t) * slots + s) * hidden +
                                                             8 * v);
            const auto *pb = reinterpret_cast<const __nv_bfloat16 *>(&p);
#pragma unroll
            for (int i = 0; i < 8; ++i) sum[i] += __bfloat162float(pb[i]);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const __nv_bfloat16 r = __float2bfloat16_rn(sum[i]);
            ob[i] = *reinterpret_cast<const std::uint16_t *>(&r);
        }
    }
    *reinterpret_cast<uint4 *>(out + static_cast<std::size_t>(t) * hidden + 8 * v) = o;
}

// ---- host -------------------------------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

// [rows, k64] bf16, boxes of 64 K x BN rows, 128-byte swizzle (the wgmma descriptor's layout); rows past the
// buffer read as zeros.
cudaError_t make_b_map(CUtensorMap &map, const std::uint16_t *base, int rows, int k64, int bn) {
    auto encode = tensor_map_encoder();
    if (!encode) return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k64), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k64) * 2};
    const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(bn)};
    const cuuint32_t elem[2] = {1, 1};
    const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<std::uint16_t *>(base), dims,
                              strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

int sm_count() {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 132;
    return n;
}

template <bool GateUp, int BN, int ST>
cudaError_t launch_gemm(const CUtensorMap &map, const gemm_args &g, int max_work, cudaStream_t stream) {
    constexpr int smem = smem_bytes<BN, ST>();
    static const cudaError_t set =
        cudaFuncSetAttribute(grouped_gemm_kernel<GateUp, BN, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (set != cudaSuccess) return set;
    const int grid = std::max(1, std::min(sm_count(), max_work));
    return launch_pdl(grouped_gemm_kernel<GateUp, BN, ST>, dim3(grid), dim3(kThreads), smem, 1, stream, map, g);
}

template <bool GateUp>
cudaError_t dispatch(const CUtensorMap &map, const gemm_args &g, int max_work, grouped_tactic t, cudaStream_t stream) {
    if (t.bn == 64 && t.stages == 6) return launch_gemm<GateUp, 64, 6>(map, g, max_work, stream);
    if (t.bn == 128 && t.stages == 5) return launch_gemm<GateUp, 128, 5>(map, g, max_work, stream);
    if (t.bn == 256 && t.stages == 4) return launch_gemm<GateUp, 256, 4>(map, g, max_work, stream);
    return cudaErrorInvalidValue;
}

} // namespace

const grouped_tactic kGroupedTactics[] = {{128, 5}, {256, 4}, {64, 6}};
const int kGroupedTacticCount = static_cast<int>(std::size(kGroupedTactics));

std::size_t moe_grouped_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    return make_layout(hidden, inter, num_experts, slots, max_tokens).total;
}

bool moe_grouped_supported() {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    return major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
}

cudaError_t moe_grouped_run(const decode_weights &w, const decode_batch &b, grouped_tactic t, cudaStream_t stream) {
    if (b.hidden <= 0 || b.inter <= 0 || b.hidden % 16 || b.inter % 16 || b.num_experts <= 0 ||
        b.num_experts >= kMaxExperts || b.slots <= 0 || b.tokens < 0 || b.tokens > b.max_tokens || !b.workspace)
        return cudaErrorInvalidValue;
    if (w.tiles_gu != (b.inter + 7) / 8 || w.ksteps_gu != (b.hidden + 63) / 64 ||
        w.tiles_down != (b.hidden + 15) / 16 || w.ksteps_down != (b.inter + 63) / 64)
        return cudaErrorInvalidValue;
    if (std::find_if(std::begin(kGroupedTactics), std::end(kGroupedTactics), [&](const grouped_tactic &k) {
            return k.bn == t.bn && k.stages == t.stages;
        }) == std::end(kGroupedTactics))
        return cudaErrorInvalidValue;
    if (b.tokens == 0) return cudaSuccess;
    const layout l = make_layout(b.hidden, b.inter, b.num_experts, b.slots, b.max_tokens);
    auto *base = static_cast<std::uint8_t *>(b.workspace);
    auto *rowbase = reinterpret_cast<std::int32_t *>(base + l.rowbase);
    auto *pair_of_row = reinterpret_cast<std::int32_t *>(base + l.pair_of_row);
    auto *xp = reinterpret_cast<std::uint16_t *>(base + l.xp);
    auto *act = reinterpret_cast<std::uint16_t *>(base + l.act);
    const int rows = b.tokens * b.slots; // rows in use are at most this

    CUtensorMap map_x, map_act;
    if (auto e = make_b_map(map_x, xp, l.rows, l.k64_hidden, t.bn); e != cudaSuccess) return e;
    if (auto e = make_b_map(map_act, act, l.rows, l.k64_inter, t.bn); e != cudaSuccess) return e;

    if (auto e = launch_pdl(rows_kernel, dim3(1), dim3(1024), 0, 1, stream, b.counts, b.num_experts, rowbase);
        e != cudaSuccess)
        return e;
    gather_args ga{};
    ga.x = b.x, ga.rowbase = rowbase, ga.perm = b.perm, ga.masked_pairs = b.masked_pairs;
    ga.num_experts = b.num_experts, ga.slots = b.slots, ga.max_tokens = b.max_tokens, ga.hidden = b.hidden;
    ga.k64 = l.k64_hidden, ga.max_rows = rows, ga.masked = b.masked, ga.xp = xp, ga.pair_of_row = pair_of_row;
    const long long gthreads = static_cast<long long>(rows) * (l.k64_hidden / 64);
    if (auto e = launch_pdl(gather_kernel, dim3(static_cast<unsigned>((gthreads + 255) / 256)), dim3(256), 0, 1,
                            stream, ga);
        e != cudaSuccess)
        return e;

    // Work bound: sum over experts of ceil(count / bn) <= rows / bn + busy experts.
    const long long busy = std::min<long long>(rows, b.num_experts);
    const long long mblocks = rows / t.bn + busy;
    gemm_args g{};
    g.counts = b.counts, g.rowbase = rowbase, g.num_experts = b.num_experts;
    g.act = act, g.k64_inter = l.k64_inter, g.inter = b.inter;
    g.pair_of_row = pair_of_row, g.topk_weights = b.topk_weights, g.partial = xp, g.hidden = b.hidden;

    g.wq = w.gate_up_q, g.ws = w.gate_up_s, g.tiles = w.tiles_gu, g.ksteps = w.ksteps_gu;
    g.gs0 = w.gs_gate, g.gs1 = w.gs_up;
    const long long work_gu = mblocks * ((w.tiles_gu + kTilesPerCta - 1) / kTilesPerCta);
    if (auto e = dispatch<true>(map_x, g, static_cast<int>(std::min<long long>(work_gu, 1 << 30)), t, stream);
        e != cudaSuccess)
        return e;

    g.wq = w.down_q, g.ws = w.down_s, g.tiles = w.tiles_down, g.ksteps = w.ksteps_down;
    g.gs0 = w.gs_down, g.gs1 = nullptr;
    const long long work_down = mblocks * ((w.tiles_down + kTilesPerCta - 1) / kTilesPerCta);
    if (auto e = dispatch<false>(map_act, g, static_cast<int>(std::min<long long>(work_down, 1 << 30)), t, stream);
        e != cudaSuccess)
        return e;

    const long long cthreads = static_cast<long long>(b.tokens) * (b.hidden / 8);
    if (auto e = launch_pdl(combine_kernel, dim3(static_cast<unsigned>((cthreads + 255) / 256)), dim3(256), 0, 1,
                            stream, static_cast<const std::uint16_t *>(xp), b.topk_ids, b.tokens, b.slots, b.hidden,
                            b.out);
        e != cudaSuccess)
        return e;
    return cudaGetLastError();
}

} // namespace fp4moe::cuda
