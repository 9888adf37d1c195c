// sglang.bench_serving's metrics (its `calculate_metrics`), definition for definition (reference/benchmarks.md §1.4).
//
// Over successful requests: completed; total input = sum of prompt_len; total output = sum of server-reported
// output_len; throughputs = totals / duration; concurrency = sum of E2E latencies / duration (Little's law).
// TTFT and E2E: per request. TPOT: per request (latency - ttft) / (output_len - 1), only for output_len > 1.
// ITL: the pooled list of every request's per-token gaps (token-weighted). Statistics as numpy computes them:
// mean, median, std (population, ddof 0), percentiles with linear interpolation; an empty list counts as [0]
// (sglang's `np.mean(x or 0)`), except E2E, which is NaN when nothing succeeded (sglang's np.mean([])).
// Peak output throughput: every token event (start + ttft, then + each itl) bucketed into 1-s bins counted from
// the earliest successful start; the fullest bin. Peak concurrent requests: per 1-s bin, the requests whose
// [start, end] second range covers it; the largest count. Failed requests add nothing but are counted apart.
#pragma once

#include "loadgen/request.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fp4moe::loadgen {

/// numpy-style summary of one sample.
struct stat_summary {
    double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

/// numpy.percentile(v, p) with the default linear method; v need not be sorted; v must not be empty.
double percentile(std::vector<double> v, double p);
/// Summary of v; v empty: all zeros (sglang's `x or 0`).
stat_summary summarize(const std::vector<double> &v);

struct bench_metrics {
    std::int64_t completed = 0;
    std::int64_t failed = 0;
    std::int64_t total_input = 0;
    std::int64_t total_output = 0;
    std::int64_t total_output_retokenized = 0;
    double duration_s = 0;
    double request_throughput = 0; ///< req/s
    double input_throughput = 0;   ///< tok/s
    double output_throughput = 0;  ///< tok/s
    double total_throughput = 0;   ///< tok/s
    double max_output_tokens_per_s = 0;
    std::int64_t max_concurrent_requests = 0;
    double concurrency = 0;
    stat_summary e2e_ms, ttft_ms, tpot_ms, itl_ms;
    std::vector<std::string> errors; ///< distinct error messages of failed requests, "N x message"
};

/// Computes the metrics of one pass. `retokenize` counts the tokens of a generated text (sglang's
/// `len(tokenizer.encode(text))`); null: the retokenized total is 0.
bench_metrics calculate_metrics(const std::vector<request_result> &outputs, double duration_s,
                                const std::function<std::int64_t(const std::string &)> &retokenize);

} // namespace fp4moe::loadgen
