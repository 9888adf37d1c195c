// generate() end to end: on the committed golden GLM-4.5 checkpoint (token ids only) greedy output is the model's
// own argmax path; on a tiny make-model checkpoint (with its tokenizer) text, streaming and stop strings.
#include "backend/cpu/runners.h"
#include "model/make_model.h"
#include "runtime/cpu_model.h"
#include "runtime/generate.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include <unistd.h>

using namespace fp4moe;

namespace {

std::string golden_dir() {
    return std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/golden/glm4_moe";
}

class GenerateGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        runner_ = cpu::make_ref_runner().release();
        model_options opts;
        opts.threads = 2;
        opts.max_batch_tokens = 64;
        auto m = model::load(golden_dir(), opts, [](const moe_desc &, std::int64_t) {
            moe_choice c;
            c.runner = runner_;
            c.tactic = runner_->tactics(moe_desc{})[0];
            return c;
        });
        ASSERT_TRUE(m.ok()) << m.get_status().to_string();
        model_ = m.value().release();
    }
    static void TearDownTestSuite() {
        delete model_;
        delete runner_;
    }

    // The argmax continuation computed directly with model::forward: the prompt in one step, then one token per
    // step (the same steps generate takes when the prompt fits one chunk).
    static std::vector<std::int32_t> argmax_path(const std::vector<std::int32_t> &prompt, int n) {
        const auto vocab = model_->config().vocab_size;
        kv_cache kv(model_->config(), 16);
        std::vector<std::int32_t> blocks(16);
        std::iota(blocks.begin(), blocks.end(), 0);
        std::vector<float> logits;
        seq_step s{prompt, 0, blocks, false};
        EXPECT_TRUE(model_->forward({&s, 1}, kv, logits).ok());
        std::vector<std::int32_t> out;
        for (int i = 0; i < n; ++i) {
            out.push_back(
                static_cast<std::int32_t>(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin()));
            if (i + 1 == n) break;
            seq_step d{{&out.back(), 1}, static_cast<std::int64_t>(prompt.size() + i), blocks, false};
            EXPECT_TRUE(model_->forward({&d, 1}, kv, logits).ok());
        }
        return out;
    }

    static sampling_params greedy(int max_tokens) {
        sampling_params p;
        p.temperature = 0.0f;
        p.max_tokens = max_tokens;
        p.ignore_eos = true;
        return p;
    }

    static inline moe_runner *runner_ = nullptr;
    static inline model *model_ = nullptr;
    const std::vector<std::int32_t> prompt_ = {3, 17, 92, 5, 41, 8, 60};
};

} // namespace

TEST_F(GenerateGolden, GreedyIsTheArgmaxPath) {
    const auto want = argmax_path(prompt_, 12);
    std::vector<std::int32_t> streamed;
    auto r = generate(*model_, nullptr, prompt_, greedy(12), {}, {}, [&](std::int32_t id) { streamed.push_back(id); });
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().output_ids, want);
    EXPECT_EQ(streamed, want);
    EXPECT_EQ(r.value().finish, "length");
    EXPECT_EQ(r.value().prompt_tokens, 7);
    EXPECT_TRUE(r.value().text.empty());
    EXPECT_GE(r.value().prefill_seconds, 0.0);
    EXPECT_GT(r.value().decode_tokens_per_s(), 0.0);
}

TEST_F(GenerateGolden, ChunkedPrefillGivesTheSameTokens) {
    const auto want = argmax_path(prompt_, 6);
    generate_options o;
    o.max_batch_tokens = 2;
    o.kv_block_size = 4;
    auto r = generate(*model_, nullptr, prompt_, greedy(6), o);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().output_ids, want);
}

TEST_F(GenerateGolden, StopTokenEndsGeneration) {
    const auto path = argmax_path(prompt_, 8);
    auto p = greedy(8);
    p.stop_token_ids = {path[4]};
    const auto first = std::find(path.begin(), path.end(), path[4]) - path.begin();
    auto r = generate(*model_, nullptr, prompt_, p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().finish, "stop");
    EXPECT_EQ(r.value().stop_token, path[4]);
    EXPECT_EQ(r.value().output_ids, std::vector<std::int32_t>(path.begin(), path.begin() + first + 1));
}

TEST_F(GenerateGolden, ContextLimits) {
    generate_options o;
    o.kv_capacity_tokens = 10; // 7-token prompt: 3 output tokens fill the context
    auto r = generate(*model_, nullptr, prompt_, greedy(50), o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().output_ids.size(), 3u);
    EXPECT_EQ(r.value().finish, "length");

    o.kv_capacity_tokens = 7;
    auto full = generate(*model_, nullptr, prompt_, greedy(5), o);
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.get_status().message(), "the prompt has 7 tokens; the context holds 7 (max_position_embeddings 256, "
                                           "KV capacity 7), which leaves no room for output");

    std::vector<std::int32_t> long_prompt(256, 5);
    auto too_long = generate(*model_, nullptr, long_prompt, greedy(5));
    ASSERT_FALSE(too_long.ok());
    EXPECT_NE(too_long.get_status().message().find("max_position_embeddings 256"), std::string::npos);
}

TEST_F(GenerateGolden, BadRequests) {
    auto p = greedy(4);
    p.top_p = 2.0f;
    auto r = generate(*model_, nullptr, prompt_, p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.get_status().message(), "top_p must be in (0, 1], got 2");
    EXPECT_FALSE(generate(*model_, nullptr, std::vector<std::int32_t>{}, greedy(4)).ok());
    const auto vocab = static_cast<std::int32_t>(model_->config().vocab_size);
    auto oov = generate(*model_, nullptr, std::vector<std::int32_t>{1, vocab}, greedy(4));
    ASSERT_FALSE(oov.ok());
    EXPECT_NE(oov.get_status().message().find("outside the vocabulary"), std::string::npos);
    p = greedy(4);
    p.stop = {"x"};
    EXPECT_FALSE(generate(*model_, nullptr, prompt_, p).ok()); // stop strings need a tokenizer
}

TEST_F(GenerateGolden, SeededSamplingIsReproducible) {
    sampling_params p;
    p.temperature = 1.0f;
    p.seed = 11;
    p.max_tokens = 10;
    p.ignore_eos = true;
    p.logprobs = true;
    auto a = generate(*model_, nullptr, prompt_, p);
    auto b = generate(*model_, nullptr, prompt_, p);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.value().output_ids, b.value().output_ids);
    EXPECT_EQ(a.value().seed, 11u);
    ASSERT_EQ(a.value().logprobs.size(), 10u);
    for (auto lp : a.value().logprobs) EXPECT_LE(lp, 0.0f);
}

namespace {

class GenerateTiny : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tiny_.create("test_generate");
        model_ = tiny_.model;
        tok_ = tiny_.tok;
    }
    static void TearDownTestSuite() { tiny_.destroy(); }

    static inline test::tiny_checkpoint tiny_;
    static inline cpu_model *model_ = nullptr;
    static inline tokenizer *tok_ = nullptr;
};

} // namespace

TEST_F(GenerateTiny, TextIsTheDecodedOutputAndStreams) {
    auto ids = tok_->encode("hello world", true, true);
    ASSERT_TRUE(ids.ok());
    sampling_params p;
    p.temperature = 0.0f;
    p.max_tokens = 24;
    p.ignore_eos = true;
    std::string streamed;
    auto r = generate(*model_, *tok_, ids.value(), p, [&](std::string_view s) { streamed += s; });
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const auto &g = r.value();
    EXPECT_EQ(g.output_ids.size(), 24u);
    EXPECT_EQ(g.text, tok_->decode(g.output_ids, true));
    EXPECT_EQ(streamed, g.text);
}

TEST_F(GenerateTiny, StopStringIsCutAndNeverStreamed) {
    auto ids = tok_->encode("hello world", true, true);
    ASSERT_TRUE(ids.ok());
    sampling_params p;
    p.temperature = 0.0f;
    p.max_tokens = 40;
    p.ignore_eos = true;
    auto full = generate(*model_, *tok_, ids.value(), p);
    ASSERT_TRUE(full.ok());
    const std::string text = full.value().text;
    // A stop string spanning a token boundary: the decoded text of tokens 2..4 minus its first and last character
    // (the generated vocabulary is ASCII-heavy; fall back to a 3-byte middle slice).
    std::string prefix3 = tok_->decode(std::span(full.value().output_ids).first(2), true);
    std::string upto5 = tok_->decode(std::span(full.value().output_ids).first(5), true);
    ASSERT_GT(upto5.size(), prefix3.size() + 2) << "tokens 3..5 decode to too little text: " << text;
    std::string stop = upto5.substr(prefix3.size() + 1, upto5.size() - prefix3.size() - 2);
    const auto at = text.find(stop);
    ASSERT_NE(at, std::string::npos);
    p.stop = {stop};
    std::vector<std::string> pieces;
    auto r = generate(*model_, *tok_, ids.value(), p, [&](std::string_view s) { pieces.emplace_back(s); });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().finish, "stop");
    EXPECT_EQ(r.value().stop_string, stop);
    EXPECT_EQ(r.value().text, text.substr(0, at));
    std::string streamed;
    for (const auto &s : pieces) streamed += s;
    EXPECT_EQ(streamed, text.substr(0, at));
    EXPECT_LT(r.value().output_ids.size(), full.value().output_ids.size());
}

TEST_F(GenerateTiny, StopIdsAreEosPlusExtrasUnlessIgnored) {
    ASSERT_FALSE(tok_->stop_ids().empty());
    sampling_params p;
    p.stop_token_ids = {5};
    auto ids = request_stop_ids(p, tok_, model_->get().config());
    std::vector<std::int32_t> want = {5};
    want.insert(want.end(), tok_->stop_ids().begin(), tok_->stop_ids().end());
    EXPECT_EQ(ids, want);
    p.ignore_eos = true;
    EXPECT_EQ(request_stop_ids(p, tok_, model_->get().config()), std::vector<std::int32_t>{5});
    p.ignore_eos = false; // without a tokenizer: config.json's eos_token_id
    auto no_tok = request_stop_ids(p, nullptr, model_->get().config());
    EXPECT_EQ(no_tok.size(), 1 + model_->get().config().eos_token_ids.size());
}

TEST_F(GenerateTiny, StopTokenTextIsNotEmitted) {
    auto ids = tok_->encode("hi", true, true);
    ASSERT_TRUE(ids.ok());
    sampling_params p;
    p.temperature = 0.0f;
    p.max_tokens = 4;
    p.ignore_eos = true;
    auto first = generate(*model_, *tok_, ids.value(), p);
    ASSERT_TRUE(first.ok());
    p.stop_token_ids = {first.value().output_ids[1]};
    auto r = generate(*model_, *tok_, ids.value(), p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().finish, "stop");
    const auto n = r.value().output_ids.size();
    ASSERT_LE(n, 2u);
    EXPECT_EQ(r.value().text, tok_->decode(std::span(r.value().output_ids).first(n - 1), true));
}
