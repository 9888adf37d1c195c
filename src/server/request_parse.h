// Request bodies -> what the engine runs: the three request formats the server speaks (OpenAI completions,
// OpenAI chat completions, SGLang's /generate), parsed and validated before anything is queued.
//
// Validation happens here, in O(size of the request), with caps (n, stop strings, prompts per request), so a
// refused request costs nothing in the engine: wrong types, ranges, out-of-vocabulary ids, empty prompts,
// prompts at or past the context, max_tokens past the context, and parameters we do not implement (refused
// with a 400 that says so, never silently ignored when they change the output). Every failure throws
// api_error (400, or 404 for an unknown model) naming the field. Fields that do not change the output and
// that we do not know (OpenAI's `user`, SGLang's `lora_path: null`) are ignored.
#pragma once

#include "fp4moe/tokenizer.h"
#include "runtime/sampler.h"
#include "server/json_fields.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe::server {

/// The model and server limits parsing checks against.
struct parse_limits {
    std::vector<std::string> model_names; ///< names accepted in `model` (the served name and the model dir)
    std::int64_t vocab = 0;               ///< token ids must be in [0, vocab)
    std::int64_t max_model_len = 0;       ///< prompt + max_tokens limit
    std::int64_t kv_positions = 0;        ///< the KV cache's capacity in positions (bounds default max_tokens)
    int max_choices = 64;                 ///< prompts x n per request
    int max_n = 16;
    std::size_t max_stop = 16;         ///< stop strings per request
    std::size_t max_stop_bytes = 1024; ///< bytes per stop string
};

/// One parsed request: prompts x n independent engine requests sharing the sampling parameters (choice i of
/// prompt p has index p * n + i; with a seed, it samples with seed + index so the choices differ).
struct generation_request {
    std::vector<std::vector<std::int32_t>> prompts;
    sampling_params params;
    int n = 1;
    bool stream = false;
    bool include_usage = false; ///< stream_options.include_usage
    bool logprobs = false;      ///< report the chosen tokens' log-probabilities
    bool chat = false;
    /// Names used in error messages: the prompt field ("prompt", "messages", "text", "input_ids") and the
    /// max-tokens field as the client spelled it ("max_tokens", "max_completion_tokens",
    /// "sampling_params.max_new_tokens"); `param_prefix` is put before sampling parameter names.
    std::string prompt_param = "prompt";
    std::string max_tokens_param = "max_tokens";
    std::string param_prefix;
    std::string rid; ///< /generate: the client's request id, if any

    int choices() const { return static_cast<int>(prompts.size()) * n; }
};

/// 404 unless `model` is absent or one of lim.model_names.
void check_model(const json &body, const parse_limits &lim);

/// POST /v1/completions.
generation_request parse_completion(const json &body, const tokenizer &tok, const parse_limits &lim);
/// POST /v1/chat/completions (messages rendered with the tokenizer's chat template).
generation_request parse_chat(const json &body, const tokenizer &tok, const parse_limits &lim);
/// POST /generate (SGLang's native API: text or input_ids, sampling_params, stream).
generation_request parse_generate(const json &body, const tokenizer &tok, const parse_limits &lim);

} // namespace fp4moe::server
