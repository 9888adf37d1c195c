// s36 diagnostic (not part of the build): how fast HBM serves cuda.decode's T = 1 weight stream with no math.
// gate_up at T = 1 is 9 experts x `tiles` 16-row tiles x `ksteps` K steps of 512 weight bytes + 64 scale bytes,
// tile-major ([expert][tile][kstep]). Each warp streams its tile's K part through a ring of S bulk-copy stages of U
// K steps (two copies per stage: weights, scales), as the kernel does, but only waits on the stages: the time is the
// memory system's alone. Variants: `tile`, the layout as packed; `kmajor`, the same chunks laid out so that the
// warps' chunk c of every tile is contiguous ([chunk][expert][tile]); `read`, every thread streaming 16-byte loads
// over the same bytes (the best case for reads). Layer copies rotate through a pool 8x the L2. Prints us per layer
// (median of launches timed one by one with events) and GB/s.
// Build: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a stream_pattern.cu -o stream_pattern
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                                     \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

__device__ __forceinline__ std::uint32_t smem_addr(const void *p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint64_t *bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)));
}
__device__ __forceinline__ void mbar_expect_tx(std::uint64_t *bar, std::uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t *bar, std::uint32_t parity) {
    asm volatile(
        "{\n.reg .pred p;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W_%=;\n}\n" ::"r"(
            smem_addr(bar)),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, std::uint32_t bytes, std::uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}

struct shape {
    int experts, tiles, ksteps;
};

// W warps per CTA, KS K parts per tile, U K steps per stage, S stages. kMajor: chunk c of (expert, tile, part) at
// ((c * parts + part) * experts + expert) * tiles + tile, in U-step chunks.
// Strided: the layer's U-step chunks dealt round-robin over every warp of the grid (chunk j to warp j % warps), as a
// grid-stride loop deals 16-byte loads; no warp owns a contiguous run.
template <int W, int U, int S>
__global__ void __launch_bounds__(W * 32, 6)
    stream_strided_kernel(const std::uint8_t *q, const std::uint8_t *sc, shape sh) {
    extern __shared__ __align__(128) std::uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kStage = U * 576;
    std::uint8_t *ring = smem + warp * S * kStage;
    auto *bars = reinterpret_cast<std::uint64_t *>(smem + W * S * kStage) + warp * S;
    if (lane == 0)
        for (int s = 0; s < S; ++s) mbar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    const long long total = static_cast<long long>(sh.experts) * sh.tiles * sh.ksteps / U;
    const long long warps = static_cast<long long>(gridDim.x) * W, me = static_cast<long long>(blockIdx.x) * W + warp;
    const int chunks = static_cast<int>((total - me + warps - 1) / warps);
    auto issue = [&](int c) {
        const int st = c % S;
        const std::size_t j = static_cast<std::size_t>(me + c * warps);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_expect_tx(&bars[st], U * 576);
        bulk_copy(ring + st * kStage, q + j * U * 512, U * 512, &bars[st]);
        bulk_copy(ring + st * kStage + U * 512, sc + j * U * 64, U * 64, &bars[st]);
    };
    if (lane == 0)
        for (int c = 0; c < S && c < chunks; ++c) issue(c);
    for (int c = 0; c < chunks; ++c) {
        mbar_wait(&bars[c % S], static_cast<std::uint32_t>((c / S) & 1));
        __syncwarp();
        if (lane == 0 && c + S < chunks) issue(c + S);
    }
}

template <int W, int KS, int U, int S, bool kMajor, int Wait = 0, bool Late = false>
__global__ void __launch_bounds__(W * 32, 6) stream_kernel(const std::uint8_t *q, const std::uint8_t *sc, shape sh) {
    extern __shared__ __align__(128) std::uint8_t smem[];
    // Wait 1: a PDL link that waits for the previous kernel first (gate_up); 2: after issuing its first stages (down).
    // Late: the next kernel may launch only once this CTA's stream is done (else at its start).
    if constexpr (Wait != 0 && !Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if constexpr (Wait == 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tile = blockIdx.x * (W / KS) + warp / KS, part = warp % KS, expert = blockIdx.y;
    if (tile >= sh.tiles) {
        if constexpr (Wait != 0 && Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        return;
    }
    constexpr int kStage = U * 576;
    std::uint8_t *ring = smem + warp * S * kStage;
    auto *bars = reinterpret_cast<std::uint64_t *>(smem + W * S * kStage) + warp * S;
    if (lane == 0)
        for (int s = 0; s < S; ++s) mbar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    const int k_per = sh.ksteps / KS, chunks = (k_per + U - 1) / U; // a short last chunk where U does not divide
    auto issue = [&](int c) {
        const int st = c % S;
        std::size_t qoff, soff;
        if constexpr (kMajor) {
            const std::size_t idx = ((static_cast<std::size_t>(c) * KS + part) * sh.experts + expert) * sh.tiles + tile;
            qoff = idx * U * 512, soff = idx * U * 64;
        } else {
            const std::size_t ks =
                (static_cast<std::size_t>(expert) * sh.tiles + tile) * sh.ksteps + part * k_per + c * U;
            qoff = ks * 512, soff = ks * 64;
        }
        const int n = min(U, k_per - c * U);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_expect_tx(&bars[st], n * 576);
        bulk_copy(ring + st * kStage, q + qoff, n * 512, &bars[st]);
        bulk_copy(ring + st * kStage + U * 512, sc + soff, n * 64, &bars[st]);
    };
    if (lane == 0)
        for (int c = 0; c < S && c < chunks; ++c) issue(c);
    if constexpr (Wait == 2) asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int c = 0; c < chunks; ++c) {
        mbar_wait(&bars[c % S], static_cast<std::uint32_t>((c / S) & 1));
        __syncwarp();
        if (lane == 0 && c + S < chunks) issue(c + S);
    }
    if constexpr (Wait != 0 && Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void read_kernel(const uint4 *p, std::size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        uint4 v;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p + i));
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

// The same read as a PDL chain link: the next launch may start its CTAs while this one drains.
__global__ void read_kernel_pdl(const uint4 *p, std::size_t n, unsigned *sink) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned acc = 0;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        uint4 v;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p + i));
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

// `bytes` read by one kernel, as a chain of `copies` launches over distinct buffers captured in one graph (with
// PDL if asked): us per launch, median of 20 replays. What a layer's kernel pays to read that many bytes.
double graph_read_us(std::size_t bytes, bool pdl) {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    const int copies = static_cast<int>(std::max<std::size_t>(8, 8ull * p.l2CacheSize / bytes + 1));
    std::uint8_t *buf = nullptr;
    unsigned *sink = nullptr;
    CHECK(cudaMalloc(&buf, bytes * copies));
    CHECK(cudaMalloc(&sink, 4));
    CHECK(cudaMemset(buf, 1, bytes * copies));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < copies; ++c) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(p.multiProcessorCount * 4), cfg.blockDim = dim3(512), cfg.stream = s;
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr, cfg.numAttrs = pdl ? 1 : 0;
        CHECK(cudaLaunchKernelEx(&cfg, read_kernel_pdl, reinterpret_cast<const uint4 *>(buf + c * bytes), bytes / 16,
                                 sink));
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int i = 0; i < 23; ++i) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) us.push_back(ms * 1e3 / copies);
    }
    std::sort(us.begin(), us.end());
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(buf));
    CHECK(cudaFree(sink));
    CHECK(cudaStreamDestroy(s));
    return us[us.size() / 2];
}

template <typename F>
double median_us(F launch, int copies, int iters) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) {
        CHECK(cudaEventRecord(a));
        launch(i % copies);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (i >= copies) us.push_back(ms * 1e3);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

template <int W, int KS, int U, int S, bool kMajor>
void run_pattern(const char *name, const shape &sh, std::uint8_t *q, std::uint8_t *sc, std::size_t qlayer,
                 std::size_t slayer, int copies) {
    constexpr int smem = W * S * (U * 576 + 8);
    CHECK(cudaFuncSetAttribute(stream_kernel<W, KS, U, S, kMajor>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((sh.tiles + W / KS - 1) / (W / KS), sh.experts);
    const double us = median_us(
        [&](int c) { stream_kernel<W, KS, U, S, kMajor><<<grid, W * 32, smem>>>(q + c * qlayer, sc + c * slayer, sh); },
        copies, 200);
    CHECK(cudaGetLastError());
    std::printf("  %-34s %8.2f us %8.1f GB/s (%u CTAs)\n", name, us, (qlayer + slayer) / us / 1e3, grid.x * grid.y);
}

void run_shape(const char *label, shape sh) {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    const std::size_t qlayer = static_cast<std::size_t>(sh.experts) * sh.tiles * sh.ksteps * 512;
    const std::size_t slayer = qlayer / 8;
    const int copies = static_cast<int>(std::max<std::size_t>(4, 8ull * p.l2CacheSize / (qlayer + slayer) + 1));
    std::uint8_t *q = nullptr, *sc = nullptr;
    unsigned *sink = nullptr;
    CHECK(cudaMalloc(&q, qlayer * copies));
    CHECK(cudaMalloc(&sc, slayer * copies));
    CHECK(cudaMalloc(&sink, 4));
    CHECK(cudaMemset(q, 1, qlayer * copies));
    CHECK(cudaMemset(sc, 1, slayer * copies));
    std::printf("%s: %d experts x %d tiles x %d ksteps = %.1f MB per layer, %d copies\n", label, sh.experts, sh.tiles,
                sh.ksteps, (qlayer + slayer) / 1e6, copies);
    run_pattern<4, 2, 4, 2, false>("tile-major, 4 warps, ksplit 2, 2x4", sh, q, sc, qlayer, slayer, copies);
    run_pattern<4, 2, 4, 2, true>("k-major,    4 warps, ksplit 2, 2x4", sh, q, sc, qlayer, slayer, copies);
    run_pattern<4, 1, 4, 2, false>("tile-major, 4 warps, ksplit 1, 2x4", sh, q, sc, qlayer, slayer, copies);
    run_pattern<4, 1, 4, 2, true>("k-major,    4 warps, ksplit 1, 2x4", sh, q, sc, qlayer, slayer, copies);
    run_pattern<4, 2, 4, 4, false>("tile-major, 4 warps, ksplit 2, 4x4", sh, q, sc, qlayer, slayer, copies);
    run_pattern<4, 2, 2, 4, false>("tile-major, 4 warps, ksplit 2, 4x2", sh, q, sc, qlayer, slayer, copies);
    const double us = median_us(
        [&](int c) {
            read_kernel<<<p.multiProcessorCount * 4, 512>>>(reinterpret_cast<const uint4 *>(q + c * qlayer),
                                                            qlayer / 16, sink);
        },
        copies, 200);
    std::printf("  %-34s %8.2f us %8.1f GB/s (weights only, %.1f MB)\n", "16-byte loads, every thread", us,
                qlayer / us / 1e3, qlayer / 1e6);
    CHECK(cudaFree(q));
    CHECK(cudaFree(sc));
    CHECK(cudaFree(sink));
}

// One pattern kernel per layer copy in a graph (no PDL): us per kernel. strided: stream_strided_kernel on 792 CTAs.
template <bool Strided>
void graph_pattern(const char *label, shape sh) {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    const std::size_t qb = static_cast<std::size_t>(sh.experts) * sh.tiles * sh.ksteps * 512, layer = qb + qb / 8;
    const int copies = static_cast<int>(std::max<std::size_t>(8, 8ull * p.l2CacheSize / layer + 1));
    std::uint8_t *buf = nullptr;
    CHECK(cudaMalloc(&buf, layer * copies));
    CHECK(cudaMemset(buf, 1, layer * copies));
    constexpr int smem = 4 * 2 * (4 * 576 + 8);
    CHECK(cudaFuncSetAttribute(stream_strided_kernel<4, 4, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < copies; ++c) {
        const std::uint8_t *base = buf + c * layer;
        if constexpr (Strided)
            stream_strided_kernel<4, 4, 2><<<p.multiProcessorCount * 6, 128, smem, s>>>(base, base + qb, sh);
        else
            stream_kernel<4, 2, 4, 2, false>
                <<<dim3((sh.tiles + 1) / 2, sh.experts), 128, smem, s>>>(base, base + qb, sh);
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int i = 0; i < 23; ++i) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) us.push_back(ms * 1e3 / copies);
    }
    std::sort(us.begin(), us.end());
    std::printf("  %-44s %8.2f us for %.1f MB (%.1f GB/s)\n", label, us[us.size() / 2], layer / 1e6,
                layer / us[us.size() / 2] / 1e3);
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(buf));
    CHECK(cudaStreamDestroy(s));
}

// The T = 1 layer's two weight streams without math: gate_up's grid (4 warps, ksplit 2, 2x4 ring, 6 CTAs per SM at
// T = 1) then down's (ksplit 1), PDL-chained per layer copy in one graph, as the layer runs them: us per layer.
// mode 0: PDL, down issues its first stages before its wait (the layer's form); 1: PDL, down waits first; 2: no PDL
// (stream order); 3: gate_up alone per copy (no down), PDL; 4: down alone per copy, PDL; 5: gate_up launched in plain
// stream order, down with PDL; 6: PDL, each CTA allows the next kernel's launch only after its stream (not at its
// start); 7: PDL, gate_up releases at its start (down's CTAs then issue their first copies while it runs), down at its
// end (the next layer's gate_up CTAs do not take slots while down's are still to come).
void run_chain(const char *label, shape gu, shape dn, int mode = 0) {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    const std::size_t gq = static_cast<std::size_t>(gu.experts) * gu.tiles * gu.ksteps * 512, gs = gq / 8;
    const std::size_t dq = static_cast<std::size_t>(dn.experts) * dn.tiles * dn.ksteps * 512, ds = dq / 8;
    const int copies = static_cast<int>(std::max<std::size_t>(8, 8ull * p.l2CacheSize / (gq + gs + dq + ds) + 1));
    std::uint8_t *buf = nullptr;
    const std::size_t layer = gq + gs + dq + ds;
    CHECK(cudaMalloc(&buf, layer * copies));
    CHECK(cudaMemset(buf, 1, layer * copies));
    constexpr int smem = 4 * 2 * (4 * 576 + 8);
    auto *k_gu = mode == 6 ? stream_kernel<4, 2, 4, 2, false, 1, true> : stream_kernel<4, 2, 4, 2, false, 1>;
    auto *k_dn = mode == 1   ? stream_kernel<4, 1, 4, 2, false, 1>
                 : mode >= 6 ? stream_kernel<4, 1, 4, 2, false, 2, true>
                             : stream_kernel<4, 1, 4, 2, false, 2>;
    CHECK(cudaFuncSetAttribute(k_gu, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CHECK(cudaFuncSetAttribute(k_dn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    auto launch = [&](auto *k, shape sh, const std::uint8_t *q, const std::uint8_t *sc, int per_cta) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3((sh.tiles + per_cta - 1) / per_cta, sh.experts), cfg.blockDim = dim3(128);
        cfg.dynamicSmemBytes = smem, cfg.stream = s;
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr, cfg.numAttrs = mode == 2 || (mode == 5 && k == k_gu) ? 0 : 1;
        CHECK(cudaLaunchKernelEx(&cfg, k, q, sc, sh));
    };
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < copies; ++c) {
        const std::uint8_t *base = buf + c * layer;
        if (mode != 4) launch(k_gu, gu, base, base + gq, 2);
        if (mode != 3) launch(k_dn, dn, base + gq + gs, base + gq + gs + dq, 4);
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int i = 0; i < 23; ++i) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) us.push_back(ms * 1e3 / copies);
    }
    std::sort(us.begin(), us.end());
    const char *modes[] = {"PDL, down issues before its wait",
                           "PDL, down waits first",
                           "no PDL",
                           "gate_up only, PDL",
                           "down only, PDL",
                           "gate_up plain, down PDL",
                           "PDL, both release at their end",
                           "PDL, down releases at its end"};
    std::printf("  %-44s %-34s %8.2f us per layer\n", label, modes[mode], us[us.size() / 2]);
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(buf));
    CHECK(cudaStreamDestroy(s));
}

int main() {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    std::printf("%s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    run_shape("glm-4.5-air gate_up T=1", {9, 176, 64});
    run_shape("glm-4.5-air down T=1", {9, 256, 22 + 2}); // K = 1408 -> 22 steps; 24 so that 2 parts x 3 chunks
    run_shape("deepseek-v3 gate_up T=1", {9, 256, 112});
    run_shape("qwen3-30b-a3b gate_up T=1", {8, 96, 32});
    run_shape("glm-4.5-air gate_up T=4 (33 groups)", {33, 176, 64});
    // Whole T = 1 layers' expert bytes (bench moe's `bytes` less router and activations) and more, in one kernel.
    std::printf("one stream kernel per layer copy in a graph: tiles owned by warps (ksplit 2, 2x4, 6 CTAs per SM) "
                "or chunks dealt round-robin (792 CTAs of 4 warps):\n");
    graph_pattern<false>("glm-4.5-air gate_up T=1, owned", {9, 176, 64});
    graph_pattern<true>("glm-4.5-air gate_up T=1, round-robin", {9, 176, 64});
    graph_pattern<false>("glm-4.5-air down T=1 (24 ksteps), owned", {9, 256, 24});
    graph_pattern<true>("glm-4.5-air down T=1 (24 ksteps), round-robin", {9, 256, 24});
    graph_pattern<false>("deepseek-v3 gate_up T=1, owned", {9, 256, 112});
    graph_pattern<true>("deepseek-v3 gate_up T=1, round-robin", {9, 256, 112});
    graph_pattern<false>("qwen3-30b-a3b gate_up T=1, owned", {8, 96, 32});
    graph_pattern<true>("qwen3-30b-a3b gate_up T=1, round-robin", {8, 96, 32});
    std::printf("the T = 1 layer's gate_up then down streams, no math, PDL chain in a graph:\n");
    for (int mode : {0, 2, 5, 6, 7}) {
        run_chain("glm-4.5-air (9x176x64, 9x256x22)", {9, 176, 64}, {9, 256, 22}, mode);
        run_chain("deepseek-v3 (9x256x112, 9x448x32)", {9, 256, 112}, {9, 448, 32}, mode);
        run_chain("qwen3-30b-a3b (8x96x32, 8x128x12)", {8, 96, 32}, {8, 128, 12}, mode);
        run_chain("glm-4.5-air T=4 (33x176x64, 33x256x22)", {33, 176, 64}, {33, 256, 22}, mode);
    }
    std::printf("one read kernel per layer copy, graph of copies (us per kernel; GB/s):\n");
    for (double mb : {22.3, 58.4, 87.6, 230.0, 299.0, 1000.0, 4000.0}) {
        const std::size_t bytes = static_cast<std::size_t>(mb * 1e6) / 4096 * 4096;
        const double plain = graph_read_us(bytes, false), pdl = graph_read_us(bytes, true);
        std::printf("  %7.1f MB: %8.2f us (%6.1f GB/s) plain, %8.2f us (%6.1f GB/s) PDL\n", mb, plain,
                    bytes / plain / 1e3, pdl, bytes / pdl / 1e3);
    }
    return 0;
}
