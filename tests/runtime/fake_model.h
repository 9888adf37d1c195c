// A deterministic stand-in for the model, for instant scheduler and engine tests. Its "KV cache" stores the
// token id of each position in the slot the block table names; the next token is a hash of every token read
// back through the block table, so a lost, stale or shared block, a wrong start or a skipped chunk changes the
// output. Logits are one-hot (value 1 at the next token, 0 elsewhere): greedy picks exactly that token.
#pragma once

#include "runtime/step_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace fp4moe::test {

class fake_model final : public step_model {
public:
    fake_model(std::int64_t vocab, std::int64_t max_batch_tokens, std::int64_t num_blocks, std::int64_t block_size)
        : vocab_(vocab), max_batch_tokens_(max_batch_tokens), num_blocks_(num_blocks), block_size_(block_size),
          slots_(static_cast<std::size_t>(num_blocks * block_size), -1) {}

    std::int64_t vocab_size() const override { return vocab_; }
    std::int64_t max_batch_tokens() const override { return max_batch_tokens_; }
    std::int64_t max_positions() const override { return 0; }
    std::int64_t num_blocks() const override { return num_blocks_; }
    std::int64_t block_size() const override { return block_size_; }

    /// The next token after `prefix` (what forward computes from the cache).
    std::int32_t next(const std::vector<std::int32_t> &prefix) const {
        std::uint64_t h = 1469598103934665603ull;
        for (auto t : prefix) h = (h ^ static_cast<std::uint64_t>(t + 1)) * 1099511628211ull;
        return static_cast<std::int32_t>((h >> 17) % static_cast<std::uint64_t>(vocab_));
    }

    status forward(std::span<const seq_step> batch, std::vector<float> &logits) override {
        if (on_forward) on_forward();
        ++steps;
        std::int64_t tokens = 0;
        for (const auto &s : batch) tokens += static_cast<std::int64_t>(s.tokens.size());
        if (tokens > max_batch_tokens_) return {status_code::invalid_argument, "too many tokens"};
        if (fail_next) {
            fail_next = false;
            return {status_code::internal, "injected failure"};
        }
        max_step_tokens = std::max(max_step_tokens, tokens);
        logits.assign(batch.size() * static_cast<std::size_t>(vocab_), 0.0f);
        std::vector<std::int32_t> prefix;
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const seq_step &s = batch[i];
            const std::int64_t end = s.start + static_cast<std::int64_t>(s.tokens.size());
            if (static_cast<std::int64_t>(s.blocks.size()) * block_size_ < end)
                return {status_code::invalid_argument, fmt::format("sequence {}: block table too short", i)};
            for (std::size_t j = 0; j < s.tokens.size(); ++j)
                slot(s, s.start + static_cast<std::int64_t>(j)) = s.tokens[j];
            prefix.clear();
            for (std::int64_t p = 0; p < end; ++p) {
                const std::int32_t t = slot(s, p);
                if (t < 0) return {status_code::internal, fmt::format("sequence {}: position {} never written", i, p)};
                prefix.push_back(t);
            }
            logits[i * static_cast<std::size_t>(vocab_) + static_cast<std::size_t>(next(prefix))] = 1.0f;
        }
        return status::success();
    }

    /// Greedy continuation of `prompt` by `n` tokens, computed directly (the "run alone" reference).
    std::vector<std::int32_t> reference(std::vector<std::int32_t> prompt, std::int64_t n) const {
        std::vector<std::int32_t> out;
        for (std::int64_t i = 0; i < n; ++i) {
            out.push_back(next(prompt));
            prompt.push_back(out.back());
        }
        return out;
    }

    std::function<void()> on_forward; ///< called first in every forward (tests use it to hold the loop)
    std::int64_t steps = 0;
    std::int64_t max_step_tokens = 0;
    bool fail_next = false;

private:
    std::int32_t &slot(const seq_step &s, std::int64_t p) {
        const auto b = s.blocks[static_cast<std::size_t>(p / block_size_)];
        return slots_[static_cast<std::size_t>(b * block_size_ + p % block_size_)];
    }

    std::int64_t vocab_, max_batch_tokens_, num_blocks_, block_size_;
    std::vector<std::int32_t> slots_;
};

} // namespace fp4moe::test
