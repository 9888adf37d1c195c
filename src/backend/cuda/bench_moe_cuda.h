// `fp4moe bench moe --device cuda`: the whole MoE layer on the GPU (router, top-k, plan, cuda.decode or
// cuda.grouped, combine) per runner, tactic and token count, timed by CUDA-graph replay, against the floor measured in
// the same run.
//
// Method (reference/benchmarks.md, .library METHOD.md): random NVFP4 weights generated on the device for
// several layer copies (each its own router and bias), enough that the copies together are at least 8x the L2;
// one graph per (T, tactic) holds one forward per copy back to back, as consecutive layers of a model, so
// every forward reads its weights from HBM; the graph is replayed and the median replay time over the copies
// is one layer's time. Bandwidth: a device-to-device copy (bytes read + written / time); bf16 peak: a large
// cuBLAS GEMM timed under load, as the rows are (after 500 ms of GEMMs; the from-idle burst rate, 14-17 % higher
// on the H200, is reported beside it), when libcublas can be loaded (dlopen; reported as unmeasured otherwise,
// and the floor is then the bandwidth term alone).
#pragma once

#include "fp4moe/moe.h"
#include "moe/bench_report.h"

namespace fp4moe::cuda {

/// Runs the benchmark described by `o` on CUDA device 0 (o.desc must be NVFP4; o.runners empty or among
/// "cuda.decode", "cuda.grouped"; the auto row tunes across the runners given). Errors: no GPU, unsupported desc, CUDA
/// failures (named).
result<moe_bench_report> run_moe_bench_cuda(const moe_bench_options &o);

} // namespace fp4moe::cuda
