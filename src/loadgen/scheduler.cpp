#include "loadgen/scheduler.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace fp4moe::loadgen {
namespace {

using clock = std::chrono::steady_clock;

// Requests released by the arrival process, waiting for a worker.
class release_queue {
public:
    void push(std::size_t i) {
        {
            std::lock_guard lk(mu_);
            q_.push_back(i);
        }
        cv_.notify_one();
    }
    void close() {
        {
            std::lock_guard lk(mu_);
            closed_ = true;
        }
        cv_.notify_all();
    }
    /// The next released request; false once closed and drained.
    bool pop(std::size_t &i) {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return closed_ || !q_.empty(); });
        if (q_.empty()) return false;
        i = q_.front();
        q_.pop_front();
        return true;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::size_t> q_;
    bool closed_ = false;
};

// Sends `n` requests through `workers` threads; `arrival_gap` returns the wait after releasing request i (<= 0: none).
// `workers` is lowered to the threads the system would give (an unlimited burst of many thousands of requests can
// exceed them); at least one must start.
std::vector<request_result> dispatch(std::size_t n, std::size_t &workers, const std::function<double()> &arrival_gap,
                                     const std::function<request_result(std::size_t, clock::time_point)> &one,
                                     clock::time_point run_start) {
    std::vector<request_result> out(n);
    release_queue q;
    std::vector<std::thread> pool;
    pool.reserve(workers);
    for (std::size_t w = 0; w < workers; ++w) {
        try {
            pool.emplace_back([&] {
                for (std::size_t i; q.pop(i);) out[i] = one(i, run_start);
            });
        } catch (const std::system_error &) {
            if (pool.empty()) fail(status_code::internal, "cannot start a request thread");
            workers = pool.size();
            break;
        }
    }
    auto next = run_start;
    for (std::size_t i = 0; i < n; ++i) {
        q.push(i);
        const double gap = arrival_gap();
        if (gap > 0 && i + 1 < n) {
            next += std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(gap));
            std::this_thread::sleep_until(next);
        }
    }
    q.close();
    for (auto &t : pool) t.join();
    return out;
}

result<run_outcome> run_checked(const std::vector<bench_prompt> &prompts, const schedule_options &o,
                                numpy_legacy_rng arrivals, const send_fn &send) {
    if (prompts.empty()) return status(status_code::invalid_argument, "no prompts to send");
    if (!(o.request_rate > 0))
        return status(status_code::invalid_argument,
                      fmt::format("--request-rate must be > 0 or inf (got {})", o.request_rate));
    if (o.max_concurrency < 0)
        return status(status_code::invalid_argument,
                      fmt::format("--max-concurrency must be >= 1 (got {})", o.max_concurrency));
    if (o.warmup_requests < 0)
        return status(status_code::invalid_argument,
                      fmt::format("--warmup-requests must be >= 0 (got {})", o.warmup_requests));
    const std::size_t limit = o.max_concurrency > 0 ? static_cast<std::size_t>(o.max_concurrency) : SIZE_MAX;

    run_outcome r;
    if (o.warmup_requests > 0) {
        const auto &first = prompts.front();
        const auto out_len = std::min<std::int64_t>(first.output_len, 32);
        const auto n = static_cast<std::size_t>(o.warmup_requests);
        std::size_t workers = std::min(n, limit);
        auto warm = dispatch(
            n, workers, [] { return 0.0; }, [&](std::size_t, clock::time_point t0) { return send(first, out_len, t0); },
            clock::now());
        const auto ok = std::count_if(warm.begin(), warm.end(), [](const request_result &x) { return x.success; });
        r.warmup_failed = static_cast<int>(n) - static_cast<int>(ok);
        if (ok == 0)
            return status(
                status_code::internal,
                fmt::format("warmup failed: all {} warmup request(s) failed; first error: {}", n, warm.front().error));
        if (o.warmup_pause_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_pause_s));
    }

    const bool burst = std::isinf(o.request_rate);
    const double mean_gap = burst ? 0.0 : 1.0 / o.request_rate;
    const auto n = prompts.size();
    const auto start = clock::now();
    std::size_t workers = std::min(n, limit);
    r.outputs = dispatch(
        n, workers, [&] { return burst ? 0.0 : arrivals.exponential(mean_gap); },
        [&](std::size_t i, clock::time_point t0) { return send(prompts[i], prompts[i].output_len, t0); }, start);
    r.duration_s = std::chrono::duration<double>(clock::now() - start).count();
    r.workers = static_cast<int>(workers);
    return r;
}

} // namespace

result<run_outcome> run_schedule(const std::vector<bench_prompt> &prompts, const schedule_options &o,
                                 numpy_legacy_rng arrivals, const send_fn &send) {
    try {
        return run_checked(prompts, o, arrivals, send);
    } catch (const error &e) {
        return e.to_status();
    }
}

} // namespace fp4moe::loadgen
