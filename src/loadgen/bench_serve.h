// `fp4moe bench serve`: sglang.bench_serving's serving benchmark against a running server, in C++, with a sweep
// over --max-concurrency values in one invocation (one pass and one printed block per value).
//
// Before the passes: GET /v1/models (reachability, the served model name when --model is not given, server info
// for the report) and GET /server_info or /get_server_info (recorded when one answers). The tokenizer (text prompts,
// the retokenized output count) comes from --tokenizer, else --model when it is a directory, else the served
// model's id / root when that is a local directory. The dataset is built once; each pass restarts the arrival
// generator from the state the dataset left (as separate sglang invocations with one --seed would).
#pragma once

#include "fp4moe/status.h"
#include "loadgen/http_sender.h"
#include "loadgen/report.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace fp4moe::loadgen {

struct bench_serve_options {
    endpoint ep;
    backend_kind backend = backend_kind::sglang;
    std::string dataset_name = "random"; ///< "random" (or its synonym here "random-ids") or "jsonl"
    std::string dataset_path;            ///< the jsonl file
    std::int64_t num_prompts = 1000;
    std::int64_t random_input_len = 1024, random_output_len = 1024;
    double random_range_ratio = 0.0;
    double request_rate = std::numeric_limits<double>::infinity();
    std::vector<int> max_concurrency; ///< one pass per value; empty: one pass without a limit
    int warmup_requests = 1;
    double warmup_pause_s = 1.0;
    std::uint32_t seed = 1;
    std::string model;     ///< served model name for the openai backend ("" = the first of /v1/models)
    std::string tokenizer; ///< tokenizer or checkpoint directory ("" = found as the file comment says)
    std::string api_key;
    bool tokenize_prompt = false; ///< send token ids (sglang: input_ids; openai: a token-id prompt)
    bool disable_stream = false;
    bool disable_ignore_eos = false;
    double read_timeout_s = 600;
    std::string output_file; ///< sglang's JSONL, appended once per pass ("" = none)
    bool output_details = false;
    std::string command; ///< the command line, for the reports
};

struct bench_serve_result {
    sweep_meta meta;
    std::vector<pass_report> passes;
};

/// Runs every pass; `print` receives the progress lines and each result block as they come. Errors name the flag,
/// URL or file at fault: an unreachable server, a non-200 /v1/models, no tokenizer, a bad dataset, a failed warmup.
/// Failed requests are not errors: they are counted in each pass's metrics with their messages.
result<bench_serve_result> run_bench_serve(const bench_serve_options &o,
                                           const std::function<void(const std::string &)> &print);

} // namespace fp4moe::loadgen
