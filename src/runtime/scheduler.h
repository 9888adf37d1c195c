// Continuous batching: which sequences run in the next model step, and how many of their tokens.
//
// Policy (one call to `schedule` per step):
//   1. Decode first. Every running sequence with exactly one pending token (its last sampled one) gets a 1-token
//      entry, in admission order, growing its block table by a block when it crosses a block boundary.
//   2. Prefill chunks of running sequences still prefilling (admission order), each chunk as large as the
//      remaining token budget (max_batch_tokens - tokens already planned) and the free blocks allow.
//   3. Admission, FCFS from the front of the waiting queue, while the running count is below
//      max_running_requests, budget is left, and free blocks can hold at least one token of the head's first
//      chunk; the head is never skipped. No admission in a step that preempted (it would thrash).
//   When a running sequence cannot get even one position (no free block) the most recently admitted running
//   sequence is preempted: its blocks are freed, its entry (if already planned) is dropped, `computed` goes
//   back to 0 and it returns to the FRONT of the waiting queue with prompt + generated tokens, to be
//   recomputed when readmitted. If the most recent one is the sequence itself, it preempts itself.
//   Progress: the oldest running sequence is never a victim while another runs, and a sequence never needs
//   more than all blocks (the engine checks prompt + max_tokens against the KV capacity at submit), so the
//   oldest always advances.
//
// An entry samples (`step_entry::sample`) when its chunk reaches the end of the known tokens: the logits of its
// last token give the next token. The scheduler never touches logits or tokens; the engine appends sampled
// tokens to `sequence::tokens` after `commit`.
//
// Memory: the plan's vectors are reserved for max_running_requests entries at construction, so `schedule` and
// `commit` allocate nothing; the waiting queue is a std::deque (a chunk allocation every few hundred
// requests). Not thread-safe: the engine loop is its only user. Sequences are owned by the caller and must
// outlive their time in the scheduler.
#pragma once

#include "model/model.h"
#include "runtime/kv_blocks.h"
#include "runtime/request.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace fp4moe {

struct scheduler_options {
    std::int64_t max_running_requests = 64; ///< sequences holding KV blocks at once (>= 1)
    std::int64_t max_batch_tokens = 512;    ///< new tokens per step (>= max_running_requests)
};

/// One sequence's part of a step.
struct step_entry {
    sequence *seq = nullptr;
    std::int64_t tokens = 0; ///< new tokens this step: positions seq->computed .. + tokens - 1
    bool sample = false;     ///< the chunk ends at the last known token: sample the next one from its logits
};

/// The next step: `batch` is the model input, `entries` says whose it is (same order, same length).
struct step_plan {
    std::vector<seq_step> batch;
    std::vector<step_entry> entries;
    std::int64_t tokens = 0;         ///< sum of entries' tokens (<= max_batch_tokens)
    std::int64_t decode_entries = 0; ///< the first decode_entries entries are 1-token decode steps
    std::int64_t preempted = 0;      ///< sequences preempted while building this plan
    bool empty() const { return entries.empty(); }
};

class scheduler {
public:
    /// `blocks` is shared with nobody else and outlives the scheduler. Options are asserted valid.
    scheduler(const scheduler_options &opts, kv_blocks &blocks);

    /// Appends `s` to the waiting queue (it must hold no blocks, computed == 0, at least one token).
    void add(sequence &s);
    /// Takes `s` out of the waiting queue or the running set and frees its blocks now (finish or cancel).
    /// False when the scheduler does not hold it. Do not call between `schedule` and `commit` for a planned
    /// sequence (the plan points into its block table).
    bool remove(sequence &s);

    /// Builds the next step (see the file comment). The plan stays valid until the next call to schedule,
    /// remove or add. Empty when nothing is waiting or running, or when nothing can run (cannot happen while
    /// a sequence runs).
    const step_plan &schedule();
    /// Records that the planned step ran: each entry's `computed` advances by its tokens.
    void commit();

    std::int64_t num_waiting() const { return static_cast<std::int64_t>(waiting_.size()); }
    std::int64_t num_running() const { return static_cast<std::int64_t>(running_.size()); }
    /// Total preemptions since construction.
    std::int64_t preemptions() const { return preemptions_; }
    /// Running sequences in admission order (oldest first).
    const std::vector<sequence *> &running() const { return running_; }
    const std::deque<sequence *> &waiting() const { return waiting_; }
    const scheduler_options &options() const { return opts_; }

private:
    /// Makes room for `pos` positions in s's table, preempting the most recent running sequences as needed.
    /// False when `s` itself was preempted.
    bool grow_or_preempt(sequence &s, std::int64_t positions);
    void preempt_last();
    void plan_entry(sequence &s, std::int64_t tokens);

    scheduler_options opts_;
    kv_blocks &blocks_;
    std::deque<sequence *> waiting_;
    std::vector<sequence *> running_; ///< admission order
    step_plan plan_;
    std::int64_t admissions_ = 0;
    std::int64_t preemptions_ = 0;
};

} // namespace fp4moe
