// Measurements of this CPU for benchmark floors (read bandwidth, fp32 FMA peak, last-level cache) and the
// threaded router used by `fp4moe bench moe`. All rates use decimal units (GB = 1e9 B, TFLOP = 1e12 FLOP).
#pragma once

#include "core/thread_pool.h"
#include "fp4moe/moe.h"

#include <cstdint>
#include <string>

namespace fp4moe::cpu {

/// Size of the last-level cache: /sys/devices/system/cpu/cpu0/cache/index3/size, else 32 MiB.
std::uint64_t llc_bytes();

/// MemAvailable from /proc/meminfo in bytes, 0 when unreadable.
std::uint64_t mem_available_bytes();

/// Multi-threaded streaming read bandwidth in GB/s: every participant of `pool` sums its slice of a buffer
/// of max(8 * LLC, 256 MiB) (written before timing so its pages exist); best of `passes` passes.
double measure_read_bandwidth_gbps(thread_pool &pool, int passes = 5);

struct peak_result {
    double tflops = 0;
    std::string kind; ///< "fp32 FMA avx512", "fp32 FMA avx2" or "fp32 scalar"
};

/// fp32 multiply-add rate of all participants of `pool`: independent FMA chains in registers (AVX-512 or
/// AVX2+FMA when the CPU has them, checked with __builtin_cpu_supports; a scalar loop otherwise); best of 3.
peak_result measure_fp32_peak(thread_pool &pool);

/// Router logits like cpu::router_logits (logits[t, e] = sum_h float(x[t, h]) * router[e, h]), in parallel
/// over (token block, expert block) items with AVX2 dot products when available. The summation order
/// differs from router_logits (results agree to fp32 rounding). `xf` is scratch of tokens * hidden floats.
void router_logits_parallel(thread_pool &pool, const moe_desc &d, const bf16_t *x, std::int64_t tokens,
                            const float *router, float *xf, float *logits);

} // namespace fp4moe::cpu
