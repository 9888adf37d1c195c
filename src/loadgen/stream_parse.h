// Parsing a streamed response as sglang.bench_serving does, fed with bytes as they arrive from the socket.
//
// Lines: split on '\n' wherever reads cut them (a chunk may arrive in pieces, several in one read); each line is
// stripped, empty ones skipped, a leading "data: " (or "data:") removed, "[DONE]" ends nothing but counts for the
// latency. SSE comments (":...") and "event:/id:/retry:" fields are ignored. A data line that is not JSON fails the
// request (sglang's json.loads would raise).
//
// sglang (/generate): a chunk with non-empty cumulative "text" is a token event; its meta_info.completion_tokens is
// the output length so far. The first such chunk sets TTFT; a later one with n new tokens appends its gap to the
// previous token event n times, divided by n (so coalesced chunks still yield per-token ITL); n = 0 is skipped.
// openai (/v1/completions): a chunk with non-empty choices[0].text is a token event: the first sets TTFT, each later
// one appends one ITL entry; "usage.completion_tokens" in any chunk (the include_usage chunk has no choices) is the
// output length. Both: a chunk carrying "error" (an object or a string; also {"object": "error"}) fails the request
// with its message, where sglang would ignore it: a failure is counted, never hidden.
#pragma once

#include "fp4moe/status.h"
#include "loadgen/request.h"

#include <functional>
#include <string>
#include <string_view>

namespace fp4moe::loadgen {

/// Splits a byte stream into lines, whatever the read boundaries. Not thread-safe.
class line_splitter {
public:
    /// Appends bytes; calls `on_line` for every complete line (without the '\n').
    void feed(std::string_view bytes, const std::function<void(std::string_view)> &on_line);
    /// Delivers a final line that had no '\n', if any.
    void finish(const std::function<void(std::string_view)> &on_line);

private:
    std::string partial_;
};

/// Accumulates one streamed response into a request_result. Not thread-safe; one per request.
class stream_accumulator {
public:
    /// `out.output_len` must hold the requested length (kept when the server reports none, as sglang does).
    stream_accumulator(backend_kind backend, request_result &out) : backend_(backend), out_(out) {}

    /// One line received at `t` seconds after the request started. A non-ok status means the request failed
    /// (malformed chunk, error chunk); the caller stops reading.
    status on_line(std::string_view line, double t);
    /// Bytes as read from the socket at time `t`: splits them into lines and calls on_line; stops at the first error.
    status on_bytes(std::string_view bytes, double t);
    /// End of the body: the last unterminated line, then checks that a token arrived at all.
    status finish(double t);

private:
    status on_data(std::string_view payload, double t);
    void token_event(double t, std::int64_t new_tokens);

    backend_kind backend_;
    request_result &out_;
    line_splitter lines_;
    bool first_token_ = false;
    double last_token_time_ = 0;
    std::int64_t last_output_len_ = 0;
};

} // namespace fp4moe::loadgen
