// Per-request sampling: the parameters of an OpenAI/vLLM request, their validation, and the sampler that turns
// one row of logits into the next token.
//
// Order of the logit processing (vLLM's):
//   penalties (repetition over prompt + output; presence and frequency over output)
//   -> temperature (0: greedy, argmax; ties go to the lowest id)
//   -> top-k (ties with the k-th logit are kept) -> top-p (smallest prefix of the descending distribution whose
//   mass reaches p) -> min-p (drop tokens with probability < min_p x the largest)
//   -> draw from the renormalized survivors with the request's std::mt19937_64.
#pragma once

#include "fp4moe/status.h"

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fp4moe {

/// The sampling and stopping parameters of one request. Defaults are "off" for every filter and penalty.
struct sampling_params {
    float temperature = 1.0f;        ///< 0: greedy (argmax); must be >= 0
    std::int32_t top_k = 0;          ///< keep the k most likely tokens; 0 or -1: off
    float top_p = 1.0f;              ///< nucleus mass in (0, 1]; 1: off
    float min_p = 0.0f;              ///< in [0, 1]; drop tokens below min_p x the top probability; 0: off
    float repetition_penalty = 1.0f; ///< > 0; HF: a seen token's logit l becomes l > 0 ? l / r : l * r; 1: off
    float presence_penalty = 0.0f;   ///< [-2, 2]; OpenAI: l -= presence if the token occurs in the output
    float frequency_penalty = 0.0f;  ///< [-2, 2]; OpenAI: l -= frequency x its count in the output
    std::int64_t seed = -1;          ///< -1: seeded from std::random_device; else reproducible
    std::int64_t max_tokens = 16;    ///< most tokens to generate (>= 1); the stop token counts
    std::vector<std::string> stop;   ///< stop strings (non-empty); matched on the detokenized output, not emitted
    std::vector<std::int32_t> stop_token_ids; ///< extra ids that end generation (emitted as ids, not as text)
    bool ignore_eos = false;                  ///< do not stop on the tokenizer's stop_ids()
    bool skip_special_tokens = true;          ///< leave special added tokens out of the text
    bool logprobs = false;                    ///< report the log-probability of each chosen token
};

/// Checks every field; the message names the parameter and the value, e.g. "top_p must be in (0, 1], got 1.5"
/// (the HTTP server returns it as a 400). `vocab_size` > 0 also checks stop_token_ids against it.
status validate(const sampling_params &p, std::int64_t vocab_size = 0);

/// Samples the tokens of one request. Holds the penalty state (tokens seen so far) and the random generator.
/// Not thread-safe; one per request. Buffers grow to the vocabulary on first use and are reused.
class sampler {
public:
    /// `p` should have passed `validate`. `prompt` feeds the repetition penalty.
    sampler(const sampling_params &p, std::span<const std::int32_t> prompt);

    /// The seed actually used (the drawn one when p.seed == -1).
    std::uint64_t seed() const { return seed_; }

    struct choice {
        std::int32_t token = -1;
        /// log-softmax of the logits after penalties and temperature (temperature 1 for greedy), before the
        /// top-k/top-p/min-p masks: always finite. Computed only when sampling_params::logprobs is set, else 0.
        float logprob = 0.0f;
    };

    /// Picks the next token from one row of logits ([vocab], overwritten with the processed logits) and records
    /// it as output (for the penalties).
    choice sample(std::span<float> logits);

    /// The distribution `sample` would draw from for `logits` ([vocab] probabilities; one-hot for greedy).
    /// Does not record anything or advance the generator (for tests and logprob reports).
    std::vector<float> probabilities(std::span<const float> logits);

    /// Records a token as output without sampling it (e.g. a forced token); `sample` calls this itself.
    void accept(std::int32_t token);

private:
    void apply_penalties(std::span<float> logits) const;
    /// Penalties, temperature and the masks: fills cand_ / cand_p_ (normalized) from the processed logits.
    void build(std::span<float> logits);

    sampling_params p_;
    std::uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::unordered_set<std::int32_t> seen_;                 ///< prompt + output (repetition penalty)
    std::unordered_map<std::int32_t, std::int32_t> counts_; ///< output counts (presence, frequency)
    std::vector<std::int32_t> cand_;                        ///< surviving token ids
    std::vector<float> cand_p_;                             ///< their probabilities (sum 1)
    std::vector<std::uint64_t> keys_;                       ///< top-p sort keys (probability, id)
};

} // namespace fp4moe
