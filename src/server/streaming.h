// Writing a generation's response: one loop for every route and both modes.
//
// A route parses its request, submits it (refusals become an error response at once, before any byte of a
// stream), and hands the running `generation` with a `response_writer` (its wire format) to `respond`.
// Both streamed and non-streamed responses go out through httplib's chunked content provider: the handler
// thread waits for the engine's outputs inside it and can see the client leave (the socket turns unreadable
// or a write fails), so a client that disconnects has its request cancelled and its KV freed at once, in
// either mode. A consequence: the status line (200) is sent before generation ends, so an engine failure in
// a non-streamed response is reported as finish_reason "error", and in a stream as an error event followed by
// `data: [DONE]`.
#pragma once

#include "server/generation.h"
#include "server/server_state.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace fp4moe::server {

/// A wire format (OpenAI completion / chat, SGLang generate), stream or not. Called on one handler thread.
class response_writer {
public:
    virtual ~response_writer() = default;
    /// Stream: the bytes to send for this event (may be empty). Non-stream: accumulates and returns "".
    virtual std::string on_event(const output_event &e) = 0;
    /// After the last event: the stream's closing events ("data: [DONE]"), or the whole non-streamed body.
    virtual std::string finish() = 0;
    virtual bool stream() const = 0;
};

/// Sets `res` up to stream `g` through `w` (see the file comment). Takes ownership of both; counts the
/// response in state.inflight until it is written or abandoned.
void respond(server_state &state, httplib::Response &res, std::unique_ptr<generation> g,
             std::unique_ptr<response_writer> w);

/// Writes an error response (the OpenAI envelope) with its status; 503 gets Retry-After.
void send_error(httplib::Response &res, const api_error &e);

/// "data: <json>\n\n" (invalid UTF-8 replaced, so dumping never throws).
std::string sse(const nlohmann::json &j);
/// json.dump() that never throws.
std::string dump(const nlohmann::json &j);

/// What ended a choice that finished with "stop": the stop token id (a stop_token_ids entry or, unless
/// ignore_eos, one of the tokenizer's stop ids) when the last token is one, else the stop string found where
/// the emitted text ends (the engine cuts the text at the match). Null when neither can be told.
nlohmann::json matched_stop(const tokenizer &tok, const sampling_params &p, const std::vector<std::int32_t> &ids,
                            std::size_t emitted_bytes);

/// A random id with `prefix` ("cmpl-", "chatcmpl-"): 24 hex digits.
std::string random_id(std::string_view prefix);

} // namespace fp4moe::server
