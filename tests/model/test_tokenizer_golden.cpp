// Golden tokenizer tests: ids, decodes and round trips against Hugging Face `tokenizers`, for one small
// byte-level BPE per family (Qwen3, GLM-4.5, DeepSeek-V3) with the family's exact pre-tokenizer regexes.
// fixtures/tokenizer/make_tokenizers.py wrote the files and cases.json; this test needs no Python.
#include "fp4moe/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace fp4moe {
namespace {

using json = nlohmann::json;

std::string fixture_dir() {
    return std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/tokenizer/";
}

const json &cases() {
    static const json c = [] {
        std::ifstream f(fixture_dir() + "cases.json");
        std::stringstream ss;
        ss << f.rdbuf();
        return json::parse(ss.str());
    }();
    return c;
}

std::vector<int32_t> ids_of(const json &j) {
    return j.get<std::vector<int32_t>>();
}

class tokenizer_golden : public ::testing::TestWithParam<std::string> {};

TEST_P(tokenizer_golden, matches_hf_tokenizers) {
    const std::string family = GetParam();
    auto loaded = tokenizer::load(fixture_dir() + family);
    ASSERT_TRUE(loaded.ok()) << loaded.get_status().to_string();
    const tokenizer &tok = loaded.value();
    const json &list = cases().at(family);
    ASSERT_GE(list.size(), 40u);
    size_t round_trips = 0, with_special = 0;
    for (const json &c : list) {
        const std::string text = c.at("text").get<std::string>();
        SCOPED_TRACE(family + " text: \"" + text + "\"");

        auto ids = tok.encode(text);
        ASSERT_TRUE(ids.ok()) << ids.get_status().to_string();
        EXPECT_EQ(ids.value(), ids_of(c.at("ids")));

        auto plain = tok.encode(text, /*allow_special=*/false);
        ASSERT_TRUE(plain.ok());
        EXPECT_EQ(plain.value(), ids_of(c.at("ids_no_special")));

        if (c.contains("ids_with_special")) {
            auto bos = tok.encode(text, true, /*add_special_tokens=*/true);
            ASSERT_TRUE(bos.ok());
            EXPECT_EQ(bos.value(), ids_of(c.at("ids_with_special")));
            ++with_special;
        }

        const std::string decoded = tok.decode(ids.value());
        EXPECT_EQ(decoded, c.at("decoded").get<std::string>());
        EXPECT_EQ(tok.decode(ids.value(), /*skip_special=*/true), c.at("decoded_skip").get<std::string>());
        // Round trip wherever `tokenizers` round-trips (NFC and lstrip/rstrip tokens legitimately change text).
        if (c.at("decoded").get<std::string>() == text) {
            EXPECT_EQ(decoded, text);
            ++round_trips;
        }

        tokenizer::stream_decoder stream(tok);
        std::string streamed;
        for (const int32_t id : ids.value()) streamed += stream.push(id);
        streamed += stream.flush();
        EXPECT_EQ(streamed, decoded);
    }
    EXPECT_GE(round_trips, list.size() - 3);
    if (family == "deepseek_v3") {
        EXPECT_EQ(with_special, list.size()); // TemplateProcessing adds BOS everywhere
    }
}

INSTANTIATE_TEST_SUITE_P(families, tokenizer_golden, ::testing::Values("qwen3", "glm4", "deepseek_v3"));

TEST(tokenizer_golden_files, both_merges_forms_are_covered) {
    auto first_merge = [](const std::string &family) {
        std::ifstream f(fixture_dir() + family + "/tokenizer.json");
        std::stringstream ss;
        ss << f.rdbuf();
        return json::parse(ss.str()).at("model").at("merges").at(0);
    };
    EXPECT_TRUE(first_merge("qwen3").is_array());
    EXPECT_TRUE(first_merge("deepseek_v3").is_string());
}

} // namespace
} // namespace fp4moe
