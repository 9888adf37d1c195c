// Running one benchmark pass as sglang.bench_serving runs it: warmup, then arrivals (Poisson or all at once) into a
// FIFO of waiting requests served by at most --max-concurrency workers.
//
// Warmup: `warmup_requests` copies of the first prompt with min(output_len, 32) new tokens, through the same
// concurrency limit; excluded from the results; if every one fails the run stops with the first error (sglang's
// "Warmup failed"). Then a pause (sglang sleeps 1 s) so the warmup's tail does not overlap the run.
// Arrivals: request i is released, then, unless the rate is infinite, the next one waits an exponential gap of mean
// 1/rate drawn from the caller's generator (numpy's exponential, as sglang's `get_request`); gaps are kept on an
// absolute schedule so sleeping overhead does not stretch them. Released requests wait FIFO for a worker (asyncio's
// semaphore is FIFO too); a request's clock starts when a worker takes it.
// Duration: from just before the first release until the last request finished (ramp-down included).
#pragma once

#include "fp4moe/status.h"
#include "loadgen/dataset.h"
#include "loadgen/numpy_random.h"
#include "loadgen/request.h"

#include <chrono>
#include <functional>
#include <limits>
#include <vector>

namespace fp4moe::loadgen {

/// Sends one prompt with the given output length; `run_start` is the origin of start_time. Called from worker
/// threads, several at once: it must be thread-safe and must not throw.
using send_fn = std::function<request_result(const bench_prompt &, std::int64_t output_len,
                                             std::chrono::steady_clock::time_point run_start)>;

struct schedule_options {
    double request_rate = std::numeric_limits<double>::infinity(); ///< requests/s; inf: all at once
    int max_concurrency = 0;                                       ///< 0: no limit
    int warmup_requests = 1;
    double warmup_pause_s = 1.0; ///< pause after the warmup (sglang: 1 s; tests shorten it)
};

struct run_outcome {
    std::vector<request_result> outputs; ///< in dataset order, failed ones included
    double duration_s = 0;
    int warmup_failed = 0; ///< warmup requests that failed (some may fail when at least one succeeded)
    int workers = 0;       ///< requests that could be in flight at once: min(N, limit), or fewer threads if the
                           ///< system refused more (reported by the caller)
};

/// Runs the pass. `arrivals` draws the gaps (pass the dataset generator's state, as sglang's global generator).
/// Errors: invalid_argument for a bad option, internal when every warmup request failed (the first error inside)
/// or when not even one request thread can start.
result<run_outcome> run_schedule(const std::vector<bench_prompt> &prompts, const schedule_options &o,
                                 numpy_legacy_rng arrivals, const send_fn &send);

} // namespace fp4moe::loadgen
