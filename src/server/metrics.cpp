#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace fp4moe::server {
namespace {

double seconds(engine_clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

// vLLM's bucket bounds, with finer steps at the low end for the inter-token ones (a small model on a CPU
// answers in milliseconds).
std::vector<double> ttft_bounds() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_bounds() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
            0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
}
std::vector<double> latency_bounds() {
    return {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,
            15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::string escape_label(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

} // namespace

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double v) {
    const auto i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin(); // le: v <= bound
    ++counts_[static_cast<std::size_t>(i)];
    sum_ += v;
    ++count_;
}

void histogram::render(std::string &out, const std::string &name, const std::string &labels) const {
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
    }
    out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
    out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_);
    out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

server_metrics::server_metrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", escape_label(model_name))), ttft_(ttft_bounds()), itl_(itl_bounds()),
      tpot_(itl_bounds()), e2e_(latency_bounds()), queue_(latency_bounds()) {}

void server_metrics::observe(const request_output &o, request_timing &t) {
    std::lock_guard lock(mu_);
    for (const auto &tp : o.token_times) {
        if (!t.seen_token) {
            t.seen_token = true;
            t.first_token = tp;
            ttft_.observe(seconds(tp - o.arrival));
            if (o.first_scheduled != engine_clock::time_point{}) queue_.observe(seconds(o.first_scheduled - o.arrival));
        } else {
            itl_.observe(seconds(tp - t.last_token));
        }
        t.last_token = tp;
        ++t.tokens;
    }
    if (o.finish != finish_reason::none) {
        const auto end = t.seen_token ? t.last_token : engine_clock::now();
        e2e_.observe(seconds(end - o.arrival));
        if (t.tokens > 1) tpot_.observe(seconds(t.last_token - t.first_token) / static_cast<double>(t.tokens - 1));
    }
}

void server_metrics::count_response(int status) {
    std::lock_guard lock(mu_);
    ++responses_[status];
}

std::string server_metrics::render(const engine_stats &s) const {
    std::string out;
    out.reserve(16384);
    const std::string &l = labels_;
    auto gauge = [&](const char *name, const char *help, double v) {
        out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, l, v);
    };
    auto counter = [&](const char *name, const char *help, std::int64_t v) {
        out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, l, v);
    };
    gauge("vllm:num_requests_running", "Requests in the running batch.", static_cast<double>(s.running));
    gauge("vllm:num_requests_waiting", "Requests accepted and not running (queued or preempted).",
          static_cast<double>(s.queued));
    gauge("vllm:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0 to 1).",
          s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / static_cast<double>(s.kv_blocks_total) : 0.0);
    gauge("fp4moe:kv_blocks_used", "KV-cache blocks in use.", static_cast<double>(s.kv_blocks_used));
    gauge("fp4moe:kv_blocks_total", "KV-cache blocks.", static_cast<double>(s.kv_blocks_total));
    counter("vllm:prompt_tokens_total", "Prompt tokens of accepted requests.", s.prompt_tokens);
    counter("vllm:generation_tokens_total", "Generated tokens.", s.generation_tokens);
    counter("vllm:num_preemptions_total", "Preemptions (a request's KV freed to be recomputed later).", s.preemptions);
    counter("fp4moe:engine_steps_total", "Model forward steps.", s.steps);
    counter("fp4moe:idle_kv_leaks_total", "Times the engine went idle with KV blocks still allocated (must be 0).",
            s.idle_kv_leaks);
    out += "# HELP vllm:request_success_total Finished requests by finish reason.\n"
           "# TYPE vllm:request_success_total counter\n";
    const std::pair<const char *, std::int64_t> finished[] = {{"stop", s.finished_stop},
                                                              {"length", s.finished_length},
                                                              {"abort", s.finished_abort},
                                                              {"error", s.finished_error}};
    for (const auto &[reason, n] : finished)
        out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", l, reason, n);

    std::lock_guard lock(mu_);
    out += "# HELP fp4moe:http_responses_total HTTP responses by status code.\n"
           "# TYPE fp4moe:http_responses_total counter\n";
    for (const auto &[code, n] : responses_)
        out += fmt::format("fp4moe:http_responses_total{{{},status=\"{}\"}} {}\n", l, code, n);
    auto hist = [&](const char *name, const char *help, const histogram &h) {
        out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
        h.render(out, name, l);
    };
    hist("vllm:time_to_first_token_seconds", "Time to first token (arrival to first sampled token).", ttft_);
    hist("vllm:inter_token_latency_seconds", "Time between consecutive tokens of a request.", itl_);
    hist("vllm:request_time_per_output_token_seconds", "Per request: (last - first token time) / (tokens - 1).", tpot_);
    hist("vllm:e2e_request_latency_seconds", "Arrival to finish.", e2e_);
    hist("vllm:request_queue_time_seconds", "Arrival to the first scheduled step.", queue_);
    return out;
}

} // namespace fp4moe::server
