// A runnable model: loaded weights plus the CPU forward of the GQA MoE families (GLM-4.5/4.6/Air, Qwen3-MoE).
//
// forward() runs one step over a batch of sequences, each contributing any number of new tokens (prefill
// chunks and decode steps mix freely), reading and writing the paged KV cache through each sequence's
// block table. Buffers are sized for `max_batch_tokens` at load; a step allocates nothing once warm.
#pragma once

#include "core/thread_pool.h"
#include "fp4moe/moe.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "moe/autotune.h"

#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace fp4moe {

/// Which MoE runner (and tactic) computes a layer of `desc` for `tokens` tokens (usually an moe_autotuner).
using moe_selector = std::function<moe_choice(const moe_desc &desc, std::int64_t tokens)>;

struct model_options {
    int threads = 0;                     ///< CPU threads (0: all)
    std::int64_t max_batch_tokens = 512; ///< most new tokens in one forward step
};

/// One sequence's part of a batch.
struct seq_step {
    std::span<const std::int32_t> tokens; ///< new tokens, at positions start .. start + size - 1
    std::int64_t start = 0;               ///< tokens of this sequence already in the KV cache
    std::span<const std::int32_t> blocks; ///< block table covering start + tokens.size() positions
    bool all_logits = false;              ///< logits for every new token, else only for the last
};

class model {
public:
    /// Loads a checkpoint directory; `select` picks the MoE runner per layer shape and token count.
    static result<std::unique_ptr<model>> load(const std::string &dir, const model_options &opts, moe_selector select);

    const model_config &config() const { return w_->config; }
    const model_options &options() const { return opts_; }
    const model_weights &weights() const { return *w_; }
    /// Every distinct MoE/MLP shape of the model and one expert set of that shape (for tuning and timing).
    std::vector<std::pair<moe_desc, const expert_set *>> expert_shapes() const;
    thread_pool &pool() { return pool_; }

    /// Runs one step. `logits` receives one [vocab] row per sequence (or per token with all_logits), in batch
    /// order. Errors: too many tokens, token ids out of the vocabulary, a block table too short, positions
    /// past max_position_embeddings (each names the sequence).
    status forward(std::span<const seq_step> batch, kv_cache &kv, std::vector<float> &logits);

    /// Hidden state after the final norm for the rows logits were computed for (for tests).
    const std::vector<float> &last_hidden() const { return final_hidden_; }

private:
    model(std::unique_ptr<model_weights> w, const model_options &opts, moe_selector select);
    void attention(std::int64_t layer, std::span<const seq_step> batch, kv_cache &kv);
    void run_experts(const expert_set &set, std::int64_t rows, const float *x, float *out_add);

    std::unique_ptr<model_weights> w_;
    model_options opts_;
    moe_selector select_;
    thread_pool pool_;

    // Step buffers, [max_batch_tokens, ...].
    std::vector<float> h_, a_, q_, k_, v_, o_, tmp_, router_logits_, final_hidden_;
    std::vector<bf16_t> xb_, yb_;
    std::vector<std::int64_t> pos_;     ///< position of each token row
    std::vector<std::int32_t> row_seq_; ///< batch entry of each token row
    std::vector<moe_plan> plans_;       ///< one per distinct expert_set desc, by index
    std::vector<moe_desc> plan_descs_;
    std::vector<std::byte> workspace_;
};

} // namespace fp4moe
