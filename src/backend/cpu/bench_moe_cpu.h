// `fp4moe bench moe` on the CPU: times the whole MoE block (router logits, moe_route, runner) for every
// requested (runner, tactic, T), adds the autotuner's pick, and measures the floor in the same run.
//
// Weights: random NVFP4 (or bf16) expert matrices in a pool of expert slots larger than the last-level cache
// many times over (at least 32 x LLC or one full layer, capped by memory), and layer copies (each with its
// own router, correction bias, hot-expert ranking and offset into the pool) rotated run after run, so a
// small batch pays for its weight reads as in a real model where the other layers run in between.
#pragma once

#include "fp4moe/moe.h"
#include "moe/bench_report.h"

namespace fp4moe::cpu {

/// Runs the benchmark described by `o` (o.desc must validate; o.runners must name CPU runners). Shows a
/// one-line progress on stderr when it is a terminal. Errors: unknown runner (the message lists them),
/// invalid desc, a runner failing.
result<moe_bench_report> run_moe_bench(const moe_bench_options &o);

} // namespace fp4moe::cpu
