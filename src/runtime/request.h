// A request as the engine sees it: its id, how it finished, what its callback receives, and the sequence
// state the scheduler moves between the waiting queue and the running batch.
#pragma once

#include "runtime/kv_blocks.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace fp4moe {

/// Engine-assigned, unique for the engine's lifetime, never 0.
using request_id = std::uint64_t;
using engine_clock = std::chrono::steady_clock;

/// Why a request ended. `none` while it is still running.
enum class finish_reason {
    none,
    stop,   ///< a stop token id (EOS or stop_token_ids) or a stop string
    length, ///< max_tokens generated
    abort,  ///< cancelled (engine::cancel, or shutdown without drain)
    error,  ///< the step failed (the message says why); other requests are unaffected
};

/// "stop", "length", "abort", "error" (OpenAI's finish_reason values plus "error"); nullptr for none.
const char *finish_reason_name(finish_reason r);

/// Token counts of a request so far.
struct request_usage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0; ///< tokens generated (a stop token counts, a stop string's tokens too)
};

/// One incremental output of a request, passed to its callback. Every view points into engine memory and is
/// valid only during the call: copy what you keep.
struct request_output {
    request_id id = 0;
    /// Tokens generated since the previous output (usually one; empty in a final abort/error output).
    std::span<const std::int32_t> tokens;
    /// Per new token, when it was sampled (TTFT = token_times[0] of the first output - arrival; ITL = deltas).
    std::span<const engine_clock::time_point> token_times;
    /// Per new token, its log-probability (sampler::choice::logprob); empty unless sampling_params::logprobs.
    std::span<const float> logprobs;
    /// Text that became final since the previous output: complete UTF-8 only, with the stop-string hold-back
    /// applied (text that could still begin a stop string is held until it cannot). Never re-emitted, also
    /// across a preemption.
    std::string_view text;
    finish_reason finish = finish_reason::none; ///< none until the last output, which is the only final one
    std::string_view error;                     ///< for finish == error: what failed
    request_usage usage;                        ///< totals so far
    engine_clock::time_point arrival;           ///< when submit accepted the request
    engine_clock::time_point first_scheduled;   ///< when its first step began (queue time = this - arrival);
                                                ///< default-constructed if it never ran
};

/// Called from the engine thread for each output of a request, the last one with finish != none. It must not
/// block or call back into the engine's blocking functions (shutdown); cancel and stats are fine. A server
/// pushes the output into its own per-connection queue and returns.
using output_callback = std::function<void(const request_output &)>;

/// The scheduler's view of a request: the token sequence whose K/V it must compute and the blocks holding it.
struct sequence {
    request_id id = 0;
    std::vector<std::int32_t> tokens; ///< prompt, then every generated token
    std::int64_t prompt_len = 0;
    std::int64_t max_len = 0;   ///< prompt_len + max_tokens: the most positions it can ever need
    std::int64_t computed = 0;  ///< leading tokens whose K/V are in `blocks` (0 again after a preemption)
    block_table blocks;         ///< owned while running; empty while waiting
    std::int64_t admitted = -1; ///< admission order while running (larger = more recent), -1 while waiting
    std::int64_t preemptions = 0;

    std::int64_t generated() const { return static_cast<std::int64_t>(tokens.size()) - prompt_len; }
    /// Tokens not yet in the cache (1 for a decoding sequence).
    std::int64_t pending() const { return static_cast<std::int64_t>(tokens.size()) - computed; }
};

} // namespace fp4moe
