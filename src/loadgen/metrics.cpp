#include "loadgen/metrics.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace fp4moe::loadgen {

double percentile(std::vector<double> v, double p) {
    FP4MOE_ASSERT(!v.empty());
    std::sort(v.begin(), v.end());
    const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(idx));
    const auto hi = std::min(lo + 1, v.size() - 1);
    const double t = idx - static_cast<double>(lo);
    // numpy's _lerp: from the nearer end, so the result is exact at both ends.
    const double d = v[hi] - v[lo];
    return t < 0.5 ? v[lo] + d * t : v[hi] - d * (1.0 - t);
}

stat_summary summarize(const std::vector<double> &v) {
    if (v.empty()) return {};
    stat_summary s;
    const double n = static_cast<double>(v.size());
    s.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / n);
    s.median = percentile(v, 50);
    s.p90 = percentile(v, 90);
    s.p95 = percentile(v, 95);
    s.p99 = percentile(v, 99);
    s.max = *std::max_element(v.begin(), v.end());
    return s;
}

namespace {

stat_summary to_ms(stat_summary s) {
    for (double *x : {&s.mean, &s.median, &s.std, &s.p90, &s.p95, &s.p99, &s.max}) *x *= 1000.0;
    return s;
}

} // namespace

bench_metrics calculate_metrics(const std::vector<request_result> &outputs, double duration_s,
                                const std::function<std::int64_t(const std::string &)> &retokenize) {
    bench_metrics m;
    m.duration_s = duration_s;
    std::vector<double> ttfts, tpots, itls, e2e;
    std::map<std::string, int> errors;
    double min_start = std::numeric_limits<double>::infinity(), max_end = -min_start;
    for (const auto &o : outputs) {
        if (!o.success) {
            ++m.failed;
            ++errors[o.error];
            continue;
        }
        ++m.completed;
        m.total_input += o.prompt_len;
        m.total_output += o.output_len;
        if (retokenize) m.total_output_retokenized += retokenize(o.generated_text);
        if (o.output_len > 1) tpots.push_back((o.latency - o.ttft) / static_cast<double>(o.output_len - 1));
        itls.insert(itls.end(), o.itl.begin(), o.itl.end());
        ttfts.push_back(o.ttft);
        e2e.push_back(o.latency);
        min_start = std::min(min_start, o.start_time);
        max_end = std::max(max_end, o.start_time + o.latency);
    }
    const double d = duration_s;
    m.request_throughput = static_cast<double>(m.completed) / d;
    m.input_throughput = static_cast<double>(m.total_input) / d;
    m.output_throughput = static_cast<double>(m.total_output) / d;
    m.total_throughput = static_cast<double>(m.total_input + m.total_output) / d;
    m.ttft_ms = to_ms(summarize(ttfts));
    m.tpot_ms = to_ms(summarize(tpots));
    m.itl_ms = to_ms(summarize(itls));
    if (e2e.empty()) {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        m.e2e_ms = {nan, nan, nan, nan, nan, nan, nan};
    } else {
        m.e2e_ms = to_ms(summarize(e2e));
    }
    m.concurrency = std::accumulate(e2e.begin(), e2e.end(), 0.0) / d;

    if (m.completed > 0) {
        const auto bins = static_cast<std::size_t>(std::ceil(max_end - min_start)) + 1;
        std::vector<double> tokens(bins, 0.0);
        std::vector<std::int64_t> running(bins, 0);
        auto bump = [&](double t) {
            const auto b = static_cast<long long>(t - min_start); // Python int(): toward zero
            if (b >= 0 && static_cast<std::size_t>(b) < bins) tokens[static_cast<std::size_t>(b)] += 1;
        };
        for (const auto &o : outputs) {
            if (!o.success) continue;
            double t = o.start_time + o.ttft;
            bump(t);
            for (double g : o.itl) bump(t += g);
            const auto s0 = static_cast<long long>(o.start_time - min_start);
            const auto s1 = static_cast<long long>(o.start_time + o.latency - min_start);
            for (long long s = s0; s <= s1; ++s)
                if (s >= 0 && static_cast<std::size_t>(s) < bins) ++running[static_cast<std::size_t>(s)];
        }
        m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
        m.max_concurrent_requests = *std::max_element(running.begin(), running.end());
    }
    for (const auto &[msg, n] : errors) m.errors.push_back(fmt::format("{} x {}", n, msg));
    return m;
}

} // namespace fp4moe::loadgen
