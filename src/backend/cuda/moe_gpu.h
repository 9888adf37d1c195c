// The MoE layer on a CUDA device: weights uploaded in the runners' layout, the `cuda.decode` and `cuda.grouped`
// runners behind the moe_runner interface, and the whole layer (router -> top-k -> plan -> experts -> combine) as one
// stream of kernels with no host synchronization, so it can be captured in a CUDA graph.
#pragma once

#include "fp4moe/moe.h"
#include "kernels/moe_decode.h"
#include "kernels/moe_grouped.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace fp4moe::cuda {

/// The CUDA runners: `cuda.decode` (mma.sync, streams weights at the HBM limit; small batches) and
/// `cuda.grouped` (sm_90 wgmma with TMA; large batches). Both read the same repacked weights.
enum class gpu_runner { decode, grouped };
/// A runner and one of its tactic ids.
struct gpu_tactic {
    gpu_runner runner = gpu_runner::decode;
    int id = 0;
};

/// One layer's weights on the device: router (fp32), correction bias, and the experts (routed, then shared
/// slots) repacked by mma_pack. Owns one device allocation.
class gpu_moe_weights {
public:
    /// Repacks and uploads `w` (NVFP4 only) to the current device. Errors name the expert and matrix (a NaN
    /// scale, a shape that does not match `d`), or the CUDA failure.
    static result<std::unique_ptr<gpu_moe_weights>> upload(const moe_desc &d, const moe_weights &w);
    /// Random weights generated on the device in the packed layout (benchmarks: no host pass over gigabytes).
    /// Scales 0.25..4, global scale 1e-3, router uniform with variance 3/H (unit-variance logits for
    /// activations uniform in [-1, 1]: routing spreads over the experts) rounded to bf16 as the checkpoints store
    /// it, bias +-0.1. `seed` varies the values.
    static result<std::unique_ptr<gpu_moe_weights>> random(const moe_desc &d, std::uint64_t seed, cudaStream_t stream);

    gpu_moe_weights(const gpu_moe_weights &) = delete;
    gpu_moe_weights &operator=(const gpu_moe_weights &) = delete;
    ~gpu_moe_weights();

    const decode_weights &decode() const { return dw_; }
    const float *router() const { return router_; }
    /// Whether every router value is a bf16 (moe_router_logits' `router_bf16`): checked at upload.
    bool router_bf16() const { return router_bf16_; }
    const float *bias() const { return bias_; }
    std::size_t bytes() const { return bytes_; }

private:
    gpu_moe_weights() = default;
    static result<std::unique_ptr<gpu_moe_weights>> allocate(const moe_desc &d);
    void *mem_ = nullptr;
    std::size_t bytes_ = 0;
    decode_weights dw_;
    float *router_ = nullptr, *bias_ = nullptr;
    bool router_bf16_ = false;
};

/// Device buffers of the layer forward for batches up to `max_tokens` (the plan, logits, the runner's scratch).
std::size_t gpu_moe_forward_workspace(const moe_desc &d, std::int64_t max_tokens);

/// The whole layer for `tokens` rows of x (device bf16 [T, H]) into out (device bf16 [T, H]) on `stream`:
/// router logits, top-k per d.routing, plan (d.layout), then runner `t.runner` with tactic `t.id`. No host sync, no
/// allocation: capturable in a CUDA graph. Errors only for invalid arguments (checked before any launch) or a
/// failed launch.
status gpu_moe_forward(const moe_desc &d, const gpu_moe_weights &w, const bf16_t *x, bf16_t *out, std::int64_t tokens,
                       std::int64_t max_tokens, void *workspace, gpu_tactic t, cudaStream_t stream);

/// Reads the per-expert counts of the last forward from its workspace (synchronizes `stream`; for benchmark
/// accounting of touched experts).
result<std::vector<std::int32_t>> gpu_moe_counts(const moe_desc &d, std::int64_t max_tokens, const void *workspace,
                                                 cudaStream_t stream);

/// A CUDA runner. run() takes a host plan (it uploads the routing, then runs the runner's kernels) and
/// a.device_weights = gpu_moe_weights*; a.x, a.out, a.workspace on the device.
std::unique_ptr<moe_runner> make_gpu_runner(gpu_runner kind);
std::unique_ptr<moe_runner> make_decode_runner(); ///< make_gpu_runner(gpu_runner::decode)

/// Tactics of a runner, in tactic-id order, and their names (as moe_runner::tactics lists them).
int gpu_tactic_count(gpu_runner r);
std::string gpu_tactic_name(gpu_tactic t);

} // namespace fp4moe::cuda
