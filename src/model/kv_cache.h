// Paged KV cache storage: fixed-size blocks of `block_size` token slots per layer, bf16. The block tables
// (which blocks a sequence owns) belong to the caller (runtime/); the model only reads and writes slots.
#pragma once

#include "fp4moe/bf16.h"
#include "model/config.h"

#include <cstdint>
#include <vector>

namespace fp4moe {

class kv_cache {
public:
    /// Storage for `num_blocks` blocks of `block_size` tokens for every layer of `c`.
    kv_cache(const model_config &c, std::int64_t num_blocks, std::int64_t block_size = 16)
        : layers_(c.num_layers), kv_heads_(c.num_kv_heads), head_dim_(c.head_dim), block_size_(block_size),
          num_blocks_(num_blocks), k_(static_cast<std::size_t>(layers_ * num_blocks * block_size * row())),
          v_(k_.size()) {}

    std::int64_t block_size() const { return block_size_; }
    std::int64_t num_blocks() const { return num_blocks_; }
    std::int64_t bytes() const { return static_cast<std::int64_t>(2 * k_.size() * sizeof(bf16_t)); }

    /// K or V of one token slot: [kv_heads, head_dim].
    bf16_t *k(std::int64_t layer, std::int64_t block, std::int64_t slot) {
        return k_.data() + offset(layer, block, slot);
    }
    bf16_t *v(std::int64_t layer, std::int64_t block, std::int64_t slot) {
        return v_.data() + offset(layer, block, slot);
    }
    const bf16_t *k(std::int64_t layer, std::int64_t block, std::int64_t slot) const {
        return k_.data() + offset(layer, block, slot);
    }
    const bf16_t *v(std::int64_t layer, std::int64_t block, std::int64_t slot) const {
        return v_.data() + offset(layer, block, slot);
    }

private:
    std::int64_t row() const { return kv_heads_ * head_dim_; }
    std::size_t offset(std::int64_t layer, std::int64_t block, std::int64_t slot) const {
        return static_cast<std::size_t>(((layer * num_blocks_ + block) * block_size_ + slot) * row());
    }

    std::int64_t layers_, kv_heads_, head_dim_, block_size_, num_blocks_;
    std::vector<bf16_t> k_, v_;
};

} // namespace fp4moe
