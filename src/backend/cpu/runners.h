// The CPU MoE runners and the CPU MoE layer (router -> route -> plan -> runner).
#pragma once

#include "fp4moe/moe.h"

#include <memory>
#include <vector>

namespace fp4moe::cpu {

/// `cpu.ref`: the oracle. Dequantizes each weight row exactly (e2m1 x e4m3, global scale applied after the
/// dot product), accumulates in fp32 or, with `fp64`, in double. Single-threaded and simple on purpose.
std::unique_ptr<moe_runner> make_ref_runner(bool fp64 = false);

/// `cpu.fast`: multi-threaded, SIMD (AVX-512 / AVX2 / portable, picked at run time) NVFP4 and bf16 runner
/// (src/backend/cpu/moe_fast.cpp). Owns a thread pool of `threads` participants (0: all hardware threads),
/// created on the first run; `moe_device::threads` > 0 caps the participants of one run. Results do not
/// depend on the thread count. run() may be called concurrently; runs then take turns on the pool.
/// Tactics: 0 = best ISA with automatic block size; the others fix (ISA, rows per work item).
std::unique_ptr<moe_runner> make_fast_runner(int threads = 0);

/// A device description of this machine's CPU ("cpu", all hardware threads unless `threads` > 0).
moe_device cpu_device(int threads = 0);

/// Router logits on the CPU: logits[t, e] = sum_h float(x[t, h]) * router[e, h], fp32.
void router_logits(const moe_desc &d, const bf16_t *x, std::int64_t tokens, const float *router, float *logits);

} // namespace fp4moe::cpu
