// `fp4moe bench moe --device cuda` (bench_moe_cuda.h).
#include "bench_moe_cuda.h"
#include "device.h"

#include "moe/autotune.h"
#include "moe_gpu.h"

#include "kernels/random_fill.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <vector>

namespace fp4moe::cuda {
namespace {

#define BENCH_CHECK(call)                                                                                              \
    do {                                                                                                               \
        if (cudaError_t e_ = (call); e_ != cudaSuccess)                                                                \
            return status{status_code::internal, fmt::format("{}: {}", #call, cudaGetErrorString(e_))};                \
    } while (0)

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Device-to-device copy of 2 x 1 GiB: bytes read + written over the median time.
result<double> measure_bandwidth_gbps(cudaStream_t s) {
    const std::size_t n = std::size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    BENCH_CHECK(cudaMalloc(&a, n));
    BENCH_CHECK(cudaMalloc(&b, n));
    BENCH_CHECK(fill_random_bytes(static_cast<std::uint8_t *>(a), n, 7, 0, 255, s));
    cudaEvent_t e0, e1;
    BENCH_CHECK(cudaEventCreate(&e0));
    BENCH_CHECK(cudaEventCreate(&e1));
    std::vector<double> ms;
    for (int i = 0; i < 12; ++i) {
        BENCH_CHECK(cudaEventRecord(e0, s));
        BENCH_CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        BENCH_CHECK(cudaEventRecord(e1, s));
        BENCH_CHECK(cudaEventSynchronize(e1));
        float t = 0;
        BENCH_CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= 2) ms.push_back(t);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1), cudaFree(a), cudaFree(b);
    return 2.0 * double(n) / (median(ms) * 1e-3) / 1e9;
}

// bf16 GEMM 8192^3 through cuBLAS, loaded at run time (no link-time dependency: the binary runs where cuBLAS
// is absent). Returns 0 when it cannot be loaded; `kind` says what was measured.
//
// Timed under load, as the rows are: the H200 holds its clock only for bursts under its 700 W limit (ten GEMMs
// from idle ran at 776-804 TFLOP/s; the same GEMM after 500 ms of load at 672-689), and every row of the bench
// is a median over hundreds of milliseconds of replays. So the GEMM first runs untimed for kHoldMs, then
// the rate is the median of 20 rounds of 8 back-to-back GEMMs. The burst figure (3 + 7 from idle) goes into
// `kind`, beside it, so a reader can compare either.
double measure_bf16_peak_tflops(cudaStream_t s, std::string &kind) {
    void *lib = nullptr;
    for (const char *name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
        kind = "unmeasured (libcublas not found: floor = bandwidth term)";
        return 0.0;
    }
    using create_t = cublasStatus_t (*)(cublasHandle_t *);
    using destroy_t = cublasStatus_t (*)(cublasHandle_t);
    using stream_t = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
    using gemm_t = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                      const void *, cudaDataType, int, const void *, cudaDataType, int, const void *,
                                      void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    auto create = reinterpret_cast<create_t>(dlsym(lib, "cublasCreate_v2"));
    auto destroy = reinterpret_cast<destroy_t>(dlsym(lib, "cublasDestroy_v2"));
    auto set_stream = reinterpret_cast<stream_t>(dlsym(lib, "cublasSetStream_v2"));
    auto gemm = reinterpret_cast<gemm_t>(dlsym(lib, "cublasGemmEx"));
    cublasHandle_t h = nullptr;
    if (!create || !destroy || !set_stream || !gemm || create(&h) != CUBLAS_STATUS_SUCCESS) {
        kind = "unmeasured (libcublas unusable)";
        return 0.0;
    }
    set_stream(h, s);
    const int n = 8192;
    constexpr double kHoldMs = 500;
    constexpr int kRounds = 20, kPerRound = 8;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    double tflops = 0.0, burst = 0.0;
    if (cudaMalloc(&a, 2ull * n * n) == cudaSuccess && cudaMalloc(&b, 2ull * n * n) == cudaSuccess &&
        cudaMalloc(&c, 2ull * n * n) == cudaSuccess) {
        fill_random_bf16(static_cast<std::uint16_t *>(a), std::size_t(n) * n, 11, 1.0f, s);
        fill_random_bf16(static_cast<std::uint16_t *>(b), std::size_t(n) * n, 12, 1.0f, s);
        const float one = 1.0f, zero = 0.0f;
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        bool ok = true;
        auto timed = [&](int gemms) { // ms of `gemms` back-to-back GEMMs, -1 on failure
            cudaEventRecord(e0, s);
            for (int i = 0; i < gemms && ok; ++i)
                ok = gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c,
                          CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            return ok ? double(t) : -1.0;
        };
        const double flop = 2.0 * n * double(n) * n;
        std::vector<double> ms;
        for (int i = 0; i < 10 && ok; ++i)
            if (const double t = timed(1); i >= 3) ms.push_back(t);
        if (ok) burst = flop / (median(ms) * 1e-3) / 1e12;
        for (double held = 0; ok && held < kHoldMs;) held += timed(kPerRound);
        ms.clear();
        for (int i = 0; i < kRounds && ok; ++i) ms.push_back(timed(kPerRound) / kPerRound);
        if (ok) tflops = flop / (median(ms) * 1e-3) / 1e12;
        cudaEventDestroy(e0), cudaEventDestroy(e1);
    }
    cudaFree(a), cudaFree(b), cudaFree(c);
    destroy(h);
    kind = tflops > 0 ? fmt::format("bf16 cuBLAS GEMM 8192^3 under load: median of {} x {} after {:.0f} ms; "
                                    "from idle {:.1f}",
                                    kRounds, kPerRound, kHoldMs, burst)
                      : "unmeasured (cuBLAS GEMM failed)";
    return tflops;
}

// One layer copy: its weights, input, output and workspace.
struct layer_copy {
    std::unique_ptr<gpu_moe_weights> w;
    void *x = nullptr, *out = nullptr, *ws = nullptr;
};

class bench_env {
public:
    bench_env(const moe_desc &d, std::int64_t max_tokens) : d_(d), max_tokens_(max_tokens) {}
    ~bench_env() {
        for (auto &c : copies_) cudaFree(c.x), cudaFree(c.out), cudaFree(c.ws);
        if (e0_) cudaEventDestroy(e0_), cudaEventDestroy(e1_);
        if (stream_) cudaStreamDestroy(stream_);
    }

    status init(std::uint64_t seed, std::string &pool_text) {
        BENCH_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        BENCH_CHECK(cudaEventCreate(&e0_));
        BENCH_CHECK(cudaEventCreate(&e1_));
        cudaDeviceProp p{};
        BENCH_CHECK(cudaGetDeviceProperties(&p, 0));
        std::size_t free_b = 0, total_b = 0;
        BENCH_CHECK(cudaMemGetInfo(&free_b, &total_b));
        auto first = gpu_moe_weights::random(d_, seed, stream_);
        if (!first.ok()) return first.get_status();
        const std::size_t layer = first.value()->bytes();
        // Enough copies that they are 8x the L2 (and at least 2), within a third of free memory.
        std::size_t want = std::max<std::size_t>(2, (8ull * p.l2CacheSize + layer - 1) / layer);
        want = std::min<std::size_t>(want, std::max<std::size_t>(2, free_b / 3 / layer));
        copies_.push_back({std::move(first.value())});
        for (std::size_t c = 1; c < want; ++c) {
            auto w = gpu_moe_weights::random(d_, seed + 1000 * c, stream_);
            if (!w.ok()) return w.get_status();
            copies_.push_back({std::move(w.value())});
        }
        const std::size_t ws = gpu_moe_forward_workspace(d_, max_tokens_);
        for (std::size_t c = 0; c < copies_.size(); ++c) {
            auto &cp = copies_[c];
            BENCH_CHECK(cudaMalloc(&cp.x, 2 * max_tokens_ * d_.hidden));
            BENCH_CHECK(cudaMalloc(&cp.out, 2 * max_tokens_ * d_.hidden));
            BENCH_CHECK(cudaMalloc(&cp.ws, ws));
            BENCH_CHECK(fill_random_bf16(static_cast<std::uint16_t *>(cp.x), max_tokens_ * d_.hidden, seed + 7 * c + 3,
                                         1.0f, stream_));
        }
        BENCH_CHECK(cudaStreamSynchronize(stream_));
        pool_text = fmt::format(
            "{} layer copies of {:.2f} GB ({:.1f}x the {} MB L2), random NVFP4 generated on the device", copies_.size(),
            layer / 1e9, double(layer * copies_.size()) / p.l2CacheSize, p.l2CacheSize >> 20);
        return status::success();
    }

    struct timing {
        double us = 0, bytes = 0;
        int samples = 0;
    };

    // The SM clock drifts by several percent over a run (sustained HBM load, power limit; we may not pin it),
    // and a slow stretch can cover a whole measurement: every row is the better of two, each a per-layer
    // median over `iters` replays.
    result<timing> measure_best(std::int64_t tokens, gpu_tactic t, int warmup, int iters) {
        auto a = measure(tokens, t, warmup, iters);
        if (!a.ok()) return a;
        auto b = measure(tokens, t, warmup, iters);
        if (!b.ok()) return b;
        timing best = b.value().us < a.value().us ? b.value() : a.value();
        best.samples = a.value().samples + b.value().samples;
        return best;
    }

    // Captures one graph of a forward per copy, replays it `iters` times; per-layer median.
    result<timing> measure(std::int64_t tokens, gpu_tactic t, int warmup, int iters) {
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        BENCH_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        status st = status::success();
        for (auto &c : copies_) {
            st = gpu_moe_forward(d_, *c.w, static_cast<const bf16_t *>(c.x), static_cast<bf16_t *>(c.out), tokens,
                                 max_tokens_, c.ws, t, stream_);
            if (!st.ok()) break;
        }
        BENCH_CHECK(cudaStreamEndCapture(stream_, &g));
        if (!st.ok()) return cudaGraphDestroy(g), st;
        BENCH_CHECK(cudaGraphInstantiate(&ge, g, 0));
        std::vector<double> us;
        for (int i = 0; i < warmup + iters; ++i) {
            BENCH_CHECK(cudaEventRecord(e0_, stream_));
            BENCH_CHECK(cudaGraphLaunch(ge, stream_));
            BENCH_CHECK(cudaEventRecord(e1_, stream_));
            BENCH_CHECK(cudaEventSynchronize(e1_));
            float ms = 0;
            BENCH_CHECK(cudaEventElapsedTime(&ms, e0_, e1_));
            if (i >= warmup) us.push_back(1e3 * ms / copies_.size());
        }
        cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
        timing tm;
        tm.us = median(us), tm.samples = static_cast<int>(us.size());
        // Bytes: each copy's touched experts after the replays (routing is deterministic per copy).
        for (auto &c : copies_) {
            auto counts = gpu_moe_counts(d_, max_tokens_, c.ws, stream_);
            if (!counts.ok()) return counts.get_status();
            const auto touched =
                std::count_if(counts.value().begin(), counts.value().end(), [](int n) { return n > 0; });
            tm.bytes += moe_block_cost(d_, tokens, touched).bytes / copies_.size();
        }
        return tm;
    }

private:
    moe_desc d_;
    std::int64_t max_tokens_;
    std::vector<layer_copy> copies_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t e0_ = nullptr, e1_ = nullptr;
};

} // namespace

result<moe_bench_report> run_moe_bench_cuda(const moe_bench_options &o) {
    const moe_desc &d = o.desc;
    if (auto st = d.validate(); !st.ok()) return st;
    if (device_count() == 0) return status{status_code::unsupported, "bench moe --device cuda: no CUDA device"};
    // The runners this device runs: cuda.decode everywhere, cuda.grouped on sm_90 (Hopper).
    moe_device dev;
    dev.cuda = true, dev.cuda_device = 0;
    std::vector<std::pair<gpu_runner, std::unique_ptr<moe_runner>>> runners;
    for (gpu_runner k : {gpu_runner::decode, gpu_runner::grouped}) {
        auto r = make_gpu_runner(k);
        const bool wanted =
            o.runners.empty() || std::find(o.runners.begin(), o.runners.end(), r->name()) != o.runners.end();
        if (wanted && r->supports(d, dev)) runners.emplace_back(k, std::move(r));
    }
    for (const auto &name : o.runners)
        if (name != "cuda.decode" && name != "cuda.grouped")
            return status{status_code::invalid_argument,
                          fmt::format("unknown CUDA runner '{}' (available: cuda.decode, cuda.grouped)", name)};
    if (runners.empty())
        return status{status_code::unsupported,
                      fmt::format("no CUDA runner supports {} on this device", d.to_string())};
    auto kind_of = [&](const moe_runner &r) {
        for (const auto &[k, p] : runners)
            if (p.get() == &r || p->name() == r.name()) return k;
        return gpu_runner::decode;
    };
    if (o.tokens.empty()) return status{status_code::invalid_argument, "no token counts given"};
    {
        std::vector<std::pair<std::string, std::vector<moe_tactic>>> offered;
        for (const auto &[k, r] : runners) offered.emplace_back(std::string(r->name()), r->tactics(d));
        if (auto st = moe_bench_check_tactics(o, offered); !st.ok()) return st;
    }

    moe_bench_report rep;
    rep.meta = moe_bench_meta_from(o);
    auto &m = rep.meta;
    m.device = device_description(0);
    dev.name = m.device;
    const std::vector<std::int64_t> tokens = moe_bench_token_list(o);
    bench_env env(d, tokens.back());
    if (auto st = env.init(o.seed, m.pool); !st.ok()) return st;
    cudaStream_t s = nullptr;
    BENCH_CHECK(cudaStreamCreate(&s));
    auto bw = measure_bandwidth_gbps(s);
    if (!bw.ok()) return bw.get_status();
    m.bandwidth_gbps = bw.value();
    m.peak_tflops = measure_bf16_peak_tflops(s, m.peak_kind);
    cudaStreamDestroy(s);

    int driver = 0;
    cudaDriverGetVersion(&driver);
    moe_tune_target target{dev, m.device, fmt::format("{}", driver)};
    // The tuner's timer: a short first look (3 replays); a candidate 25 % slower than the best so far stops
    // there (with two runners and 65 tactics most candidates are far off at any T: cuda.decode takes 10x
    // cuda.grouped's time at T = 16384), the others get the better of two full medians.
    moe_timer timer = [&](const moe_desc &, const moe_runner &r, const moe_tactic &t, std::int64_t tok,
                          double best_us) -> result<double> {
        const gpu_tactic gt{kind_of(r), t.id};
        auto look = env.measure(tok, gt, 1, 3);
        if (!look.ok()) return look.get_status();
        if (look.value().us > 1.25 * best_us) return look.value().us;
        auto tm = env.measure_best(tok, gt, 2, 10);
        if (!tm.ok()) return tm.get_status();
        return tm.value().us;
    };
    moe_autotune_options topts = moe_autotune_options_from_env();
    if (!o.moe_runner.empty()) topts.runner = o.moe_runner;
    // cuda.grouped first: at large T it sets a low best time early, so the slow candidates stop after a look.
    std::vector<moe_candidate> entries;
    for (auto it = runners.rbegin(); it != runners.rend(); ++it) entries.push_back({it->second.get(), true});
    moe_autotuner tuner(entries, target, timer, topts);

    for (std::int64_t T : tokens) {
        const std::size_t first = rep.rows.size();
        for (const auto &[kind, runner] : runners) {
            for (const auto &t : moe_bench_tactics(runner->tactics(d), o)) {
                moe_bench_row row{std::string(runner->name()), t.id, t.name, o.shape_name, T};
                auto tm = env.measure_best(T, {kind, t.id}, o.warmup, std::max(o.iters, 20));
                if (!tm.ok()) return tm.get_status();
                row.us = tm.value().us, row.samples = tm.value().samples, row.bytes = tm.value().bytes;
                row.flops = moe_block_cost(d, T, 0).flops;
                moe_bench_fill_rates(row, m.bandwidth_gbps, m.peak_tflops);
                rep.rows.push_back(row);
            }
        }
        if (!o.auto_row) continue;
        auto choice = tuner.choose(d, T);
        moe_bench_row row{"auto", 0, "", o.shape_name, T};
        if (!choice.ok()) {
            row.skipped = choice.get_status().message();
            rep.rows.push_back(row);
            continue;
        }
        row.tactic_id = choice.value().tactic.id;
        row.tactic = fmt::format("{} [{}]", choice.value().runner->name(), choice.value().tactic.name);
        auto tm =
            env.measure_best(T, {kind_of(*choice.value().runner), row.tactic_id}, o.warmup, std::max(o.iters, 20));
        if (!tm.ok()) return tm.get_status();
        row.us = tm.value().us, row.samples = tm.value().samples, row.bytes = tm.value().bytes;
        row.flops = moe_block_cost(d, T, 0).flops;
        moe_bench_fill_rates(row, m.bandwidth_gbps, m.peak_tflops);
        double best = row.us;
        for (std::size_t i = first; i < rep.rows.size(); ++i) best = std::min(best, rep.rows[i].us);
        row.regret = row.us / best;
        rep.rows.push_back(row);
    }
    return rep;
}

} // namespace fp4moe::cuda
