// Output of `fp4moe bench serve`: sglang.bench_serving's printed block and its --output-file line, and our own
// report of a sweep (JSON, markdown, SVG).
#pragma once

#include "loadgen/metrics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe::loadgen {

/// What a pass was asked to do (the arguments sglang echoes in its block and its output file).
struct pass_info {
    std::string backend;      ///< "sglang" / "openai"
    std::string dataset_name; ///< "random" / "jsonl"
    double request_rate = 0;  ///< inf: all at once
    int max_concurrency = 0;  ///< 0: not set
    std::int64_t num_prompts = 0;
    std::int64_t random_input_len = 0, random_output_len = 0;
    double random_range_ratio = 0;
    std::string server_info_json; ///< the body of GET /server_info (or /get_server_info), "" when none answered
};

/// One pass: its arguments, metrics and (for --output-details) the requests.
struct pass_report {
    pass_info info;
    bench_metrics metrics;
    std::vector<request_result> outputs;
};

/// Python's repr of a float as sglang prints its arguments: "inf", "4.0", "0.5".
std::string python_float(double v);

/// sglang's result block (the MID layout of reference/benchmarks.md §1.5, labels left-aligned in 40 columns) with
/// the P90 rows of newer sglang, a "Failed requests" line, and, after the block, the distinct errors.
std::string format_result_block(const pass_report &p);

/// One line of sglang's --output-file (JSONL, appended): its keys in its order (std, p90, p95 included), plus
/// "failed"; an infinite request rate is written `Infinity` as Python's json.dumps writes it. `details` adds the
/// per-request lists (input_lens, output_lens, ttfts, itls, generated_texts, errors) as --output-details does, and
/// ours: latencies, start_times (seconds from the pass's start) and chunk_times (each text chunk's arrival).
std::string output_file_line(const pass_report &p, bool details);

/// The sweep's context for our report.
struct sweep_meta {
    std::string command, date, commit, machine, url;
    std::string backend, dataset, tokenizer;
    std::int64_t num_prompts = 0, random_input_len = 0, random_output_len = 0;
    double random_range_ratio = 0, request_rate = 0;
    std::uint32_t seed = 0;
    int warmup_requests = 0;
    std::string models_json;      ///< GET /v1/models body ("" when it failed)
    std::string server_info_json; ///< "" when none
};

/// {"meta": {...}, "rows": [one object per max-concurrency value: the output-file keys + errors]}.
std::string sweep_json(const sweep_meta &m, const std::vector<pass_report> &passes);
/// A markdown table (one row per max-concurrency value) with the meta as a bullet list.
std::string sweep_markdown(const sweep_meta &m, const std::vector<pass_report> &passes);
/// Two panels against max concurrency (log2 x): output token throughput, median TPOT (ms).
std::string sweep_svg(const sweep_meta &m, const std::vector<pass_report> &passes);

} // namespace fp4moe::loadgen
