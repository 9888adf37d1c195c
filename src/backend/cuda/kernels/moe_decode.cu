// cuda.decode kernels (see moe_decode.h for the pipeline and mma_pack.h for the weight layout).
//
// Why this shape: at decode an MoE layer is a stream of expert weights, each read once. Weight tiles are the
// mma A operand (16 output rows x 16 K), tokens the B operand (n = 8 per mma), so one token still uses the
// tensor cores, and every weight byte is dequantized once however many tokens share it. One 16-byte load per
// lane per 64 K carries four A fragments; scales come with one 8-byte load. Loads of the next U ksteps are in
// flight while the current ones are dequantized and multiplied.
#include "kernels/mma_dequant.h"
#include "kernels/moe_decode.h"

#include <cuda_bf16.h>

#include <algorithm>

namespace fp4moe::cuda {
namespace {

constexpr int kWarps = 4;  // warps per CTA
constexpr int kUnroll = 4; // ksteps in flight per warp
constexpr int kMaxExperts = 1024;

__host__ __device__ constexpr std::size_t align256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

// Workspace regions, all derived from the same upper bounds on host and device.
struct layout {
    std::size_t groups, pad_off, act, partial, total;
    int max_groups, max_rows, k_pad_inter;
};

__host__ __device__ inline layout make_layout(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    layout l{};
    const long long pairs = static_cast<long long>(max_tokens) * slots;
    const long long busy = pairs < num_experts ? pairs : num_experts; // experts that can hold a token
    l.max_groups = static_cast<int>(busy + (pairs + 7) / 8);          // sum ceil(ceil(c/8)/nt) for nt = 1
    l.max_rows = static_cast<int>(pairs + 7 * busy);                  // sum ceil(c/8)*8
    l.k_pad_inter = (inter + 63) / 64 * 64;
    std::size_t off = 0;
    l.groups = off, off += align256(sizeof(int) * (2 * static_cast<std::size_t>(l.max_groups) + 1));
    l.pad_off = off, off += align256(sizeof(int) * (num_experts + 1));
    l.act = off, off += align256(2 * static_cast<std::size_t>(l.max_rows) * l.k_pad_inter);
    l.partial = off, off += align256(4 * static_cast<std::size_t>(pairs) * hidden);
    l.total = off;
    return l;
}

// ---- groups: the work list ------------------------------------------------------------------------------

// One CTA. groups[0] = count; groups[1 + 2i] = expert, groups[2 + 2i] = first 8-row tile of group i.
__global__ void groups_kernel(const std::int32_t *__restrict__ counts, int num_experts, int nt, int *groups,
                              int *pad_off) {
    __shared__ int tiles_scan[kMaxExperts + 1], groups_scan[kMaxExperts + 1];
    const int e = threadIdx.x;
    const int c = e < num_experts ? counts[e] : 0;
    const int tiles = (c + 7) / 8, ngroups = (tiles + nt - 1) / nt;
    tiles_scan[e + 1] = tiles;
    groups_scan[e + 1] = ngroups;
    if (e == 0) tiles_scan[0] = groups_scan[0] = 0;
    __syncthreads();
    // Inclusive Hillis-Steele scan over 1024 entries (positions 1..1024).
    for (int d = 1; d < kMaxExperts; d <<= 1) {
        int a = 0, b = 0;
        if (e >= d) a = tiles_scan[e + 1 - d], b = groups_scan[e + 1 - d];
        __syncthreads();
        tiles_scan[e + 1] += a;
        groups_scan[e + 1] += b;
        __syncthreads();
    }
    if (e <= num_experts) pad_off[e] = 8 * tiles_scan[e];
    if (e < num_experts)
        for (int g = 0; g < ngroups; ++g) {
            groups[1 + 2 * (groups_scan[e] + g)] = e;
            groups[2 + 2 * (groups_scan[e] + g)] = g * nt;
        }
    if (e == 0) groups[0] = groups_scan[num_experts];
}

// ---- the grouped mma kernel -----------------------------------------------------------------------------

__device__ __forceinline__ uint4 load_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 load_stream8(const void *p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

__device__ __forceinline__ std::uint32_t hmul2(std::uint32_t a, std::uint32_t b) {
    std::uint32_t d;
    // Exact here (2 x 4 significant bits); the E2M1 code 1 is a bf16 subnormal, which mul.bf16x2 keeps.
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

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
    const int *groups, *pad_off;
    const float *gs0, *gs1; // gate_up: gate/up global scales; down: down scale (gs1 unused)
    const float *topk_weights;
    std::uint16_t *act; // gate_up output
    int ld_act;
    float *partial; // down output
};

// Pair (token * slots + slot) of row `rr` of expert `e`.
__device__ __forceinline__ int pair_of(const gemm_args &g, int e, int rr) {
    return g.masked ? g.masked_pairs[e * g.max_tokens + rr] : g.perm[g.offsets[e] + rr];
}

template <bool GateUp, int NT, int KS>
__global__ void __launch_bounds__(kWarps * 32) moe_gemm_kernel(const gemm_args g) {
    const int group = blockIdx.y;
    if (group >= g.groups[0]) return;
    const int e = g.groups[1 + 2 * group], tile0 = g.groups[2 + 2 * group];
    const int count = g.counts[e];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lg = lane / 4, lt = lane % 4;
    const int tile = blockIdx.x * (kWarps / KS) + warp / KS, kpart = warp % KS;
    const bool has_tile = tile < g.tiles;

    // B row of this lane (row lg of each 8-row token tile), or null for padding rows.
    const std::uint16_t *brow[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int rr = (tile0 + n) * 8 + lg;
        brow[n] = nullptr;
        if (rr < count) {
            if constexpr (GateUp)
                brow[n] = g.b + static_cast<std::size_t>(pair_of(g, e, rr) / g.slots) * g.ldb;
            else
                brow[n] = g.b + static_cast<std::size_t>(g.pad_off[e] + rr) * g.ldb;
        }
    }

    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

    const int k_begin = g.ksteps * kpart / KS, k_end = g.ksteps * (kpart + 1) / KS;
    const std::uint8_t *aq = g.wq + e * g.expert_q + (static_cast<std::size_t>(tile) * g.ksteps) * 512 + lane * 16;
    const std::uint8_t *as = g.ws + e * g.expert_s + (static_cast<std::size_t>(tile) * g.ksteps) * 64 + lg * 8;

    if (has_tile) {
        uint4 q[kUnroll];
        uint2 s[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            q[u] = make_uint4(0, 0, 0, 0), s[u] = make_uint2(0, 0);
            if (k_begin + u < k_end)
                q[u] = load_stream(aq + (k_begin + u) * 512), s[u] = load_stream8(as + (k_begin + u) * 64);
        }
        for (int k0 = k_begin; k0 < k_end; k0 += kUnroll) {
            uint4 qn[kUnroll];
            uint2 sn[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                qn[u] = make_uint4(0, 0, 0, 0), sn[u] = make_uint2(0, 0);
                const int k = k0 + kUnroll + u;
                if (k < k_end) qn[u] = load_stream(aq + k * 512), sn[u] = load_stream8(as + k * 64);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int k = k0 + u;
                if (k >= k_end) break;
                const std::uint32_t words[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
                for (int sl = 0; sl < 4; ++sl) {
                    const int kcol = k * 64 + sl * 16;
                    std::uint32_t b0[NT], b1[NT];
#pragma unroll
                    for (int n = 0; n < NT; ++n) {
                        b0[n] = b1[n] = 0;
                        if (brow[n] && kcol < g.k_valid) {
                            b0[n] = __ldg(reinterpret_cast<const unsigned int *>(brow[n] + kcol + 2 * lt));
                            b1[n] = __ldg(reinterpret_cast<const unsigned int *>(brow[n] + kcol + 2 * lt + 8));
                        }
                    }
                    const std::uint32_t codes = sl < 2 ? s[u].x : s[u].y;
                    std::uint32_t sc_lo, sc_hi; // scales of rows g and g + 8 for this slice
                    if (sl % 2 == 0)
                        sc_lo = scale_code_to_bf16x2<0>(codes), sc_hi = scale_code_to_bf16x2<1>(codes);
                    else
                        sc_lo = scale_code_to_bf16x2<2>(codes), sc_hi = scale_code_to_bf16x2<3>(codes);
                    const std::uint32_t w = words[sl];
                    const std::uint32_t a[4] = {
                        hmul2(e2m1x2_to_bf16x2<0>(w), sc_lo), hmul2(e2m1x2_to_bf16x2<1>(w), sc_hi),
                        hmul2(e2m1x2_to_bf16x2<2>(w), sc_lo), hmul2(e2m1x2_to_bf16x2<3>(w), sc_hi)};
#pragma unroll
                    for (int n = 0; n < NT; ++n) mma_bf16(acc[n], a, b0[n], b1[n]);
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) q[u] = qn[u], s[u] = sn[u];
        }
    }

    if constexpr (KS > 1) {
        __shared__ float red[kWarps][NT * 4][32];
        if (kpart != 0)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) red[warp][n * 4 + i][lane] = acc[n][i];
        __syncthreads();
        if (kpart != 0) return;
#pragma unroll
        for (int p = 1; p < KS; ++p)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[n][i] += red[warp + p][n * 4 + i][lane];
    }
    if (!has_tile) return;

        // C fragment: acc[n][0..1] = row lg, tokens 2 lt, 2 lt + 1; acc[n][2..3] = row lg + 8, same tokens.
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int rr = (tile0 + n) * 8 + 2 * lt + c;
            if (rr >= count) continue;
            if constexpr (GateUp) {
                const int feature = tile * 8 + lg;
                if (feature >= g.ld_act) continue;
                const float gate = acc[n][c] * (g.gs0[e] * kPackedProductScale);
                const float up = acc[n][2 + c] * (g.gs1[e] * kPackedProductScale);
                const float h = feature < g.inter ? gate / (1.0f + __expf(-gate)) * up : 0.0f;
                const __nv_bfloat16 hb = __float2bfloat16_rn(h);
                g.act[static_cast<std::size_t>(g.pad_off[e] + rr) * g.ld_act + feature] =
                    *reinterpret_cast<const std::uint16_t *>(&hb);
            } else {
                const int pair = pair_of(g, e, rr);
                const float scale = g.gs0[e] * kPackedProductScale * g.topk_weights[pair];
                const int row = tile * 16 + lg;
                float *dst = g.partial + static_cast<std::size_t>(pair) * g.hidden;
                if (row < g.hidden) dst[row] = acc[n][c] * scale;
                if (row + 8 < g.hidden) dst[row + 8] = acc[n][2 + c] * scale;
            }
        }
}

// ---- combine -------------------------------------------------------------------------------------------

__global__ void combine_kernel(const float *__restrict__ partial, const std::int32_t *__restrict__ ids, int tokens,
                               int slots, int hidden, std::uint16_t *__restrict__ out) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(tokens) * hidden) return;
    const int t = static_cast<int>(i / hidden), h = static_cast<int>(i % hidden);
    float sum = 0.0f;
    if (ids[static_cast<std::size_t>(t) * slots] < 0) {
        sum = __int_as_float(0x7FC00000); // a token routing refused (non-finite logits): NaN, never stale data
    } else {
        for (int j = 0; j < slots; ++j) sum += partial[(static_cast<std::size_t>(t) * slots + j) * hidden + h];
    }
    const __nv_bfloat16 r = __float2bfloat16_rn(sum);
    out[i] = *reinterpret_cast<const std::uint16_t *>(&r);
}

template <bool GateUp, int NT, int KS>
void launch_gemm(const gemm_args &g, int max_groups, cudaStream_t stream) {
    const dim3 grid((g.tiles + kWarps / KS - 1) / (kWarps / KS), max_groups);
    moe_gemm_kernel<GateUp, NT, KS><<<grid, kWarps * 32, 0, stream>>>(g);
}

template <bool GateUp>
cudaError_t dispatch(const gemm_args &g, int max_groups, decode_tactic t, cudaStream_t stream) {
#define FP4MOE_DECODE_CASE(NT_, KS_)                                                                                   \
    if (t.nt == NT_ && t.ksplit == KS_) return launch_gemm<GateUp, NT_, KS_>(g, max_groups, stream), cudaSuccess;
    FP4MOE_DECODE_CASE(1, 1)
    FP4MOE_DECODE_CASE(1, 2)
    FP4MOE_DECODE_CASE(1, 4)
    FP4MOE_DECODE_CASE(2, 1)
    FP4MOE_DECODE_CASE(2, 2)
    FP4MOE_DECODE_CASE(2, 4)
    FP4MOE_DECODE_CASE(4, 1)
    FP4MOE_DECODE_CASE(4, 2)
    FP4MOE_DECODE_CASE(4, 4)
#undef FP4MOE_DECODE_CASE
    return cudaErrorInvalidValue;
}

} // namespace

std::size_t moe_decode_workspace(int hidden, int inter, int num_experts, int slots, int max_tokens) {
    return make_layout(hidden, inter, num_experts, slots, max_tokens).total;
}

cudaError_t moe_decode_run(const decode_weights &w, const decode_batch &b, decode_tactic t, cudaStream_t stream) {
    if (b.hidden <= 0 || b.inter <= 0 || b.hidden % 16 || b.inter % 16 || b.num_experts <= 0 ||
        b.num_experts >= kMaxExperts || b.slots <= 0 || b.tokens < 0 || b.tokens > b.max_tokens || !b.workspace)
        return cudaErrorInvalidValue;
    if (w.tiles_gu != (b.inter + 7) / 8 || w.ksteps_gu != (b.hidden + 63) / 64 ||
        w.tiles_down != (b.hidden + 15) / 16 || w.ksteps_down != (b.inter + 63) / 64)
        return cudaErrorInvalidValue;
    if (b.tokens == 0) return cudaSuccess;
    const layout l = make_layout(b.hidden, b.inter, b.num_experts, b.slots, b.max_tokens);
    auto *base = static_cast<std::uint8_t *>(b.workspace);
    int *groups = reinterpret_cast<int *>(base + l.groups);
    int *pad_off = reinterpret_cast<int *>(base + l.pad_off);
    auto *act = reinterpret_cast<std::uint16_t *>(base + l.act);
    float *partial = reinterpret_cast<float *>(base + l.partial);

    // Bounds for this batch (not the capacity): smaller grids at small T.
    const long long pairs = static_cast<long long>(b.tokens) * b.slots;
    const long long busy = std::min<long long>(pairs, b.num_experts);
    const int max_groups = static_cast<int>(busy + (pairs + 8LL * t.nt - 1) / (8LL * t.nt));

    groups_kernel<<<1, kMaxExperts, 0, stream>>>(b.counts, b.num_experts, t.nt, groups, pad_off);

    gemm_args g{};
    g.counts = b.counts, g.offsets = b.offsets, g.perm = b.perm, g.masked_pairs = b.masked_pairs;
    g.slots = b.slots, g.max_tokens = b.max_tokens, g.inter = b.inter, g.hidden = b.hidden, g.masked = b.masked;
    g.groups = groups, g.pad_off = pad_off, g.topk_weights = b.topk_weights;
    g.act = act, g.ld_act = l.k_pad_inter, g.partial = partial;

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
    if (auto st = dispatch<false>(g, max_groups, t, stream); st != cudaSuccess) return st;

    const long long n = static_cast<long long>(b.tokens) * b.hidden;
    combine_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(partial, b.topk_ids, b.tokens, b.slots,
                                                                               b.hidden, b.out);
    return cudaGetLastError();
}

} // namespace fp4moe::cuda
