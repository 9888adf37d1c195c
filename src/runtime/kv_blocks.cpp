#include "runtime/kv_blocks.h"

#include "core/error.h"

#include <algorithm>

namespace fp4moe {

kv_blocks::kv_blocks(std::int64_t num_blocks, std::int64_t block_size) : block_size_(block_size) {
    FP4MOE_ASSERT(num_blocks >= 1 && block_size >= 1);
    FP4MOE_ASSERT(num_blocks <= INT32_MAX);
    owned_.assign(static_cast<std::size_t>(num_blocks), 0);
    free_.resize(static_cast<std::size_t>(num_blocks));
    // Block 0 on top: a fresh allocator hands out 0, 1, 2, ... (readable tests and dumps).
    for (std::int64_t i = 0; i < num_blocks; ++i)
        free_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(num_blocks - 1 - i);
}

bool kv_blocks::reserve(block_table &table, std::int64_t positions) {
    const std::int64_t need = blocks_for(positions) - static_cast<std::int64_t>(table.size());
    if (need <= 0) return true;
    if (need > free_blocks()) return false;
    for (std::int64_t i = 0; i < need; ++i) {
        const std::int32_t b = free_.back();
        free_.pop_back();
        owned_[static_cast<std::size_t>(b)] = 1;
        table.push_back(b);
    }
    peak_used_ = std::max(peak_used_, used_blocks());
    return true;
}

void kv_blocks::release(block_table &table) {
    for (const std::int32_t b : table) {
        FP4MOE_ASSERT(b >= 0 && b < num_blocks() && owned_[static_cast<std::size_t>(b)] == 1);
        owned_[static_cast<std::size_t>(b)] = 0;
        free_.push_back(b);
    }
    table.clear();
}

bool kv_blocks::check() const {
    std::vector<std::uint8_t> seen(owned_.size(), 0);
    for (const std::int32_t b : free_) {
        if (b < 0 || b >= num_blocks()) return false;
        const auto i = static_cast<std::size_t>(b);
        if (seen[i] || owned_[i]) return false;
        seen[i] = 1;
    }
    std::int64_t owned = 0;
    for (std::size_t i = 0; i < owned_.size(); ++i) {
        if (owned_[i] > 1) return false;
        owned += owned_[i];
        if (!owned_[i] && !seen[i]) return false;
    }
    return owned + free_blocks() == num_blocks();
}

} // namespace fp4moe
