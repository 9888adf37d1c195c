// The CPU forward against golden outputs written by Hugging Face transformers (tests/model/golden/
// make_golden.py: tiny random checkpoints, float64 reference on the bf16 weights).
//
// Tolerance: fp4moe rounds the MoE/MLP inputs to bf16 (relative error <= 2^-9 per element) and stores K/V in
// bf16; everything else is fp32. Through a few layers that leaves a normalized logit error of order 1e-3
// (measured: see the printed values); 1e-2 is the bound, an order of magnitude above the expected error and
// far below what any real bug (a wrong rotary pairing, a missing bias, a wrong routing weight) produces,
// which is >= 0.1.
#include "backend/cpu/runners.h"
#include "model/model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

using namespace fp4moe;

namespace {

std::string fixture(const std::string &name) {
    return std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/golden/" + name;
}

nlohmann::json read_json(const std::string &path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in);
}

struct golden_case {
    std::vector<std::int32_t> prompt;
    std::vector<std::vector<double>> logits;
    std::vector<double> final_hidden;
    std::vector<std::int32_t> greedy;
    std::vector<double> greedy_margins; ///< transformers' top-1 minus top-2 logit at each greedy step
};

std::vector<golden_case> read_cases(const std::string &file) {
    std::vector<golden_case> out;
    const nlohmann::json j = read_json(file); // keep it alive: a range-for over read_json(file)[..] dangles
    for (const auto &c : j.at("cases"))
        out.push_back({c["prompt"].get<std::vector<std::int32_t>>(),
                       c["logits"].get<std::vector<std::vector<double>>>(),
                       c["final_hidden"].get<std::vector<double>>(), c["greedy"].get<std::vector<std::int32_t>>(),
                       c["greedy_margins"].get<std::vector<double>>()});
    return out;
}

double normalized_error(const float *got, const std::vector<double> &want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(std::isfinite(got[i])) << "element " << i;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

class GoldenModel : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        runner_ = cpu::make_ref_runner();
        model_options opts;
        opts.threads = 2;
        opts.max_batch_tokens = 64;
        auto m = model::load(fixture(GetParam()), opts, [this](const moe_desc &, std::int64_t) {
            moe_choice c;
            c.runner = runner_.get();
            c.tactic = runner_->tactics(moe_desc{})[0];
            return c;
        });
        ASSERT_TRUE(m.ok()) << m.get_status().to_string();
        model_ = std::move(m.value());
        // <family>-nvfp4 is <family> quantized by `fp4moe quantize`; its reference is transformers run on the
        // dequantized NVFP4 weights (the exact values fp4moe computes with).
        const bool nvfp4 = GetParam().ends_with("-nvfp4");
        cases_ = read_cases(fixture(GetParam() + (nvfp4 ? "/golden_nvfp4.json" : "/golden.json")));
        if (nvfp4) {
            ASSERT_FALSE(model_->weights().config.quant.quant_algo.empty()) << "expected an NVFP4 checkpoint";
        }
        ASSERT_EQ(cases_.size(), 3u) << "golden.json should hold the three prompts of make_golden.py";
    }

    std::unique_ptr<moe_runner> runner_;
    std::unique_ptr<model> model_;
    std::vector<golden_case> cases_;
    double max_abs_ = 0.0;
};

} // namespace

TEST_P(GoldenModel, LogitsAtEveryPositionMatchTransformers) {
    const auto vocab = model_->config().vocab_size;
    for (const auto &c : cases_) {
        kv_cache kv(model_->config(), 8);
        std::vector<std::int32_t> blocks(8);
        std::iota(blocks.begin(), blocks.end(), 0);
        seq_step s{c.prompt, 0, blocks, true};
        std::vector<float> logits;
        ASSERT_TRUE(model_->forward({&s, 1}, kv, logits).ok());
        ASSERT_EQ(logits.size(), c.prompt.size() * vocab);
        for (std::size_t t = 0; t < c.prompt.size(); ++t) {
            const double err = normalized_error(logits.data() + t * vocab, c.logits[t]);
            for (std::int64_t v = 0; v < vocab; ++v)
                max_abs_ = std::max(max_abs_, std::abs(logits[t * vocab + v] - c.logits[t][v]));
            EXPECT_LT(err, 1e-2) << "prompt of " << c.prompt.size() << " tokens, position " << t;
            if (t + 1 == c.prompt.size())
                std::printf("  %zu-token prompt: last-position logit error %.2e (max abs so far %.3f)\n",
                            c.prompt.size(), err, max_abs_);
        }
        const double herr = normalized_error(
            model_->last_hidden().data() + (c.prompt.size() - 1) * model_->config().hidden_size, c.final_hidden);
        EXPECT_LT(herr, 1e-2);
    }
}

// Greedy decoding is compared tolerance-aware. Random tiny models have near-ties (top-2 logit gaps of 1e-3
// occur within 32 steps), and fp4moe's logits differ from the float64 reference by up to ~2.5e-2 (bf16 K/V and
// MoE inputs), so an exact match of a free-running continuation past a near-tie would test luck, not code.
// A step flips only when two logits err in opposite directions: kTie = 2 x (2 x 0.025). Two checks:
//  - teacher-forced, on transformers' 32-token path: where its margin exceeds kTie our argmax is its token;
//    at a near-tie its token is within kTie of our best logit;
//  - free-running: our own continuation equals transformers' up to its first near-tie (all 32 when none).
constexpr double kTie = 0.1;

TEST_P(GoldenModel, GreedyContinuationMatchesTransformers) {
    const auto vocab = model_->config().vocab_size;
    for (const auto &c : cases_) {
        ASSERT_EQ(c.greedy_margins.size(), c.greedy.size());
        kv_cache kv(model_->config(), 8);
        std::vector<std::int32_t> blocks(8);
        std::iota(blocks.begin(), blocks.end(), 0);
        std::vector<std::int32_t> path = c.prompt;
        path.insert(path.end(), c.greedy.begin(), c.greedy.end() - 1);
        seq_step s{path, 0, blocks, true};
        std::vector<float> logits;
        ASSERT_TRUE(model_->forward({&s, 1}, kv, logits).ok());
        for (std::size_t i = 0; i < c.greedy.size(); ++i) {
            const float *row = logits.data() + (c.prompt.size() - 1 + i) * vocab;
            const auto best = std::max_element(row, row + vocab) - row;
            if (c.greedy_margins[i] > kTie)
                EXPECT_EQ(best, c.greedy[i]) << "step " << i << " of the " << c.prompt.size() << "-token prompt";
            else
                EXPECT_LT(row[best] - row[c.greedy[i]], kTie) << "near-tie step " << i;
        }

        // Free-running: the steps before transformers' first near-tie must match exactly.
        std::size_t n_cmp = 0;
        while (n_cmp < c.greedy.size() && c.greedy_margins[n_cmp] > kTie) ++n_cmp;
        kv_cache kv2(model_->config(), 8);
        std::vector<std::int32_t> tokens = c.prompt, got;
        std::int64_t start = 0;
        for (std::size_t step = 0; step < n_cmp; ++step) {
            std::span<const std::int32_t> fresh(tokens.data() + start, tokens.size() - start);
            seq_step st{fresh, start, blocks, false};
            ASSERT_TRUE(model_->forward({&st, 1}, kv2, logits).ok());
            start = static_cast<std::int64_t>(tokens.size());
            const auto next =
                static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            got.push_back(next);
            tokens.push_back(next);
        }
        EXPECT_EQ(got,
                  std::vector<std::int32_t>(c.greedy.begin(), c.greedy.begin() + static_cast<std::ptrdiff_t>(n_cmp)))
            << "free-running continuation of the " << c.prompt.size() << "-token prompt";
        std::printf("  %zu-token prompt: %zu of %zu greedy steps before the first near-tie\n", c.prompt.size(), n_cmp,
                    c.greedy.size());
    }
}

TEST_P(GoldenModel, BatchOfSequencesMatchesEachAlone) {
    // All prompts in one step (different lengths, separate block tables) give the same last-token logits as
    // the golden single-sequence runs.
    const auto vocab = model_->config().vocab_size;
    kv_cache kv(model_->config(), 8 * static_cast<std::int64_t>(cases_.size()));
    std::vector<std::vector<std::int32_t>> tables;
    std::vector<seq_step> batch;
    for (std::size_t i = 0; i < cases_.size(); ++i) {
        tables.emplace_back(8);
        std::iota(tables.back().begin(), tables.back().end(), static_cast<std::int32_t>(8 * i));
    }
    for (std::size_t i = 0; i < cases_.size(); ++i) batch.push_back({cases_[i].prompt, 0, tables[i], false});
    std::vector<float> logits;
    ASSERT_TRUE(model_->forward(batch, kv, logits).ok());
    ASSERT_EQ(logits.size(), cases_.size() * vocab);
    for (std::size_t i = 0; i < cases_.size(); ++i)
        EXPECT_LT(normalized_error(logits.data() + i * vocab, cases_[i].logits.back()), 1e-2) << "sequence " << i;
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenModel,
                         ::testing::Values("glm4_moe", "qwen3_moe", "glm4_moe-nvfp4", "qwen3_moe-nvfp4"),
                         [](const auto &info) {
                             std::string n = info.param;
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });
