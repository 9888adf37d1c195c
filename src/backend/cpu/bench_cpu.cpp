// NOTE: the SIMD loops are compiled with per-function target attributes and picked at run time with
// __builtin_cpu_supports, so the binary still runs on a CPU without AVX2.
#include "backend/cpu/bench_cpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FP4MOE_BENCH_X86 1
#endif

namespace fp4moe::cpu {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t parse_size(const std::string &s) {
    std::size_t pos = 0;
    std::uint64_t v = std::stoull(s, &pos);
    const char unit = pos < s.size() ? s[pos] : ' ';
    return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

bool has_avx2() {
#ifdef FP4MOE_BENCH_X86
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool has_avx512() {
#ifdef FP4MOE_BENCH_X86
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

constexpr std::int64_t kPeakIters = 1 << 22;

float peak_scalar(float seed) {
    float a[8];
    for (int i = 0; i < 8; ++i) a[i] = seed + float(i);
    const float m = 0.999999f, c = 1e-7f;
    for (std::int64_t it = 0; it < kPeakIters / 8; ++it)
        for (float &v : a) v = v * m + c;
    float s = 0;
    for (float v : a) s += v;
    return s;
}

#ifdef FP4MOE_BENCH_X86
// 12 independent chains hide the FMA latency (4-5 cycles) on two FMA ports.
__attribute__((target("avx2,fma"))) float peak_avx2(float seed) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (std::int64_t it = 0; it < kPeakIters; ++it)
        for (auto &a : acc) a = _mm256_fmadd_ps(a, m, c);
    __m256 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f"))) float peak_avx512(float seed) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (std::int64_t it = 0; it < kPeakIters; ++it)
        for (auto &a : acc) a = _mm512_fmadd_ps(a, m, c);
    __m512 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
    alignas(64) float out[16]; // NOTE: not _mm512_reduce_add_ps: GCC 12 warns inside it (-Wuninitialized)
    _mm512_store_ps(out, s);
    return out[0];
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float *a, const float *b, std::int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    std::int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    float r = 0;
    for (float v : lanes) r += v;
    for (; i < n; ++i) r += a[i] * b[i];
    return r;
}
#endif

float dot_scalar(const float *a, const float *b, std::int64_t n) {
    float s[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
    float r = 0;
    for (float v : s) r += v;
    for (; i < n; ++i) r += a[i] * b[i];
    return r;
}

} // namespace

std::uint64_t llc_bytes() {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
    std::string s;
    if (in >> s) try {
            const std::uint64_t v = parse_size(s);
            if (v > 0) return v;
        } catch (const std::exception &) {
        }
    return 32ull << 20;
}

std::uint64_t mem_available_bytes() {
    std::ifstream in("/proc/meminfo");
    for (std::string key; in >> key;) {
        std::uint64_t kb = 0;
        in >> kb;
        if (key == "MemAvailable:") return kb << 10;
        in.ignore(256, '\n');
    }
    return 0;
}

double measure_read_bandwidth_gbps(thread_pool &pool, int passes) {
    const std::size_t words = std::max<std::uint64_t>(8 * llc_bytes(), 256ull << 20) / sizeof(std::uint64_t);
    std::unique_ptr<std::uint64_t[]> buf(new std::uint64_t[words]);
    pool.parallel_for(static_cast<std::int64_t>(words), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) buf[i] = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    });
    std::atomic<std::uint64_t> sink{0};
    double best = 0;
    for (int p = 0; p < passes; ++p) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(static_cast<std::int64_t>(words), [&](std::int64_t b, std::int64_t e) {
            std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            std::int64_t i = b;
            for (; i + 4 <= e; i += 4) s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
            for (; i < e; ++i) s0 += buf[i];
            sink += s0 ^ s1 ^ s2 ^ s3;
        });
        best = std::max(best, static_cast<double>(words * sizeof(std::uint64_t)) / seconds_since(t0) / 1e9);
    }
    return sink.load() == 42 ? best * (1 + 1e-12) : best; // keep the sums alive
}

peak_result measure_fp32_peak(thread_pool &pool) {
    float (*fn)(float) = peak_scalar;
    double flops_per_call = 2.0 * kPeakIters; // 8 chains x kPeakIters/8 iterations x 1 FMA
    peak_result r{0, "fp32 scalar"};
#ifdef FP4MOE_BENCH_X86
    if (has_avx512()) {
        fn = peak_avx512, flops_per_call = 2.0 * 16 * 12 * kPeakIters, r.kind = "fp32 FMA avx512";
    } else if (has_avx2()) {
        fn = peak_avx2, flops_per_call = 2.0 * 8 * 12 * kPeakIters, r.kind = "fp32 FMA avx2";
    }
#endif
    const int n = pool.size();
    std::vector<float> out(n);
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) out[i] = fn(1.0f + float(i));
        });
        r.tflops = std::max(r.tflops, flops_per_call * n / seconds_since(t0) / 1e12);
    }
    return r;
}

void router_logits_parallel(thread_pool &pool, const moe_desc &d, const bf16_t *x, std::int64_t tokens,
                            const float *router, float *xf, float *logits) {
    const std::int64_t H = d.hidden, E = d.experts;
    pool.parallel_for(tokens * H, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) xf[i] = bf16_to_float(x[i]);
    });
    // Items of 16 tokens x 16 experts: both operand blocks stay in L2 while the item runs.
    constexpr std::int64_t kTok = 16, kExp = 16;
    const std::int64_t tb = (tokens + kTok - 1) / kTok, eb = (E + kExp - 1) / kExp;
    float (*dot)(const float *, const float *, std::int64_t) = dot_scalar;
#ifdef FP4MOE_BENCH_X86
    if (has_avx2()) dot = dot_avx2;
#endif
    pool.parallel_for(tb * eb, [&](std::int64_t b, std::int64_t end) {
        for (std::int64_t item = b; item < end; ++item) {
            const std::int64_t t0 = (item / eb) * kTok, e0 = (item % eb) * kExp;
            for (std::int64_t ex = e0; ex < std::min(E, e0 + kExp); ++ex)
                for (std::int64_t t = t0; t < std::min(tokens, t0 + kTok); ++t)
                    logits[t * E + ex] = dot(xf + t * H, router + ex * H, H);
        }
    });
}

} // namespace fp4moe::cpu
