// What the engine runs a step on: a model together with its paged KV storage. The engine and the scheduler
// only need "run this batch, give me one row of logits per sequence"; this interface lets tests drive them
// with a deterministic fake (tests/runtime/fake_model.h) and keeps the real model's kv_cache in one place.
#pragma once

#include "model/kv_cache.h"
#include "model/model.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace fp4moe {

class step_model {
public:
    virtual ~step_model() = default;
    /// Rows of the logits: the sampler's vocabulary.
    virtual std::int64_t vocab_size() const = 0;
    /// Most new tokens in one forward.
    virtual std::int64_t max_batch_tokens() const = 0;
    /// Most positions a sequence may reach (max_position_embeddings); 0: no limit.
    virtual std::int64_t max_positions() const = 0;
    /// KV blocks and positions per block of the storage the block tables index.
    virtual std::int64_t num_blocks() const = 0;
    virtual std::int64_t block_size() const = 0;
    /// model::forward's contract: one [vocab] row per sequence (every sequence has all_logits false here).
    virtual status forward(std::span<const seq_step> batch, std::vector<float> &logits) = 0;
};

/// Bytes of K and V one block of `block_size` positions takes for model config `c` (bf16, every layer).
std::int64_t kv_bytes_per_block(const model_config &c, std::int64_t block_size);

/// The real model over a kv_cache of `num_blocks` x `block_size` it owns. `m` must outlive it;
/// `max_batch_tokens` must be the model_options.max_batch_tokens `m` was loaded with (model does not expose it).
std::unique_ptr<step_model> make_step_model(model &m, std::int64_t max_batch_tokens, std::int64_t num_blocks,
                                            std::int64_t block_size);

} // namespace fp4moe
