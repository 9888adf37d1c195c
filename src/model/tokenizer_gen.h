// A generated Hugging Face tokenizer for synthetic checkpoints (`fp4moe make-model`).
//
// Byte-level BPE in the format the real GLM / Qwen / DeepSeek checkpoints ship (models.md section 8): the 256
// GPT-2 byte symbols, merges learned deterministically from a small built-in corpus, the family's
// pre-tokenizer regex, its special tokens (appended after the BPE vocabulary) and a Jinja chat template.
// The vocabulary is small (about a thousand tokens): the point is the file format, not compression.
#pragma once

#include "model/presets.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

struct added_token {
    std::string content;
    std::int64_t id = 0;
    bool special = true; ///< false for <think>/</think>, which are added but not special in the real files
};

struct generated_tokenizer {
    std::string tokenizer_json;        ///< tokenizer.json text
    std::string tokenizer_config_json; ///< tokenizer_config.json text (with chat_template)
    std::string chat_template;         ///< the Jinja template embedded in tokenizer_config.json
    std::int64_t bpe_vocab = 0;        ///< 256 byte symbols + merged tokens
    std::int64_t merges = 0;
    std::int64_t size = 0; ///< bpe_vocab + added tokens: the smallest valid vocab_size
    std::vector<added_token> added;

    // The family's roles, as added-token contents; empty when the family has none (GLM has no bos).
    std::string bos, eos, pad;
    std::vector<std::string> stop; ///< every end-of-turn token (config.json's eos_token_id list)

    /// Id of an added token; -1 when absent.
    std::int64_t id_of(std::string_view content) const;
};

/// The family's tokenizer. Deterministic: the same family always gives the same bytes. `model_max_length`
/// goes into tokenizer_config.json. Pure and thread-safe.
generated_tokenizer generate_tokenizer(tokenizer_family family, std::int64_t model_max_length);

/// The family's pre-tokenizer regexes (models.md section 8.2), applied in order as HF `Split` steps.
std::vector<std::string> tokenizer_family_regexes(tokenizer_family family);

} // namespace fp4moe
