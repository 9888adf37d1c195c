// HTTP errors in the OpenAI envelope: {"error": {"message", "type", "param", "code"}} with the matching status.
//
// Every error the server returns goes through here, so the shape never varies by route: 400 validation
// (`invalid_request_error`), 401 (`authentication_error`), 404 (`not_found_error`), 413, 415, 503
// (`unavailable_error`), 500 (`server_error`). `code` is the HTTP status as an integer (vLLM's choice).
// Messages are bounded (clients' text is never echoed at length) and name the parameter at fault.
#pragma once

#include "runtime/engine.h"

#include <string>
#include <string_view>

namespace fp4moe::server {

/// One error response. Thrown by request parsing (server internals, tier 2) and caught once in each route
/// handler, which turns it into the response; never escapes a handler.
struct api_error {
    int status = 400;
    std::string message;
    std::string param; ///< the request field at fault ("max_tokens", "messages[1].role"); empty: null
    std::string type;  ///< empty: derived from status (see type_for_status)
};

/// "invalid_request_error" (4xx but 401/404), "authentication_error", "not_found_error", "unavailable_error" (503),
/// "server_error" (other 5xx).
const char *type_for_status(int status);

/// The JSON body of `e` (at most ~1 KiB: the message is cut at 512 bytes).
std::string error_body(const api_error &e);

/// 400 naming `param`.
api_error bad_request(std::string message, std::string param = {});

/// Maps a refused engine submit: invalid_argument / too_long -> 400, queue_full / shutting_down -> 503.
/// `param` is the field the message points at (derived from the engine's message, which starts with the
/// parameter name for sampling errors; the caller passes the prompt field's name for prompt errors).
api_error from_submit(const submit_result &r, std::string_view prompt_param, std::string_view max_tokens_param);

/// A client-supplied string made safe to quote in a message or a log line: control characters escaped,
/// cut at `max` bytes (with "...").
std::string quote_for_message(std::string_view s, std::size_t max = 64);

} // namespace fp4moe::server
