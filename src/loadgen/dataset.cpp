#include "loadgen/dataset.h"

#include "core/error.h"
#include "fp4moe/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace fp4moe::loadgen {

std::vector<std::int64_t> compute_random_lens(numpy_legacy_rng &rng, std::int64_t full_len, double range_ratio,
                                              std::size_t n) {
    if (full_len <= 0) return std::vector<std::int64_t>(n, 0);
    // Python's int() truncates toward zero, as the cast does for the non-negative product.
    const auto low = std::max<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(full_len) * range_ratio), 1);
    return rng.randint(low, full_len + 1, n);
}

result<std::int32_t> hf_base_vocab_size(const std::string &tokenizer_path) {
    namespace fs = std::filesystem;
    const std::string file =
        fs::is_directory(tokenizer_path) ? (fs::path(tokenizer_path) / "tokenizer.json").string() : tokenizer_path;
    std::ifstream f(file);
    if (!f) return status(status_code::not_found, fmt::format("cannot open {}", file));
    try {
        const auto j = nlohmann::json::parse(f);
        const auto &vocab = j.at("model").at("vocab");
        if (!vocab.is_object() || vocab.empty())
            return status(status_code::corrupt, fmt::format("{}: model.vocab is not a non-empty object", file));
        return static_cast<std::int32_t>(vocab.size());
    } catch (const std::exception &e) {
        return status(status_code::corrupt, fmt::format("{}: {}", file, e.what()));
    }
}

result<std::vector<bench_prompt>> make_random_dataset(const random_dataset_options &o, const tokenizer *tok,
                                                      std::int32_t vocab_size, numpy_legacy_rng &rng) {
    if (o.num_prompts <= 0)
        return status(status_code::invalid_argument, fmt::format("--num-prompts must be > 0 (got {})", o.num_prompts));
    if (o.input_len <= 0)
        return status(status_code::invalid_argument,
                      fmt::format("--random-input-len must be > 0 (got {})", o.input_len));
    if (o.output_len <= 0)
        return status(status_code::invalid_argument,
                      fmt::format("--random-output-len must be > 0 (got {})", o.output_len));
    if (!(o.range_ratio >= 0.0 && o.range_ratio <= 1.0))
        return status(status_code::invalid_argument,
                      fmt::format("--random-range-ratio must be in [0, 1] (got {})", o.range_ratio));
    if (vocab_size <= 0)
        return status(status_code::invalid_argument, fmt::format("vocabulary size must be > 0 (got {})", vocab_size));
    if (!o.token_ids && !tok)
        return status(status_code::invalid_argument, "text prompts need a tokenizer (--tokenizer DIR)");

    const auto n = static_cast<std::size_t>(o.num_prompts);
    auto input_lens = compute_random_lens(rng, o.input_len, o.range_ratio, n);
    const auto output_lens = compute_random_lens(rng, o.output_len, o.range_ratio, n);
    if (!o.token_ids) {
        // The server adds the tokenizer's special tokens (e.g. BOS) when it re-tokenizes the text.
        std::int64_t specials = 0;
        auto e = tok->encode("", true, true);
        if (e.ok()) specials = static_cast<std::int64_t>(e.value().size());
        for (auto &l : input_lens) l = std::max<std::int64_t>(0, l - specials);
    }
    const auto offsets = rng.randint(0, vocab_size, n);

    std::vector<bench_prompt> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto &p = out[i];
        p.ids.resize(static_cast<std::size_t>(input_lens[i]));
        for (std::size_t j = 0; j < p.ids.size(); ++j)
            p.ids[j] = static_cast<std::int32_t>((offsets[i] + static_cast<std::int64_t>(i + j)) % vocab_size);
        p.prompt_len = input_lens[i];
        p.output_len = output_lens[i];
        p.use_ids = o.token_ids;
        if (!o.token_ids) {
            p.text = tok->decode(p.ids);
            p.ids.clear();
        }
    }
    return out;
}

namespace {

[[noreturn]] void row_error(const std::string &path, std::size_t line, const std::string &what) {
    fail(status_code::invalid_argument, "{}:{}: {}", path, line, what);
}

std::vector<std::int32_t> parse_ids(const nlohmann::json &v, const std::string &path, std::size_t line,
                                    const char *field) {
    std::vector<std::int32_t> ids;
    for (const auto &x : v) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
            row_error(path, line, fmt::format("\"{}\" must be an array of non-negative token ids", field));
        ids.push_back(x.get<std::int32_t>());
    }
    return ids;
}

} // namespace

result<std::vector<bench_prompt>> load_jsonl_dataset(const jsonl_dataset_options &o, const tokenizer *tok) {
    if (o.path.empty()) return status(status_code::invalid_argument, "the jsonl dataset needs --dataset-path FILE");
    if (o.num_prompts <= 0)
        return status(status_code::invalid_argument, fmt::format("--num-prompts must be > 0 (got {})", o.num_prompts));
    std::ifstream f(o.path);
    if (!f) return status(status_code::not_found, fmt::format("--dataset-path: cannot open {}", o.path));
    std::vector<bench_prompt> out;
    auto st = catch_status([&] {
        std::string line;
        for (std::size_t lineno = 1; std::getline(f, line) && static_cast<std::int64_t>(out.size()) < o.num_prompts;
             ++lineno) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(line);
            } catch (const std::exception &e) {
                row_error(o.path, lineno, fmt::format("not valid JSON ({})", e.what()));
            }
            if (!j.is_object()) row_error(o.path, lineno, "each line must be a JSON object");
            bench_prompt p;
            const nlohmann::json *prompt = nullptr;
            const char *field = "prompt";
            for (const char *k : {"prompt", "text", "input_ids"})
                if (j.contains(k)) {
                    prompt = &j[k];
                    field = k;
                    break;
                }
            if (!prompt) row_error(o.path, lineno, "no \"prompt\" (or \"text\" / \"input_ids\") field");
            if (prompt->is_string()) {
                if (!tok) row_error(o.path, lineno, "a text prompt needs a tokenizer to count it (--tokenizer DIR)");
                auto ids = tok->encode(prompt->get<std::string>(), true, false);
                if (!ids.ok()) row_error(o.path, lineno, ids.get_status().message());
                p.prompt_len = static_cast<std::int64_t>(ids.value().size());
                if (o.token_ids) {
                    p.ids = std::move(ids).value();
                    p.use_ids = true;
                } else {
                    p.text = prompt->get<std::string>();
                }
            } else if (prompt->is_array()) {
                p.ids = parse_ids(*prompt, o.path, lineno, field);
                p.prompt_len = static_cast<std::int64_t>(p.ids.size());
                p.use_ids = true;
            } else {
                row_error(o.path, lineno, fmt::format("\"{}\" must be a string or an array of token ids", field));
            }
            if (p.prompt_len == 0) row_error(o.path, lineno, "empty prompt");
            p.output_len = o.default_output_len;
            for (const char *k : {"output_len", "max_tokens"})
                if (j.contains(k)) {
                    if (!j[k].is_number_integer() || j[k].get<std::int64_t>() <= 0)
                        row_error(o.path, lineno, fmt::format("\"{}\" must be a positive integer", k));
                    p.output_len = j[k].get<std::int64_t>();
                    break;
                }
            if (p.output_len <= 0)
                row_error(o.path, lineno, "no \"output_len\" and no positive default (--random-output-len)");
            out.push_back(std::move(p));
        }
    });
    if (!st.ok()) return st;
    if (out.empty()) return status(status_code::invalid_argument, fmt::format("{}: no prompts in the file", o.path));
    return out;
}

} // namespace fp4moe::loadgen
