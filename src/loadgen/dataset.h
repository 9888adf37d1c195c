// The prompts of a serving benchmark: sglang.bench_serving's `random` dataset (lengths drawn exactly as sglang
// draws them) and a JSONL file of prompts.
//
// random: input and output lengths are `np.random.randint(max(int(L * r), 1), L + 1, size=N)` (inputs first, then
// outputs, from one generator seeded with --seed), so with the default r = 0 they are uniform on [1, L] and with
// r = 1 exactly L. Token content follows sglang's `random-ids` rule, drawn from the same generator right after the
// lengths: offset_i = randint(0, V), token j of prompt i = (offset_i + i + j) mod V, V the tokenizer's base vocabulary
// (Hugging Face `vocab_size`: without added tokens). sglang's `random` takes its token content from ShareGPT
// conversations, which needs the ShareGPT file; the lengths, and so every throughput figure, do not depend on it.
// (The offsets are drawn from the same generator, so the Poisson gaps that follow match a sglang run with
// `--dataset-name random-ids`; its `random` draws nothing more from numpy before the gaps.)
// Text prompts are the tokenizer's decode of those ids, each length first reduced by the special tokens the
// tokenizer adds (as sglang does, since the server re-tokenizes and adds them); `prompt_len` is the sampled length.
//
// jsonl: one JSON object per line: "prompt" (a string, or an array of token ids), or "text" / "input_ids";
// optional "output_len" (or "max_tokens"), else the default output length. Empty lines are skipped. prompt_len is
// the tokenized length of a text prompt (no special tokens added) or the number of ids.
#pragma once

#include "fp4moe/status.h"
#include "loadgen/numpy_random.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe {
class tokenizer;
}

namespace fp4moe::loadgen {

/// One request of the benchmark. Either `text` or `ids` is the prompt (`use_ids`).
struct bench_prompt {
    std::string text;
    std::vector<std::int32_t> ids;
    bool use_ids = false;
    std::int64_t prompt_len = 0; ///< counted as sglang counts it (see the file comment); feeds the input throughput
    std::int64_t output_len = 0; ///< max_new_tokens / max_tokens sent
};

/// sglang's `compute_random_lens`: n draws on [max(int(full_len * range_ratio), 1), full_len]; all zero when
/// full_len <= 0 (nothing drawn). range_ratio must be in [0, 1] (checked by the caller).
std::vector<std::int64_t> compute_random_lens(numpy_legacy_rng &rng, std::int64_t full_len, double range_ratio,
                                              std::size_t n);

struct random_dataset_options {
    std::int64_t num_prompts = 1000;
    std::int64_t input_len = 1024;
    std::int64_t output_len = 1024;
    double range_ratio = 0.0;
    bool token_ids = false; ///< prompts as ids (sglang `--tokenize-prompt`); else as decoded text
};

/// The Hugging Face base vocabulary size (`tokenizer.vocab_size`: the BPE model's vocab without added tokens) of a
/// checkpoint or tokenizer directory, or of a `tokenizer.json` file. Errors name the file.
result<std::int32_t> hf_base_vocab_size(const std::string &tokenizer_path);

/// Builds the random dataset from `rng` (seeded by the caller; left just after the dataset's draws, where sglang's
/// arrival process continues). `vocab_size` is the base vocabulary V. `tok` decodes text prompts and counts the
/// special tokens it adds; it may be null only with `token_ids`. Errors: invalid_argument naming the option.
result<std::vector<bench_prompt>> make_random_dataset(const random_dataset_options &o, const tokenizer *tok,
                                                      std::int32_t vocab_size, numpy_legacy_rng &rng);

struct jsonl_dataset_options {
    std::string path;
    std::int64_t num_prompts = 1000;     ///< the first N rows (all rows when the file has fewer)
    std::int64_t default_output_len = 0; ///< for rows without "output_len" / "max_tokens"
    bool token_ids = false;              ///< send ids: text prompts are encoded with `tok`
};

/// Reads the JSONL dataset. `tok` counts text prompts (required when a row has text). Errors name the file, the
/// line and the field: not_found / io_error for the file, invalid_argument for a bad row or an empty file.
result<std::vector<bench_prompt>> load_jsonl_dataset(const jsonl_dataset_options &o, const tokenizer *tok);

} // namespace fp4moe::loadgen
