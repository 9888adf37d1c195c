// The serving engine: a request queue in front of one loop thread that owns the model state (KV cache, block
// allocator, scheduler, samplers) and runs continuous batching over it (runtime/scheduler.h has the policy).
//
// Threading: `submit`, `cancel`, `stats` and `shutdown` may be called from any thread (HTTP handlers); they
// only take a short mutex and never touch model state. Outputs are delivered through each request's
// callback on the engine thread (see output_callback in runtime/request.h: it must not block).
//
// A request's life: submit validates (parameters, token ids, prompt + max_tokens against max_model_len and the
// KV capacity, queue room) and queues it -> the loop admits it FCFS when blocks and the running cap allow ->
// chunked prefill -> one sampled token per step, each streamed with its text delta (stream decoder, then stop
// string hold-back) -> finish "stop" / "length" / "abort" / "error", blocks freed in the same step. A
// preempted request (KV ran out) returns to the front of the queue and recomputes prompt + generated tokens;
// its sampler, stream decoder and stop state live on, so its stream continues without repeating anything.
//
// Steady-state allocations per step: none in scheduling, the forward or sampling (buffers sized at start or
// grown once and reused); what remains is unavoidable with these interfaces: the text deltas (std::string from
// the stream decoder / stop checker, heap only past 15 bytes) and the std::function call. A preemption may grow
// the waiting std::deque; a failed step builds a small vector. Per request (at submit): its state, its token
// vector (reserved for prompt + max_tokens), its block table (reserved) and a hash-map node.
#pragma once

#include "fp4moe/tokenizer.h"
#include "runtime/kv_blocks.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "runtime/step_model.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fp4moe {

struct engine_options {
    std::int64_t max_running_requests = 64; ///< --max-running-requests: sequences in the batch at once
    std::int64_t max_batch_tokens = 512;    ///< new tokens per step (= the model's model_options::max_batch_tokens)
    std::int64_t kv_blocks = 0;             ///< KV blocks; 0: kv_memory_bytes / bytes per block
    std::int64_t kv_memory_bytes = 1 << 30; ///< KV budget when kv_blocks is 0 (create(model&) only)
    std::int64_t block_size = 16;           ///< positions per KV block
    std::int64_t max_queue = 1024;          ///< requests accepted but not running (incl. preempted); beyond: queue_full
    std::int64_t max_model_len = 0;         ///< prompt + max_tokens limit; 0: the model's max positions
};

/// Why submit refused a request. The HTTP layer maps invalid_argument and too_long to 400, queue_full and
/// shutting_down to 503.
enum class submit_error { none, invalid_argument, too_long, queue_full, shutting_down };

/// "invalid_argument", "too_long", "queue_full", "shutting_down", "none".
const char *submit_error_name(submit_error e);

struct submit_result {
    request_id id = 0; ///< valid when ok()
    submit_error error = submit_error::none;
    std::string message; ///< names the parameter and the numbers; safe to show a client
    bool ok() const { return error == submit_error::none; }
};

/// A consistent snapshot of the engine's state and counters (since start).
struct engine_stats {
    std::int64_t queued = 0;  ///< accepted, not running: not yet seen by the loop + waiting (incl. preempted)
    std::int64_t waiting = 0; ///< in the scheduler's waiting queue
    std::int64_t running = 0;
    std::int64_t kv_blocks_used = 0, kv_blocks_total = 0, kv_blocks_peak = 0, kv_block_size = 0;
    std::int64_t prompt_tokens = 0;     ///< prompt tokens of every request the loop accepted (recompute not counted)
    std::int64_t generation_tokens = 0; ///< tokens sampled
    std::int64_t finished_stop = 0, finished_length = 0, finished_abort = 0, finished_error = 0;
    std::int64_t preemptions = 0;
    std::int64_t steps = 0; ///< model forward calls
    /// Times the engine went idle with a KV block still allocated or a broken free list (a leak: must stay 0;
    /// logged as an error). Checked at every transition to idle.
    std::int64_t idle_kv_leaks = 0;
    bool accepting = true; ///< false once shutdown began
};

class engine {
public:
    /// Runs on `m` (a step_model; tests pass a fake). Its num_blocks/block_size define the KV blocks
    /// (options.kv_blocks/block_size must be 0/equal or agree). `tok` may be null: then outputs carry token
    /// ids only (empty text), stop strings are refused, and only stop_token_ids (plus `default_stop_ids`) stop.
    /// With a tokenizer, its stop_ids() stop generation unless ignore_eos. `tok` must outlive the engine.
    /// Errors (invalid_argument): inconsistent options. Starts the loop thread.
    static result<std::unique_ptr<engine>> create(std::unique_ptr<step_model> m, const tokenizer *tok,
                                                  const engine_options &opts,
                                                  std::vector<std::int32_t> default_stop_ids = {});
    /// Runs on a loaded model with a KV cache of opts.kv_blocks (or kv_memory_bytes) x block_size. Without a
    /// tokenizer the config's eos_token_ids stop generation. `m` and `tok` must outlive the engine, and nothing
    /// else may run `m` while the engine exists (the model is not thread-safe). Errors: opts.max_batch_tokens
    /// above the model_options.max_batch_tokens `m` was loaded with, a KV budget that holds no block.
    static result<std::unique_ptr<engine>> create(model &m, const tokenizer *tok, const engine_options &opts);

    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;
    /// shutdown(false).
    ~engine();

    /// Queues a request; any thread. `cb` must be non-empty. When submit succeeds, `cb` is called on the engine
    /// thread at least once and exactly once with finish != none (the last call) — possibly before submit has
    /// returned the id to the caller, so a server sets up the per-request state the callback captures first.
    /// When submit fails, `cb` is never called. Errors: see submit_error;
    /// invalid_argument for an empty prompt, an id outside [0, vocab), a parameter `validate` rejects, stop
    /// strings without a tokenizer; too_long when prompt + max_tokens exceeds max_model_len or the KV
    /// capacity (the message names both numbers).
    submit_result submit(std::vector<std::int32_t> prompt, const sampling_params &params, output_callback cb);

    /// Aborts a request in any state; any thread. Its blocks are freed and its callback gets finish "abort" at
    /// the loop's next step boundary (at once if the loop is idle; after the forward in flight otherwise).
    /// False when the id is unknown or already finished.
    bool cancel(request_id id);

    /// Snapshot, any thread; refreshed by the loop after every step.
    engine_stats stats() const;

    /// Stops accepting (submit answers shutting_down), then with `drain` lets every accepted request finish;
    /// without, aborts them all (finish "abort"). Returns when the loop has exited. Any thread but the engine
    /// thread (a callback must not call it). A second call (e.g. shutdown(false) from a timer while a drain
    /// is under way) turns a drain into an abort and also waits.
    void shutdown(bool drain);

    std::int64_t max_model_len() const { return max_model_len_; }
    const engine_options &options() const { return opts_; }

private:
    struct request_state;
    enum class stop_mode { none, drain, abort };

    engine(std::unique_ptr<step_model> m, const tokenizer *tok, const engine_options &opts,
           std::vector<std::int32_t> default_stop_ids);
    void loop();
    void step();
    /// Emits the final output of `r` (with the pending tokens/text) and forgets it; frees its blocks.
    void finish(request_state &r, finish_reason why, std::string_view error = {});
    void emit(request_state &r, finish_reason why, std::string_view error);
    void publish_stats(); // under mu_

    std::unique_ptr<step_model> model_;
    const tokenizer *tok_;
    engine_options opts_;
    std::vector<std::int32_t> default_stop_ids_;
    std::int64_t max_model_len_ = 0;
    std::int64_t vocab_ = 0;

    // Loop-thread state.
    kv_blocks blocks_;
    scheduler sched_;
    std::unordered_map<request_id, std::unique_ptr<request_state>> requests_;
    std::vector<float> logits_;
    std::vector<std::unique_ptr<request_state>> incoming_;
    std::vector<request_id> cancelling_;
    engine_stats counters_; // loop-owned counters, copied into stats_ under mu_
    bool idle_checked_ = true;

    // Shared with other threads, under mu_.
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<request_state>> inbox_;
    std::vector<request_id> cancels_;
    std::unordered_set<request_id> live_;
    request_id next_id_ = 1;
    stop_mode stop_ = stop_mode::none;
    engine_stats stats_;

    std::mutex join_mu_;
    std::thread thread_;
};

} // namespace fp4moe
