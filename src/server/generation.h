// The bridge between an HTTP handler thread and the engine thread for one request.
//
// A request with k choices (prompts x n) becomes k engine requests whose callbacks copy each output into one
// queue (mutex + condition variable) and feed the metrics; the handler thread drains that queue and writes
// the response. The callbacks only lock, copy and notify: they never block the engine loop.
//
// Lifetime: the queue is shared (the callbacks hold it until their request finishes, so an abandoned
// generation never leaves the engine writing into freed memory). Destroying a `generation` cancels every
// choice still running, so a client that disconnects, or a handler that fails halfway, frees its KV blocks
// at the engine's next step.
#pragma once

#include "runtime/engine.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/request_parse.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fp4moe::server {

/// One engine output, copied out of the callback (request_output's views die with the call).
struct output_event {
    int index = 0; ///< the choice
    std::vector<std::int32_t> tokens;
    std::vector<float> logprobs; ///< per token; empty unless logprobs were asked for
    std::string text;
    finish_reason finish = finish_reason::none;
    std::string error;
    request_usage usage;
};

/// Multi-producer (engine thread), single-consumer (handler thread) queue.
class output_queue {
public:
    void push(output_event e);
    /// Appends every queued event to `out`; waits up to `timeout` when none is queued. False when none came.
    bool pop_all(std::vector<output_event> &out, std::chrono::milliseconds timeout);

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<output_event> q_;
};

class generation {
public:
    generation(engine &eng, std::shared_ptr<server_metrics> metrics);
    /// Cancels every choice that has not finished.
    ~generation();
    generation(const generation &) = delete;
    generation &operator=(const generation &) = delete;

    /// Submits every choice of `r` (choice i of prompt p: index p * n + i, seed + index when seeded). On the
    /// first refusal it cancels the choices already queued and returns the error (400 or 503).
    std::optional<api_error> submit(const generation_request &r);

    /// What `drain` reports back.
    enum class end { finished, disconnected, write_failed, stopping };

    /// Hands every event to `on_event` until each choice has delivered its final one. Between events it
    /// calls `alive` every `poll` (the connection's liveness; false -> the client left) and `stopping` (the
    /// server is going down without draining). Returns how it ended; anything but `finished` cancels the
    /// unfinished choices first. `on_event` returning false means the write failed.
    end drain(const std::function<bool(const output_event &)> &on_event, const std::function<bool()> &alive,
              const std::function<bool()> &stopping, std::chrono::milliseconds poll = std::chrono::milliseconds(50));

    /// Cancels every unfinished choice (idempotent).
    void cancel();

    int choices() const { return static_cast<int>(ids_.size()); }
    std::int64_t prompt_tokens() const { return prompt_tokens_; }

private:
    engine &eng_;
    std::shared_ptr<server_metrics> metrics_;
    std::shared_ptr<output_queue> queue_;
    std::vector<request_id> ids_;
    std::vector<bool> finished_;
    int remaining_ = 0;
    std::int64_t prompt_tokens_ = 0;
};

} // namespace fp4moe::server
