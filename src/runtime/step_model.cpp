#include "runtime/step_model.h"

namespace fp4moe {

namespace {

class model_step final : public step_model {
public:
    model_step(model &m, std::int64_t max_batch_tokens, std::int64_t num_blocks, std::int64_t block_size)
        : m_(m), max_batch_tokens_(max_batch_tokens), kv_(m.config(), num_blocks, block_size) {}
    std::int64_t vocab_size() const override { return m_.config().vocab_size; }
    std::int64_t max_batch_tokens() const override { return max_batch_tokens_; }
    std::int64_t max_positions() const override { return m_.config().max_position_embeddings; }
    std::int64_t num_blocks() const override { return kv_.num_blocks(); }
    std::int64_t block_size() const override { return kv_.block_size(); }
    status forward(std::span<const seq_step> batch, std::vector<float> &logits) override {
        return m_.forward(batch, kv_, logits);
    }

private:
    model &m_;
    std::int64_t max_batch_tokens_;
    kv_cache kv_;
};

} // namespace

std::int64_t kv_bytes_per_block(const model_config &c, std::int64_t block_size) {
    return 2 * c.num_layers * c.num_kv_heads * c.head_dim * block_size * static_cast<std::int64_t>(sizeof(bf16_t));
}

std::unique_ptr<step_model> make_step_model(model &m, std::int64_t max_batch_tokens, std::int64_t num_blocks,
                                            std::int64_t block_size) {
    return std::make_unique<model_step>(m, max_batch_tokens, num_blocks, block_size);
}

} // namespace fp4moe
