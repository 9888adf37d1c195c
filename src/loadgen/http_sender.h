// Sending one benchmark request over HTTP (cpp-httplib, one connection per call) and the small GETs around a run.
//
// sglang backend: POST {base}/generate {"text" | "input_ids", "sampling_params": {"temperature": 0.0,
// "max_new_tokens", "ignore_eos"}, "stream", "logprob_start_len": -1}, as sglang.bench_serving sends it.
// openai backend: POST {base}/v1/completions {"model", "prompt", "temperature": 0.0, "best_of": 1, "max_tokens",
// "stream", "stream_options": {"include_usage": true}, "ignore_eos"}.
// A non-200 answer fails the request with the status and the body; a transport error with httplib's reason and the
// URL. Only http:// is supported (the Debian cpp-httplib build is used without TLS here).
#pragma once

#include "fp4moe/status.h"
#include "loadgen/dataset.h"
#include "loadgen/request.h"

#include <chrono>
#include <optional>
#include <string>

namespace fp4moe::loadgen {

/// Where the server is: http://host:port plus an optional path prefix ("/api" in http://h:1/api).
struct endpoint {
    std::string host = "127.0.0.1";
    int port = 30000;
    std::string prefix; ///< "" or "/something" without a trailing slash

    /// "http://host:port" + prefix.
    std::string url() const;
};

/// Parses "http://host[:port][/prefix]" (port defaults to 80). Errors name the URL.
result<endpoint> parse_endpoint(const std::string &url);

struct sender_options {
    backend_kind backend = backend_kind::sglang;
    std::string model;   ///< "model" of openai requests
    std::string api_key; ///< sent as "Authorization: Bearer KEY" when not empty
    bool stream = true;
    bool ignore_eos = true;
    double read_timeout_s = 600; ///< a request fails when no byte arrives for this long
};

/// The JSON body of one request (exposed for tests).
std::string request_body(const sender_options &o, const bench_prompt &p, std::int64_t output_len);

/// Sends one request and reads the whole stream; never throws. `run_start` is the steady-clock origin of
/// start_time; the request's own clock starts at the call. The result carries prompt_len, timings and the error.
request_result send_request(const endpoint &ep, const sender_options &o, const bench_prompt &p, std::int64_t output_len,
                            std::chrono::steady_clock::time_point run_start);

/// GET {base}{path}: the body when the status is 200; otherwise an error naming the URL, the status and the body
/// (code unsupported when the server cannot be reached at all). `http_status` (may be null) receives the HTTP
/// status, 0 when none arrived.
result<std::string> http_get(const endpoint &ep, const std::string &path, const std::string &api_key,
                             double timeout_s = 10, int *http_status = nullptr);

} // namespace fp4moe::loadgen
