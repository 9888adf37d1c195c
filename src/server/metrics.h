// Prometheus metrics of the server (GET /metrics, text exposition format 0.0.4).
//
// Names are vLLM's where the meaning is the same, so existing dashboards and scrapers work unchanged; every
// series carries the label model_name="<served name>" as vLLM's do. What we expose:
//   gauges     vllm:num_requests_running, vllm:num_requests_waiting (accepted, not running, incl. preempted),
//              vllm:kv_cache_usage_perc (fraction 0..1 of KV blocks in use, as vLLM's despite the name),
//              fp4moe:kv_blocks_used, fp4moe:kv_blocks_total
//   counters   vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:num_preemptions_total,
//              vllm:request_success_total{finished_reason="stop|length|abort|error"},
//              fp4moe:engine_steps_total, fp4moe:idle_kv_leaks_total (must stay 0),
//              fp4moe:http_responses_total{status="200|400|..."}
//   histograms vllm:time_to_first_token_seconds (first token time - arrival),
//              vllm:inter_token_latency_seconds (gap between consecutive tokens of a request),
//              vllm:request_time_per_output_token_seconds ((last - first token time) / (tokens - 1), per request),
//              vllm:e2e_request_latency_seconds (finish - arrival), vllm:request_queue_time_seconds (first step -
//              arrival)
// Gauges and counters are read from engine_stats at scrape time (the engine counts them); histograms are fed
// from each request's per-token timestamps as its outputs arrive (request_output::token_times).
//
// Threading: observe_* run on the engine thread (inside output callbacks), count_response on HTTP threads,
// render on an HTTP thread; one mutex guards the histograms (a few adds per token).
#pragma once

#include "runtime/engine.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fp4moe::server {

/// A Prometheus histogram with fixed upper bounds (seconds). Not thread-safe (server_metrics locks).
class histogram {
public:
    explicit histogram(std::vector<double> bounds);
    void observe(double v);
    /// Appends the _bucket, _sum and _count lines of `name` with `labels` ("model_name=\"x\"").
    void render(std::string &out, const std::string &name, const std::string &labels) const;
    std::uint64_t count() const { return count_; }

private:
    std::vector<double> bounds_;
    std::vector<std::uint64_t> counts_; ///< per bucket (not cumulative); the last one is +Inf
    double sum_ = 0;
    std::uint64_t count_ = 0;
};

/// The per-request timing state an output callback keeps between outputs (engine thread only).
struct request_timing {
    bool seen_token = false;
    engine_clock::time_point first_token, last_token;
    std::int64_t tokens = 0;
};

class server_metrics {
public:
    explicit server_metrics(std::string model_name);

    /// Feeds the histograms from one output of a request (engine thread).
    void observe(const request_output &o, request_timing &t);
    /// Counts a response by status (HTTP threads).
    void count_response(int status);
    /// The whole exposition, gauges and counters from `s`.
    std::string render(const engine_stats &s) const;

private:
    std::string labels_; ///< model_name="..."
    mutable std::mutex mu_;
    histogram ttft_, itl_, tpot_, e2e_, queue_;
    std::map<int, std::uint64_t> responses_;
};

} // namespace fp4moe::server
