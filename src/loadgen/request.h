// What one benchmark request produced, in sglang.bench_serving's terms (its `RequestFuncOutput`), plus the time of
// every chunk. Times are seconds on the steady clock; `start_time` is relative to the run's start, the others to
// the request's own start (taken when it gets its concurrency slot, as sglang does, so client-side queueing is
// not counted).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe::loadgen {

/// Which API the requests go to.
enum class backend_kind {
    sglang, ///< POST /generate (SGLang native): cumulative "text" and meta_info.completion_tokens per chunk
    openai, ///< POST /v1/completions: text deltas per chunk, usage in the last chunk (stream_options.include_usage)
};

/// "sglang" / "openai".
const char *backend_name(backend_kind b);

struct request_result {
    bool success = false;
    std::string error; ///< why it failed ("" on success): transport error, HTTP status and body, error chunk
    std::string generated_text;
    std::int64_t prompt_len = 0;
    std::int64_t output_len = 0;     ///< server-reported completion tokens (else the requested length, as sglang)
    double start_time = 0;           ///< seconds from the run's start to this request's start
    double ttft = 0;                 ///< first chunk with text, seconds from the request's start
    double latency = 0;              ///< last non-empty stream line (the [DONE] included), seconds from the start
    std::vector<double> itl;         ///< inter-token latencies: sglang backend a chunk's gap split evenly over its new
                                     ///< tokens; openai one entry per text chunk
    std::vector<double> chunk_times; ///< arrival of every chunk that carried text, seconds from the start
};

} // namespace fp4moe::loadgen
