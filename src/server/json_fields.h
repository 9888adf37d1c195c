// Typed access to the fields of a JSON request body, with the checks every route shares: wrong type, out of
// range, non-integer where an integer is required. Each failure throws `api_error` (400) whose message and
// `param` name the field ("max_tokens must be an integer, got a string"). A field that is absent or JSON
// null reads as "not given" (std::nullopt), as OpenAI's SDK and pydantic treat them.
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe::server {

using json = nlohmann::json;

/// Parses a request body. Throws api_error 400 for invalid JSON (the parser's message, cut short; the body
/// is never echoed), invalid UTF-8 or a lone surrogate (the parser rejects both), and for a body that is not
/// a JSON object.
json parse_body(std::string_view body);

/// "a string", "an integer", "a number", "a boolean", "an array", "an object", "null".
const char *json_type_name(const json &v);

/// Integer field in [lo, hi]. Accepts an integral JSON number written as a float (10.0), as pydantic does;
/// refuses 1.5, true, "10". `param` is the name used in messages (defaults to `key`).
std::optional<std::int64_t> get_int(const json &obj, std::string_view key, std::int64_t lo, std::int64_t hi,
                                    std::string_view param = {});
/// Finite number field in [lo, hi] (inclusive), returned as float; refuses strings and booleans.
std::optional<float> get_float(const json &obj, std::string_view key, double lo, double hi,
                               std::string_view param = {});
std::optional<bool> get_bool(const json &obj, std::string_view key, std::string_view param = {});
std::optional<std::string> get_string(const json &obj, std::string_view key, std::string_view param = {});
/// An object field (e.g. stream_options, sampling_params).
std::optional<json> get_object(const json &obj, std::string_view key, std::string_view param = {});

/// `stop`: a string or a list of strings; at most `max_count` entries of at most `max_bytes` each, none empty.
std::vector<std::string> get_stop(const json &obj, std::string_view key, std::size_t max_count, std::size_t max_bytes,
                                  std::string_view param = {});
/// A list of token ids, each in [0, vocab); at most `max_count`.
std::vector<std::int32_t> get_token_ids(const json &v, std::string_view param, std::int64_t vocab,
                                        std::size_t max_count);

/// Throws 400 "`param` is not supported: why" when `key` is present and not null / not equal to its neutral
/// value (checked by the caller-supplied predicate).
void refuse_if(bool present, std::string_view param, std::string_view why);

} // namespace fp4moe::server
