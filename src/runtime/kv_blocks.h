// The KV block allocator: which blocks of the paged kv_cache (model/kv_cache.h) are free, and the block tables
// of the sequences that own the others. A block holds `block_size` consecutive positions of one sequence in
// every layer; a sequence of n positions owns blocks_for(n) blocks, listed in position order in its table.
//
// Free blocks form a LIFO stack (the most recently freed block is reused first: warm in cache). Allocation and
// release are O(blocks moved) and allocate no memory: the stack and the ownership flags are sized at
// construction. Not thread-safe; the engine loop is its only user.
#pragma once

#include <cstdint>
#include <vector>

namespace fp4moe {

/// A sequence's block table: block ids in position order (position p lives in block table[p / block_size]).
using block_table = std::vector<std::int32_t>;

class kv_blocks {
public:
    /// `num_blocks` >= 1 blocks of `block_size` >= 1 positions (asserted).
    kv_blocks(std::int64_t num_blocks, std::int64_t block_size);

    std::int64_t num_blocks() const { return static_cast<std::int64_t>(owned_.size()); }
    std::int64_t block_size() const { return block_size_; }
    std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
    std::int64_t used_blocks() const { return num_blocks() - free_blocks(); }
    /// Most blocks ever in use at once.
    std::int64_t peak_used_blocks() const { return peak_used_; }

    /// Blocks needed to hold `positions` positions (ceil division; 0 for 0).
    std::int64_t blocks_for(std::int64_t positions) const { return (positions + block_size_ - 1) / block_size_; }
    /// Positions `table` can hold.
    std::int64_t capacity(const block_table &table) const {
        return static_cast<std::int64_t>(table.size()) * block_size_;
    }

    /// Grows `table` so that it holds at least `positions` positions. All or nothing: returns false and leaves
    /// `table` unchanged when too few blocks are free. Never shrinks.
    bool reserve(block_table &table, std::int64_t positions);

    /// Returns every block of `table` to the free list and clears it (capacity kept). A block that is not
    /// currently allocated (a double free, or an id out of range) is a programmer error: FP4MOE_ASSERT aborts.
    void release(block_table &table);

    /// True when the free list and the ownership flags agree: every block is either free exactly once or owned,
    /// and the counts add up. O(num_blocks); for tests and idle-time checks.
    bool check() const;

private:
    std::int64_t block_size_;
    std::vector<std::int32_t> free_;  ///< stack of free block ids; back() is allocated next
    std::vector<std::uint8_t> owned_; ///< 1 while a block is allocated
    std::int64_t peak_used_ = 0;
};

} // namespace fp4moe
