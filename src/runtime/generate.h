// One request, start to finish, on one model: prefill the prompt in chunks of max_batch_tokens, then decode one
// token per step until a stop condition. Used by `fp4moe generate`; the serving engine batches many requests
// with its own scheduler and KV block allocator.
#pragma once

#include "fp4moe/tokenizer.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/stop.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

class cpu_model;

struct generate_options {
    /// Tokens per prefill step; must not exceed the model's model_options::max_batch_tokens.
    std::int64_t max_batch_tokens = 512;
    /// KV cache size in tokens; 0: prompt + max_tokens (never more than max_position_embeddings). Sequences are
    /// capped at min(this, max_position_embeddings) tokens (prompt + output).
    std::int64_t kv_capacity_tokens = 0;
    std::int64_t kv_block_size = 16;
};

struct generate_result {
    std::vector<std::int32_t> output_ids; ///< generated ids, a final stop token included
    std::vector<float> logprobs;          ///< one per output id when sampling_params::logprobs (see sampler)
    std::string text;                     ///< the streamed text: no stop token, no stop string
    /// OpenAI's finish_reason: "stop" (a stop token or stop string) or "length" (max_tokens, or the context is
    /// full). A string here so that this header does not clash with the serving engine's finish_reason enum.
    std::string finish = "length";
    std::string stop_string;      ///< the stop string that matched, if any
    std::int32_t stop_token = -1; ///< the stop token id that matched, else -1
    std::int64_t prompt_tokens = 0;
    std::uint64_t seed = 0;       ///< the sampler's seed (the drawn one for seed -1)
    double prefill_seconds = 0.0; ///< prompt forward steps and the first token's sampling
    double decode_seconds = 0.0;  ///< the remaining output tokens
    double prefill_tokens_per_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0; }
    /// Output tokens after the first, per second of decode; 0 when only one token was generated.
    double decode_tokens_per_s() const {
        return decode_seconds > 0 && output_ids.size() > 1 ? (output_ids.size() - 1) / decode_seconds : 0.0;
    }
};

/// Receives each piece of text as soon as it is final (whole UTF-8 characters, no part of a stop string). Called on
/// the generating thread; may be empty.
using text_callback = std::function<void(std::string_view delta)>;
/// Receives each generated id (the stop token included) before its text is known; may be empty.
using token_callback = std::function<void(std::int32_t id)>;

/// The ids that end a request: params.stop_token_ids, then (unless ignore_eos) the tokenizer's stop_ids(), or
/// config.json's eos_token_id when `tok` is null.
std::vector<std::int32_t> request_stop_ids(const sampling_params &params, const tokenizer *tok,
                                           const model_config &config);

/// Generates a continuation of `prompt` (ids). With a tokenizer, output is detokenized, stop strings apply and the
/// tokenizer's stop_ids() end generation unless ignore_eos; without one (`tok` null) only stop_token_ids stop it
/// and `text` stays empty (stop strings are then an error). Errors (invalid_argument): the parameters (see
/// validate), an empty prompt, an id outside the vocabulary, a prompt that leaves no room for one output token
/// (prompt tokens >= max_position_embeddings or the KV capacity; the message gives both numbers), a bad
/// max_batch_tokens; and whatever model::forward reports.
result<generate_result> generate(model &m, const tokenizer *tok, std::span<const std::int32_t> prompt,
                                 const sampling_params &params, const generate_options &opts = {},
                                 const text_callback &on_text = {}, const token_callback &on_token = {});

/// The same on a cpu_model, with a tokenizer.
result<generate_result> generate(cpu_model &m, const tokenizer &tok, std::span<const std::int32_t> prompt,
                                 const sampling_params &params, const text_callback &on_text = {},
                                 const generate_options &opts = {});

} // namespace fp4moe
