// Router logits on wgmma (router_logits_wgmma.h). Why: the mma.sync kernel (router_logits_mma.cu) reaches
// 150-215 TFLOP/s of bf16 work (three parts), so a 4096-token batch spent 86 us (glm-4.5-air) to 210 us
// (deepseek-v3) on its router, 3 % of the MoE layer; wgmma with TMA-fed tokens runs the same products at the
// rate of the expert GEMMs. The router is the register operand (A = 64 experts per consumer warpgroup, loaded from
// L2 into the A-fragment layout and split in registers: no shared-memory staging of three parts), the tokens the
// shared-memory operand (B = 128 tokens, K-major, 128-byte swizzle), as in the grouped GEMM.
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/router_logits_wgmma.h"
#include "kernels/sm90a/sm90.cuh"
#include "kernels/sm90a/wgmma.cuh"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace fp4moe::cuda {
namespace {

using namespace ptx;
using namespace sm90;
namespace cg = cooperative_groups;

constexpr int kExpertsPerCta = 128; // 64 per consumer warpgroup (the wgmma M)
constexpr int kTokensPerCta = 128;  // the wgmma N
constexpr int kStages = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kMaxSplits = 8;
constexpr int kAcc = kTokensPerCta / 2; // accumulators per consumer thread
constexpr int kStageBytes = kTokensPerCta * 128;
constexpr int kSmemBytes = 1024 /* alignment slack */ + kStages * kStageBytes + 2 * kStages * 8;
static_assert(kStages * kStageBytes >= 128 * kConsumers * kAcc * 4, "split K's partial logits reuse the ring");

// (a, b) -> KP bf16x2 parts (low half a), each the rounding of what the previous parts left: exact together for
// KP = 3, and for KP = 1 where a and b are bf16 values.
template <int KP>
__device__ __forceinline__ void split(float2 v, std::uint32_t (&p)[KP]) {
#pragma unroll
    for (int i = 0; i < KP; ++i) {
        const __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
        p[i] = *reinterpret_cast<const std::uint32_t *>(&b);
        if (i + 1 < KP)
            v.x = __fsub_rn(v.x, __uint_as_float(p[i] << 16)),
            v.y = __fsub_rn(v.y, __uint_as_float(p[i] & 0xFFFF0000u));
    }
}

// One CTA: experts [e0, e0 + 128) x tokens [t0, t0 + 128) over rank r's K range of its cluster of KS CTAs, the
// router in KP bf16 parts.
template <int KS, int KP>
__global__ void __launch_bounds__(kThreads, 1)
    router_logits_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const float *__restrict__ router, int tokens,
                               int hidden, int experts, int kchunk, float *__restrict__ logits) {
    extern __shared__ std::uint8_t smem_raw[];
    auto *ring =
        reinterpret_cast<std::uint8_t *>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
    auto *full = reinterpret_cast<std::uint64_t *>(ring + kStages * kStageBytes);
    std::uint64_t *empty = full + kStages;
    const int rank = static_cast<int>(blockIdx.x);
    const int e0 = static_cast<int>(blockIdx.y) * kExpertsPerCta, t0 = static_cast<int>(blockIdx.z) * kTokensPerCta;
    const int kb = min(hidden, rank * kchunk), ke = min(hidden, kb + kchunk);
    const int steps = (ke - kb + 63) / 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4 * kConsumers);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&x_map)) : "memory");
    }
    __syncthreads();
    allow_next_kernel();
    wait_for_previous_kernel(); // x comes from the previous kernel

    // Everything a consumer holds lives inside its branch: ptxas allocates the branch's registers under setmaxnreg's
    // 232, but anything live across the branches under the launch bound's 168 (acc there spilled and serialized
    // every wgmma, C7512). The producer warps join the split-K reduction's two cluster barriers.
    if (warp < 4) { // producer: one thread streams x's K chunks
        set_max_regs_dec<40>();
        if (threadIdx.x == 0)
            for (int s = 0, stage = 0, phase = 0; s < steps; ++s) {
                mbar_wait(&empty[stage], phase ^ 1);
                mbar_expect_tx(&full[stage], kStageBytes);
                tma_load_2d(ring + stage * kStageBytes, &x_map, &full[stage], kb + 64 * s, t0);
                if (++stage == kStages) stage = 0, phase ^= 1;
            }
        __syncwarp();
        if constexpr (KS > 1) {
            cg::cluster_group cluster = cg::this_cluster();
            cluster.sync();
            cluster.sync();
        }
        return;
    }
    set_max_regs_inc<232>();
    const int ctid = threadIdx.x - 128, c = warp / 4 - 1, wq = warp % 4, g8 = lane / 4, t4 = lane % 4;
    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
    {
        // A fragment of k16 slice q: a0 = (row g8, k 2 t4, +1), a1 = (row g8 + 8, ...), a2/a3 the same at k + 8.
        const int r0 = e0 + 64 * c + 16 * wq + g8, r1 = r0 + 8;
        const float *p0 = router + static_cast<std::size_t>(r0 < experts ? r0 : 0) * hidden + 2 * t4;
        const float *p1 = router + static_cast<std::size_t>(r1 < experts ? r1 : 0) * hidden + 2 * t4;
        const bool ok0 = r0 < experts, ok1 = r1 < experts;
        float2 rv[4][4]; // [q][a-register] of the next step
        auto load = [&](int k) {
            const float2 z = make_float2(0.0f, 0.0f);
            const bool whole = k + 64 <= ke; // ke % 8 == 0 and the column even: a pair is wholly in or out
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int kk = k + 16 * q + 8 * h;
                    const bool in = whole || kk + 2 * t4 < ke;
                    rv[q][2 * h] = ok0 && in ? __ldg(reinterpret_cast<const float2 *>(p0 + kk)) : z;
                    rv[q][2 * h + 1] = ok1 && in ? __ldg(reinterpret_cast<const float2 *>(p1 + kk)) : z;
                }
        };
        if (steps > 0) load(kb);
        // One K step: split step s's router values into fragment buffer B, wait for its x chunk, issue KP x 4 wgmma.
        // Pipelined (depth 1): the previous step's wgmma, which read the other buffer, may still run while this
        // step splits; once this step's are issued, wait for the previous step's and release its chunk. As in the
        // grouped GEMM, whole pairs of steps run with no early exit and an odd last step runs unpipelined: ptxas
        // serializes every wgmma (C7513) where a wgmma could still be in flight at a loop exit.
        std::uint32_t a[2][KP][4][4];
        ring_cursor<kStages> rc;
        auto kstep = [&]<int B, bool Pipelined>(const int s) {
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    std::uint32_t p[KP];
                    split<KP>(rv[q][j], p);
#pragma unroll
                    for (int i = 0; i < KP; ++i) a[B][i][q][j] = p[i];
                }
            if (s + 1 < steps) load(kb + 64 * (s + 1));
            mbar_wait(&full[rc.stage], rc.phase);
            const std::uint64_t desc = wgmma::desc_k_major_sw128(smem_addr(ring + rc.stage * kStageBytes));
            wgmma::fence();
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int i = 0; i < KP; ++i)
                    wgmma::mma_rs<kTokensPerCta>(acc, a[B][i][q], desc + 2 * q, s > 0 || q > 0 || i > 0);
            wgmma::commit();
            rc.template release<Pipelined>(empty, lane);
        };
        int s0 = 0;
        for (; s0 + 2 <= steps; s0 += 2) {
            kstep.template operator()<0, true>(s0);
            kstep.template operator()<1, true>(s0 + 1);
        }
        rc.drain(empty, lane);
        if (s0 < steps) kstep.template operator()<0, false>(s0);
        wgmma::fence_operands(acc);
    }
    // d[4 j + i]: expert row 16 wq + g8 + 8 (i / 2) of the warpgroup's 64, token 8 j + 2 t4 + i % 2.
    auto emit = [&](int f, float v) {
        const int e = e0 + 64 * c + 16 * wq + g8 + 8 * ((f % 4) / 2), t = t0 + 8 * (f / 4) + 2 * t4 + f % 2;
        if (e < experts && t < tokens) logits[static_cast<std::size_t>(t) * experts + e] = v;
    };
    if constexpr (KS == 1) {
#pragma unroll
        for (int f = 0; f < kAcc; ++f) emit(f, acc[f]);
    } else {
        // Split K: every consumer thread's partial logits to shared memory (float f of thread ctid at f x 256 +
        // ctid), then rank r sums floats [r kAcc / KS, (r + 1) kAcc / KS) of every thread over ranks 0 .. KS - 1
        // in order. All the remote loads are issued before the first sum (unrolled: one DSMEM round trip, not 64).
        cg::cluster_group cluster = cg::this_cluster();
        asm volatile("bar.sync 1, %0;" ::"n"(128 * kConsumers) : "memory"); // both warpgroups are done with the ring
        auto *part = reinterpret_cast<float *>(ring);
#pragma unroll
        for (int f = 0; f < kAcc; ++f) part[f * 128 * kConsumers + ctid] = acc[f];
        cluster.sync();
        constexpr int kPer = kAcc / KS;
        float v[kPer][KS];
#pragma unroll
        for (int q = 0; q < KS; ++q) {
            const float *remote = cluster.map_shared_rank(part, q) + rank * kPer * 128 * kConsumers + ctid;
#pragma unroll
            for (int j = 0; j < kPer; ++j) v[j][q] = remote[j * 128 * kConsumers];
        }
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            float sum = 0.0f;
#pragma unroll
            for (int q = 0; q < KS; ++q) sum += v[j][q];
            emit(rank * kPer + j, sum);
        }
        cluster.sync(); // keep this CTA's partials alive until the cluster has read them
    }
}

} // namespace

bool router_logits_wgmma_fits(int hidden, const std::uint16_t *x, const float *router) {
    return hidden > 0 && hidden % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(router) % 8 == 0 && device_supported();
}

int router_logits_wgmma_splits(int tokens, int hidden, int experts) {
    // Split K while the CTAs fit in one wave and each split keeps >= 512 of K (8 steps).
    const long long tiles = static_cast<long long>(ceil_div(experts, kExpertsPerCta)) * ceil_div(tokens, kTokensPerCta);
    int ks = 1;
    while (ks < kMaxSplits && tiles * ks * 2 <= current_sm_count() && hidden >= 2 * ks * 512) ks *= 2;
    return ks;
}

cudaError_t router_logits_wgmma(const std::uint16_t *x, const float *router, int tokens, int hidden, int experts,
                                float *logits, bool router_bf16, cudaStream_t stream) {
    if (tokens <= 0 || hidden <= 0 || experts <= 0 || x == nullptr || router == nullptr || logits == nullptr ||
        ceil_div(tokens, kTokensPerCta) > 65535 || ceil_div(experts, kExpertsPerCta) > 65535)
        return cudaErrorInvalidValue;
    CUtensorMap map;
    if (const cudaError_t e = make_k_major_map(map, x, tokens, hidden, kTokensPerCta); e != cudaSuccess) return e;
    const int ks = router_logits_wgmma_splits(tokens, hidden, experts);
    const int kchunk = ceil_div(ceil_div(hidden, ks), 64) * 64;
    const dim3 grid(ks, ceil_div(experts, kExpertsPerCta), ceil_div(tokens, kTokensPerCta));
    auto launch = [&]<int KS, int KP>() {
        static const cudaError_t set = cudaFuncSetAttribute(router_logits_wgmma_kernel<KS, KP>,
                                                            cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (set != cudaSuccess) return set;
        return launch_pdl(router_logits_wgmma_kernel<KS, KP>, grid, dim3(kThreads), kSmemBytes, KS, stream, map, router,
                          tokens, hidden, experts, kchunk, logits);
    };
    auto by_splits = [&]<int KP>() {
        switch (ks) {
        case 1:
            return launch.template operator()<1, KP>();
        case 2:
            return launch.template operator()<2, KP>();
        case 4:
            return launch.template operator()<4, KP>();
        default:
            return launch.template operator()<8, KP>();
        }
    };
    return router_bf16 ? by_splits.template operator()<1>() : by_splits.template operator()<3>();
}

} // namespace fp4moe::cuda
