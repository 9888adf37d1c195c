// fp4moe public API: the Mixture-of-Experts layer and its interchangeable runners.
//
// One MoE block, as every supported family computes it:
//   logits = fp32(x) @ fp32(W_router)^T                     [T, E]
//   (ids, w) = route(logits)                                 top-k per token (moe_routing)
//   y[t] = sum_j w[t,j] * Expert_{ids[t,j]}(x[t]) + sum_s Shared_s(x[t])
//   Expert(x) = down( silu(gate(x)) * up(x) )
// Shared experts are planned as extra expert slots E..E+S-1 that every token visits with weight 1, so a
// runner computes routed and shared experts in the same grouped GEMMs (SGLang's "fused shared experts").
// A shared MLP of width S*I is S slots of width I (its gate/up rows and down columns split evenly).
//
// Plan, then run: routing fills a `moe_plan` (per-expert counts, offsets, the token permutation) inside
// buffers sized up front from (max tokens, experts, top-k); `moe_runner::run` computes the two grouped GEMMs
// for a plan and allocates nothing.
#pragma once

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "fp4moe/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

// ---- description: the tuning key ------------------------------------------------------------------------

enum class moe_scoring : std::uint8_t {
    softmax, ///< Qwen3-MoE: p = softmax(logits), top-k of p
    sigmoid, ///< DeepSeek-V3, GLM-4.5, GLM-5 (noaux_tc): s = sigmoid(logits), selection on s + bias
};

/// The routing rule of a family (reference/models.md sections 2.6, 4.3, 5.2).
struct moe_routing {
    moe_scoring scoring = moe_scoring::softmax;
    bool renormalize = true;            ///< norm_topk_prob: w /= sum(w) (+1e-20 for sigmoid, as HF)
    bool correction_bias = false;       ///< e_score_correction_bias [E] added for selection only (sigmoid)
    int n_group = 1;                    ///< expert groups; group score = sum of the group's top-2 biased scores
    int topk_group = 1;                 ///< groups kept before the final top-k
    float routed_scaling_factor = 1.0f; ///< multiplies the routed weights after renormalization
    bool operator==(const moe_routing &) const = default;
};

enum class moe_weight_format : std::uint8_t {
    nvfp4, ///< W4A16: E2M1 weights + E4M3 block scales + fp32 global scale, bf16 activations
    bf16,  ///< unquantized checkpoints
};

enum class moe_layout : std::uint8_t {
    permuted, ///< tokens sorted by expert: rows [offsets[e], offsets[e+1]) belong to expert e
    masked,   ///< [E, max_tokens, K] with a per-expert valid count (DeepGEMM / FlashInfer masked GEMM)
};

/// Shapes, dtypes, routing and layout of one MoE layer. Hashable: the autotuner's key (with the token bucket).
struct moe_desc {
    std::int64_t hidden = 0;       ///< H: model width (K of gate/up, N of down)
    std::int64_t intermediate = 0; ///< I: width of one expert (moe_intermediate_size)
    std::int64_t experts = 0;      ///< E: routed experts
    std::int64_t top_k = 0;        ///< k: routed experts per token
    std::int64_t shared = 0;       ///< S: shared-expert slots of width I (0 = none)
    moe_weight_format weights = moe_weight_format::nvfp4;
    moe_layout layout = moe_layout::permuted;
    moe_routing routing;

    std::int64_t slots() const { return top_k + shared; }           ///< expert visits per token
    std::int64_t total_experts() const { return experts + shared; } ///< routed + shared slots
    /// Checks the fields (positive sizes, top_k <= E, H and I multiples of 16 for NVFP4, groups divide E,
    /// topk_group <= n_group, k <= topk_group * E / n_group); the message names the field.
    status validate() const;
    /// "H=4096 I=1408 E=128 k=8 S=1 nvfp4 permuted sigmoid/g1/1/x1"; stable across versions of a build.
    std::string to_string() const;
    bool operator==(const moe_desc &) const = default;
};

/// Stable 64-bit hash of every field (FNV-1a over to_string()).
std::uint64_t hash(const moe_desc &d);

// ---- weights -------------------------------------------------------------------------------------------

/// One [N, K] weight matrix, in the checkpoint layout of its format.
struct moe_matrix {
    nvfp4::matrix_view nvfp4;     ///< when the format is nvfp4
    const bf16_t *bf16 = nullptr; ///< when the format is bf16: row-major [N, K]
};

/// The weights of one MoE layer. Non-owning: the caller keeps the storage alive while runners use it.
/// Spans have total_experts() entries, routed experts first, then shared slots.
struct moe_weights {
    const float *router = nullptr;          ///< [E, H] fp32 (the router runs in fp32)
    const float *correction_bias = nullptr; ///< [E] fp32 or null (required when routing.correction_bias)
    std::span<const moe_matrix> gate;       ///< [I, H] per expert
    std::span<const moe_matrix> up;         ///< [I, H] per expert
    std::span<const moe_matrix> down;       ///< [H, I] per expert
};

// ---- plan ----------------------------------------------------------------------------------------------

/// Routing results and the token permutation for one batch. Buffers are sized at construction from the
/// largest batch; build() and runners never allocate. Indices are int32 as the GPU kernels use them.
struct moe_plan {
    moe_plan() = default;
    /// Reserves for up to `max_tokens` tokens of layer `d`.
    moe_plan(const moe_desc &d, std::int64_t max_tokens);

    std::int64_t max_tokens = 0;
    std::int64_t tokens = 0;      ///< T of the current batch
    std::int64_t slots = 0;       ///< k + S
    std::int64_t num_experts = 0; ///< E + S

    std::vector<std::int32_t> topk_ids; ///< [T, slots] expert per (token, slot); shared slots are E..E+S-1
    std::vector<float> topk_weights;    ///< [T, slots] combine weight (1 for shared slots)
    std::vector<std::int32_t> counts;   ///< [E + S] tokens routed to each expert
    std::vector<std::int32_t> offsets;  ///< [E + S + 1] exclusive prefix sum of counts (permuted layout)
    /// Permuted layout: row r (expert-sorted; within an expert by token index) came from pair
    /// `perm[r]` = token * slots + slot. [T * slots]
    std::vector<std::int32_t> perm;
    /// Inverse: pair (token * slots + slot) sits at permuted row inv_perm[pair]. [T * slots]
    std::vector<std::int32_t> inv_perm;
    /// Masked layout: expert e's i-th row (i < counts[e]) is pair masked_pairs[e * max_tokens + i];
    /// entries past counts[e] are -1. [(E + S) * max_tokens]
    std::vector<std::int32_t> masked_pairs;
};

/// Routes `tokens` rows of router logits ([T, E] fp32) into `plan`: top-k ids and weights per the rule of
/// `d.routing`, shared slots appended, counts/offsets/permutations filled. Ties go to the lower expert
/// index. Errors: tokens > plan.max_tokens, a missing correction bias, NaN logits (named by token).
status moe_route(const moe_desc &d, std::span<const float> logits, const float *correction_bias, std::int64_t tokens,
                 moe_plan &plan);

/// Fills counts, offsets and permutations of `plan` from its topk_ids (the part of moe_route after top-k;
/// exposed so tests and callers with precomputed routing can use it).
void moe_plan_from_ids(const moe_desc &d, moe_plan &plan);

// ---- runners -------------------------------------------------------------------------------------------

/// A variant of a runner (tile shape, split, threads...). Tactic 0 is always valid.
struct moe_tactic {
    int id = 0;
    std::string name; ///< human-readable ("threads=16 block_n=64")
};

/// Where a runner executes and what it may use.
struct moe_device {
    std::string name; ///< "cpu" or the GPU's name ("NVIDIA H200")
    bool cuda = false;
    int cuda_device = -1;
    int threads = 0;        ///< CPU worker threads available (0 = all cores)
    void *stream = nullptr; ///< cudaStream_t for CUDA runners
};

/// Inputs and outputs of one run. Pointers live on the runner's device.
struct moe_args {
    const bf16_t *x = nullptr;      ///< [T, H] activations
    bf16_t *out = nullptr;          ///< [T, H] result (overwritten)
    const moe_weights *w = nullptr; ///< the layer's weights in the checkpoint layout (CPU runners)
    void *workspace = nullptr;      ///< at least runner.workspace_size(desc, plan.max_tokens) bytes
    std::size_t workspace_bytes = 0;
    /// GPU runners: the layer's weights as the runner prepared them on its device (cuda.decode: a
    /// cuda::gpu_moe_weights from src/backend/cuda/moe_gpu.h); CPU runners ignore it.
    const void *device_weights = nullptr;
};

/// Computes gate_up GEMM -> SiLU*up -> down GEMM -> weighted combine for a plan (design.md "MoE runners").
/// Implementations are stateless after construction and thread-compatible.
class moe_runner {
public:
    virtual ~moe_runner() = default;
    virtual std::string_view name() const = 0; ///< "cpu.ref", "cpu.fast", "cuda.decode", ...
    virtual bool supports(const moe_desc &d, const moe_device &dev) const = 0;
    virtual std::vector<moe_tactic> tactics(const moe_desc &d) const = 0;
    /// Scratch bytes `run` needs for batches up to `max_tokens`.
    virtual std::size_t workspace_size(const moe_desc &d, std::int64_t max_tokens) const = 0;
    virtual status run(const moe_desc &d, const moe_args &a, const moe_plan &p, const moe_tactic &t,
                       const moe_device &dev) const = 0;
};

} // namespace fp4moe
