// The sampler against hand-computed distributions: logits ln(1), ln(2), ln(3), ln(4) give probabilities
// 0.1, 0.2, 0.3, 0.4, so every mask and temperature has an exact expected result.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace fp4moe;

namespace {

const std::vector<float> kLogits = {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};

std::vector<float> probs(const sampling_params &p, std::vector<float> logits = kLogits,
                         std::vector<std::int32_t> prompt = {}) {
    sampler s(p, prompt);
    return s.probabilities(logits);
}

void expect_probs(const std::vector<float> &got, const std::vector<double> &want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

sampling_params params() {
    sampling_params p;
    p.seed = 0;
    return p;
}

} // namespace

TEST(Sampler, TemperatureOneIsTheSoftmax) {
    expect_probs(probs(params()), {0.1, 0.2, 0.3, 0.4});
}

TEST(Sampler, TemperatureScalesLogits) {
    auto p = params();
    p.temperature = 0.5f; // p^2: 1, 4, 9, 16 over 30
    expect_probs(probs(p), {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0});
    p.temperature = 2.0f; // sqrt(p)
    const double s = 1 + std::sqrt(2.0) + std::sqrt(3.0) + 2;
    expect_probs(probs(p), {1 / s, std::sqrt(2.0) / s, std::sqrt(3.0) / s, 2 / s});
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
    auto p = params();
    p.temperature = 0.0f;
    expect_probs(probs(p), {0, 0, 0, 1});
    sampler s(p, {});
    std::vector<float> tie = {0.5f, 3.0f, 3.0f, -1.0f};
    EXPECT_EQ(s.sample(tie).token, 1);
    std::vector<float> l = kLogits;
    EXPECT_EQ(s.sample(l).token, 3);
}

TEST(Sampler, TopK) {
    auto p = params();
    p.top_k = 2;
    expect_probs(probs(p), {0, 0, 3 / 7.0, 4 / 7.0});
    p.top_k = 1;
    expect_probs(probs(p), {0, 0, 0, 1});
    p.top_k = 4;
    expect_probs(probs(p), {0.1, 0.2, 0.3, 0.4});
    p.top_k = -1;
    expect_probs(probs(p), {0.1, 0.2, 0.3, 0.4});
    p.top_k = 1; // ties with the k-th logit are kept
    expect_probs(probs(p, {1.0f, 2.0f, 2.0f, 0.0f}), {0, 0.5, 0.5, 0});
}

TEST(Sampler, TopP) {
    auto p = params();
    p.top_p = 0.65f; // 0.4 (mass above 0), 0.3 (0.4 < 0.65); 0.2 has 0.7 above it
    expect_probs(probs(p), {0, 0, 3 / 7.0, 4 / 7.0});
    p.top_p = 0.75f; // 0.2 has 0.7 above it: kept
    expect_probs(probs(p), {0, 2 / 9.0, 3 / 9.0, 4 / 9.0});
    p.top_p = 0.05f; // the top token always survives
    expect_probs(probs(p), {0, 0, 0, 1});
}

TEST(Sampler, MinP) {
    auto p = params();
    p.min_p = 0.7f; // threshold 0.28: keeps 0.3 and 0.4
    expect_probs(probs(p), {0, 0, 3 / 7.0, 4 / 7.0});
    p.min_p = 0.3f; // threshold 0.12: drops 0.1
    expect_probs(probs(p), {0, 2 / 9.0, 3 / 9.0, 4 / 9.0});
    p.min_p = 1.0f;
    expect_probs(probs(p), {0, 0, 0, 1});
}

TEST(Sampler, MasksApplyInVllmOrder) {
    auto p = params();
    p.top_k = 3;    // {0.2, 0.3, 0.4} / 0.9
    p.top_p = 0.5f; // 4/9 (nothing above), 3/9 (4/9 < 0.5 above); 2/9 has 7/9 above
    expect_probs(probs(p), {0, 0, 3 / 7.0, 4 / 7.0});
    p = params();
    p.temperature = 0.5f; // 1, 4, 9, 16 over 30
    p.min_p = 0.5f;       // threshold 8/30: keeps 9 and 16
    expect_probs(probs(p), {0, 0, 9 / 25.0, 16 / 25.0});
    p = params();
    p.top_p = 0.5f; // 0.4, 0.3 -> 3/7, 4/7
    p.min_p = 0.8f; // of 4/7: threshold 0.457 drops 3/7
    expect_probs(probs(p), {0, 0, 0, 1});
}

TEST(Sampler, RepetitionPenaltyOverPromptAndOutput) {
    auto p = params();
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
    sampler s(p, std::vector<std::int32_t>{0, 1});
    std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f};
    EXPECT_EQ(s.sample(l).token, 0); // 1 (2 / 2) ties with token 2 (1): lowest id
    EXPECT_FLOAT_EQ(l[0], 1.0f);
    EXPECT_FLOAT_EQ(l[1], -4.0f);
    EXPECT_FLOAT_EQ(l[2], 1.0f);
    EXPECT_FLOAT_EQ(l[3], 0.5f);
    s.accept(3); // output tokens count too
    std::vector<float> l2 = {2.0f, -2.0f, 1.0f, 0.5f};
    s.sample(l2);
    EXPECT_FLOAT_EQ(l2[3], 0.25f);
    EXPECT_FLOAT_EQ(l2[2], 1.0f);
}

TEST(Sampler, PresenceAndFrequencyOverOutputOnly) {
    auto p = params();
    p.temperature = 0.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    sampler s(p, std::vector<std::int32_t>{0}); // prompt tokens are not penalized
    s.accept(2);
    s.accept(2);
    s.accept(3);
    std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
    EXPECT_EQ(s.sample(l).token, 0);
    EXPECT_FLOAT_EQ(l[0], 1.0f);
    EXPECT_FLOAT_EQ(l[1], 1.0f);
    EXPECT_FLOAT_EQ(l[2], 1.0f - 0.5f - 0.5f);
    EXPECT_FLOAT_EQ(l[3], 1.0f - 0.5f - 0.25f);
    // The sampled token 0 is now counted.
    std::vector<float> l2 = {1.0f, 1.0f, 1.0f, 1.0f};
    EXPECT_EQ(s.sample(l2).token, 1);
    EXPECT_FLOAT_EQ(l2[0], 0.25f);
    // Negative penalties encourage repetition.
    p.presence_penalty = -1.0f;
    p.frequency_penalty = 0.0f;
    sampler e(p, {});
    e.accept(3);
    std::vector<float> l3 = {1.0f, 1.0f, 1.0f, 0.5f};
    EXPECT_EQ(e.sample(l3).token, 3);
}

TEST(Sampler, PenaltiesBeforeTemperature) {
    auto p = params();
    p.temperature = 0.5f;
    p.frequency_penalty = std::log(2.0f); // token 3: ln 4 - ln 2 = ln 2, then squared by T = 0.5
    sampler s(p, {});
    s.accept(3);
    expect_probs(s.probabilities(kLogits), {1 / 18.0, 4 / 18.0, 9 / 18.0, 4 / 18.0});
}

TEST(Sampler, SeededSamplingIsReproducible) {
    auto p = params();
    p.seed = 42;
    sampler a(p, {}), b(p, {});
    p.seed = 43;
    sampler c(p, {});
    std::vector<std::int32_t> ta, tb, tc;
    for (int i = 0; i < 200; ++i) {
        std::vector<float> la = kLogits, lb = kLogits, lc = kLogits;
        ta.push_back(a.sample(la).token);
        tb.push_back(b.sample(lb).token);
        tc.push_back(c.sample(lc).token);
    }
    EXPECT_EQ(ta, tb);
    EXPECT_NE(ta, tc);
    EXPECT_EQ(a.seed(), 42u);
    p.seed = -1;
    sampler r1(p, {}), r2(p, {});
    EXPECT_NE(r1.seed(), r2.seed());
}

// A chi-square goodness-of-fit over 30000 draws from {0.2, 0.3, 0.5}. 2 degrees of freedom: the 0.1 % critical
// value is 13.8; the seed is fixed, so the test is deterministic, and a biased sampler (e.g. off by one bucket, or
// drawing from the unnormalized weights) lands far above it.
TEST(Sampler, FrequenciesMatchTheDistribution) {
    auto p = params();
    p.seed = 1234;
    sampler s(p, {});
    const std::vector<double> want = {0.2, 0.3, 0.5};
    std::vector<double> count(3, 0.0);
    const int n = 30000;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = {std::log(0.2f), std::log(0.3f), std::log(0.5f)};
        ++count[s.sample(l).token];
    }
    double chi2 = 0.0;
    for (int t = 0; t < 3; ++t) chi2 += (count[t] - n * want[t]) * (count[t] - n * want[t]) / (n * want[t]);
    EXPECT_LT(chi2, 13.8) << count[0] << " " << count[1] << " " << count[2];
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
    auto p = params();
    p.top_k = 2;
    p.seed = 7;
    sampler s(p, {});
    for (int i = 0; i < 500; ++i) {
        std::vector<float> l = kLogits;
        EXPECT_GE(s.sample(l).token, 2);
    }
}

TEST(Sampler, LogprobIsLogSoftmaxAfterTemperature) {
    auto p = params();
    p.logprobs = true;
    p.top_k = 1; // masks do not change the logprob
    sampler s(p, {});
    std::vector<float> l = kLogits;
    const auto c = s.sample(l);
    EXPECT_EQ(c.token, 3);
    EXPECT_NEAR(c.logprob, std::log(0.4), 1e-6);
    p.temperature = 0.0f; // greedy: temperature 1
    sampler g(p, {});
    std::vector<float> l2 = kLogits;
    EXPECT_NEAR(g.sample(l2).logprob, std::log(0.4), 1e-6);
    p.temperature = 0.5f;
    sampler h(p, {});
    std::vector<float> l3 = kLogits;
    EXPECT_NEAR(h.sample(l3).logprob, std::log(16 / 30.0), 1e-6);
}

TEST(Sampler, LargeVocabTopPMatchesFullSort) {
    // More candidates than the sorted head (1024): the nucleus needs the full sort.
    const int vocab = 4096; // uniform: each 2^-12, exactly; the 2049th token has exactly 0.5 above it
    std::vector<float> flat(vocab, 0.0f);
    auto p = params();
    p.top_p = 0.5f;
    auto got = probs(p, flat);
    for (int t = 0; t < vocab; ++t) EXPECT_EQ(got[t], t < 2048 ? 1.0f / 2048 : 0.0f) << t; // ties: lowest ids
}

TEST(SamplingParams, DefaultsAreValid) {
    EXPECT_TRUE(validate(sampling_params{}).ok());
}

TEST(SamplingParams, ValidationNamesTheParameter) {
    auto msg = [](auto edit, std::int64_t vocab = 0) {
        sampling_params p;
        edit(p);
        const auto st = validate(p, vocab);
        EXPECT_EQ(st.code(), status_code::invalid_argument);
        return st.message();
    };
    EXPECT_EQ(msg([](auto &p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
    EXPECT_EQ(msg([](auto &p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
    EXPECT_EQ(msg([](auto &p) { p.temperature = -1.0f; }), "temperature must be >= 0, got -1");
    EXPECT_EQ(msg([](auto &p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }),
              "temperature must be >= 0, got nan");
    EXPECT_EQ(msg([](auto &p) { p.top_k = -2; }), "top_k must be -1 or 0 (off) or positive, got -2");
    EXPECT_EQ(msg([](auto &p) { p.min_p = 1.5f; }), "min_p must be in [0, 1], got 1.5");
    EXPECT_EQ(msg([](auto &p) { p.min_p = -0.1f; }), "min_p must be in [0, 1], got -0.1");
    EXPECT_EQ(msg([](auto &p) { p.repetition_penalty = 0.0f; }), "repetition_penalty must be > 0, got 0");
    EXPECT_EQ(msg([](auto &p) { p.presence_penalty = 2.5f; }), "presence_penalty must be in [-2, 2], got 2.5");
    EXPECT_EQ(msg([](auto &p) { p.frequency_penalty = -3.0f; }), "frequency_penalty must be in [-2, 2], got -3");
    EXPECT_EQ(msg([](auto &p) { p.max_tokens = 0; }), "max_tokens must be >= 1, got 0");
    EXPECT_EQ(msg([](auto &p) { p.seed = -2; }), "seed must be -1 (random) or >= 0, got -2");
    EXPECT_EQ(msg([](auto &p) { p.stop = {"a", ""}; }), "stop[1] must not be an empty string");
    EXPECT_EQ(msg(
                  [](auto &p) {
                      p.stop_token_ids = {5, 100};
                  },
                  100),
              "stop_token_ids: 100 is outside the vocabulary [0, 100)");
    EXPECT_EQ(msg([](auto &p) { p.stop_token_ids = {-1}; }), "stop_token_ids: -1 is negative");
    sampling_params edge;
    edge.temperature = 0.0f;
    edge.top_k = -1;
    edge.top_p = 1.0f;
    edge.min_p = 1.0f;
    edge.presence_penalty = -2.0f;
    edge.frequency_penalty = 2.0f;
    edge.max_tokens = 1;
    EXPECT_TRUE(validate(edge).ok());
}
