// The CPU MoE runners and the CPU MoE layer (router -> route -> plan -> runner).
#pragma once

#include "fp4moe/moe.h"

#include <memory>

namespace fp4moe::cpu {

/// `cpu.ref`: the oracle. Dequantizes each weight row exactly (e2m1 x e4m3, global scale applied after the
/// dot product), accumulates in fp32 or, with `fp64`, in double. Single-threaded and simple on purpose.
std::unique_ptr<moe_runner> make_ref_runner(bool fp64 = false);

/// A device description of this machine's CPU ("cpu", all hardware threads unless `threads` > 0).
moe_device cpu_device(int threads = 0);

/// Router logits on the CPU: logits[t, e] = sum_h float(x[t, h]) * router[e, h], fp32.
void router_logits(const moe_desc &d, const bf16_t *x, std::int64_t tokens, const float *router, float *logits);

} // namespace fp4moe::cpu
