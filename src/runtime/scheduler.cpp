#include "runtime/scheduler.h"

#include "core/error.h"

#include <algorithm>

namespace fp4moe {

scheduler::scheduler(const scheduler_options &opts, kv_blocks &blocks) : opts_(opts), blocks_(blocks) {
    FP4MOE_ASSERT(opts.max_running_requests >= 1 && opts.max_batch_tokens >= opts.max_running_requests);
    running_.reserve(static_cast<std::size_t>(opts.max_running_requests));
    plan_.batch.reserve(static_cast<std::size_t>(opts.max_running_requests));
    plan_.entries.reserve(static_cast<std::size_t>(opts.max_running_requests));
}

void scheduler::add(sequence &s) {
    FP4MOE_ASSERT(s.blocks.empty() && s.computed == 0 && !s.tokens.empty() && s.admitted < 0);
    waiting_.push_back(&s);
}

bool scheduler::remove(sequence &s) {
    if (s.admitted >= 0) {
        auto it = std::find(running_.begin(), running_.end(), &s);
        if (it == running_.end()) return false;
        running_.erase(it);
    } else {
        auto it = std::find(waiting_.begin(), waiting_.end(), &s);
        if (it == waiting_.end()) return false;
        waiting_.erase(it);
    }
    blocks_.release(s.blocks);
    s.computed = 0;
    s.admitted = -1;
    return true;
}

void scheduler::plan_entry(sequence &s, std::int64_t n) {
    FP4MOE_ASSERT(n >= 1 && n <= s.pending() && blocks_.capacity(s.blocks) >= s.computed + n);
    const auto start = static_cast<std::size_t>(s.computed);
    plan_.batch.push_back(seq_step{std::span<const std::int32_t>(s.tokens).subspan(start, static_cast<std::size_t>(n)),
                                   s.computed, std::span<const std::int32_t>(s.blocks), false});
    plan_.entries.push_back(step_entry{&s, n, n == s.pending()});
    plan_.tokens += n;
}

void scheduler::preempt_last() {
    sequence *v = running_.back();
    running_.pop_back();
    for (std::size_t i = 0; i < plan_.entries.size(); ++i)
        if (plan_.entries[i].seq == v) {
            plan_.tokens -= plan_.entries[i].tokens;
            if (static_cast<std::int64_t>(i) < plan_.decode_entries) --plan_.decode_entries;
            plan_.entries.erase(plan_.entries.begin() + static_cast<std::ptrdiff_t>(i));
            plan_.batch.erase(plan_.batch.begin() + static_cast<std::ptrdiff_t>(i));
            break;
        }
    blocks_.release(v->blocks);
    v->computed = 0;
    v->admitted = -1;
    ++v->preemptions;
    waiting_.push_front(v);
    ++preemptions_;
    ++plan_.preempted;
}

bool scheduler::grow_or_preempt(sequence &s, std::int64_t positions) {
    while (!blocks_.reserve(s.blocks, positions)) {
        // Cannot empty running_ without reaching s, which is in it.
        const sequence *v = running_.back();
        preempt_last();
        if (v == &s) return false;
    }
    return true;
}

const step_plan &scheduler::schedule() {
    plan_.batch.clear();
    plan_.entries.clear();
    plan_.tokens = 0;
    plan_.decode_entries = 0;
    plan_.preempted = 0;
    const std::int64_t budget = opts_.max_batch_tokens;
    const std::int64_t bs = blocks_.block_size();

    // 1. Decode steps. Victims come from the back, so entries planned before index i stay valid.
    for (std::size_t i = 0; i < running_.size() && plan_.tokens < budget; ++i) {
        sequence &s = *running_[i];
        if (s.pending() != 1) continue;
        if (!grow_or_preempt(s, s.computed + 1)) break; // s was the last one
        plan_entry(s, 1);
        ++plan_.decode_entries;
    }

    // 2. Prefill chunks of running sequences.
    for (std::size_t i = 0; i < running_.size() && plan_.tokens < budget; ++i) {
        sequence &s = *running_[i];
        if (s.pending() <= 1) continue;
        auto room = [&] { return blocks_.capacity(s.blocks) + blocks_.free_blocks() * bs - s.computed; };
        if (room() <= 0 && !grow_or_preempt(s, s.computed + 1)) break;
        const std::int64_t n = std::min({s.pending(), budget - plan_.tokens, room()});
        const bool reserved = blocks_.reserve(s.blocks, s.computed + n);
        FP4MOE_ASSERT(reserved);
        plan_entry(s, n);
    }

    // 3. Admission, strictly FCFS.
    while (!waiting_.empty() && plan_.preempted == 0 && num_running() < opts_.max_running_requests &&
           plan_.tokens < budget) {
        sequence &s = *waiting_.front();
        const std::int64_t n = std::min({s.pending(), budget - plan_.tokens, blocks_.free_blocks() * bs});
        if (n <= 0) break;
        const bool reserved = blocks_.reserve(s.blocks, n);
        FP4MOE_ASSERT(reserved);
        waiting_.pop_front();
        s.admitted = admissions_++;
        running_.push_back(&s);
        plan_entry(s, n);
    }
    return plan_;
}

void scheduler::commit() {
    for (const step_entry &e : plan_.entries) e.seq->computed += e.tokens;
}

} // namespace fp4moe
