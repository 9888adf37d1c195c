// Routing rules against hand-computed expectations (reference/models.md 2.6, 4.3, 5.2).
#include "fp4moe/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace fp4moe;

namespace {

moe_desc qwen_like(std::int64_t e, std::int64_t k, bool renorm = true) {
    moe_desc d;
    d.hidden = 16;
    d.intermediate = 16;
    d.experts = e;
    d.top_k = k;
    d.routing.scoring = moe_scoring::softmax;
    d.routing.renormalize = renorm;
    return d;
}

moe_desc glm_like(std::int64_t e, std::int64_t k, int n_group = 1, int topk_group = 1, float scale = 2.5f) {
    moe_desc d = qwen_like(e, k);
    d.routing.scoring = moe_scoring::sigmoid;
    d.routing.correction_bias = true;
    d.routing.n_group = n_group;
    d.routing.topk_group = topk_group;
    d.routing.routed_scaling_factor = scale;
    return d;
}

struct routed {
    std::vector<std::int32_t> ids;
    std::vector<float> w;
};

routed route1(const moe_desc &d, std::vector<float> logits, const std::vector<float> &bias = {}) {
    moe_plan p(d, 1);
    auto st = moe_route(d, logits, bias.empty() ? nullptr : bias.data(), 1, p);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return {p.topk_ids, p.topk_weights};
}

} // namespace

TEST(Routing, SoftmaxTopKRenormalized) {
    // exp(logits) = 1, 2, 3, 4 -> p = .1 .2 .3 .4; top-2 = experts 3, 2; renormalized 4/7, 3/7.
    const auto d = qwen_like(4, 2);
    const auto r = route1(d, {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 2}));
    EXPECT_NEAR(r.w[0], 4.0f / 7.0f, 1e-6f);
    EXPECT_NEAR(r.w[1], 3.0f / 7.0f, 1e-6f);
}

TEST(Routing, SoftmaxWithoutRenormalization) {
    const auto r = route1(qwen_like(4, 2, false), {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 2}));
    EXPECT_NEAR(r.w[0], 0.4f, 1e-6f);
    EXPECT_NEAR(r.w[1], 0.3f, 1e-6f);
}

TEST(Routing, TiesGoToTheLowerExpertIndex) {
    const auto r = route1(qwen_like(5, 3), {1.0f, 1.0f, 1.0f, 1.0f, 1.0f});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{0, 1, 2}));
    for (float w : r.w) EXPECT_NEAR(w, 1.0f / 3.0f, 1e-6f);
    // A tie below the winner: expert 3 beats 1 and 2 on its own; 1 and 2 tie for the second place.
    const auto r2 = route1(qwen_like(4, 2), {0.0f, 0.5f, 0.5f, 2.0f});
    EXPECT_EQ(r2.ids, (std::vector<std::int32_t>{3, 1}));
}

TEST(Routing, SigmoidBiasChangesTheChoiceButNotTheWeights) {
    // All logits 0 -> s = 0.5 everywhere. The bias picks experts 3 and 1; weights come from the unbiased s:
    // 0.5 / (0.5 + 0.5) = 0.5 each, times routed_scaling_factor 2.5 = 1.25.
    const auto r = route1(glm_like(4, 2), {0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.1f, 0.0f, 0.2f});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 1}));
    EXPECT_FLOAT_EQ(r.w[0], 1.25f);
    EXPECT_FLOAT_EQ(r.w[1], 1.25f);
}

TEST(Routing, SigmoidWeightsAreTheUnbiasedScores) {
    // logits ln(3), 0 -> s = 0.75, 0.5; a large bias on expert 2 selects it with its own s = sigmoid(-ln 3)
    // = 0.25. Renormalized over {2: 0.25, 0: 0.75} -> 0.25, 0.75; scale 1.
    const auto r = route1(glm_like(3, 2, 1, 1, 1.0f), {std::log(3.0f), 0.0f, -std::log(3.0f)}, {0.0f, 0.0f, 10.0f});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{2, 0}));
    EXPECT_NEAR(r.w[0], 0.25f, 1e-6f);
    EXPECT_NEAR(r.w[1], 0.75f, 1e-6f);
}

TEST(Routing, GroupLimitedSelectionMasksGroups) {
    // E = 8 in 4 groups of 2, keep 2 groups, k = 2. s = 0.5 everywhere, biased scores b = 0.5 + bias:
    //   g0 {0.80, 0.50} = 1.30   g1 {0.78, 0.20} = 0.98   g2 {0.75, 0.50} = 1.25   g3 {0.50, 0.50} = 1.00
    // Kept groups g0, g2 -> top-2 of {e0 .80, e1 .50, e4 .75, e5 .50} = e0, e4. Without groups it would be
    // e0 and e2 (0.78).
    const std::vector<float> bias = {0.30f, 0.0f, 0.28f, -0.30f, 0.25f, 0.0f, 0.0f, 0.0f};
    const auto r = route1(glm_like(8, 2, 4, 2, 1.0f), std::vector<float>(8, 0.0f), bias);
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{0, 4}));
    EXPECT_FLOAT_EQ(r.w[0], 0.5f);
    EXPECT_FLOAT_EQ(r.w[1], 0.5f);
    const auto flat = route1(glm_like(8, 2, 1, 1, 1.0f), std::vector<float>(8, 0.0f), bias);
    EXPECT_EQ(flat.ids, (std::vector<std::int32_t>{0, 2}));
}

TEST(Routing, GroupScoreIsTheSumOfTheTopTwo) {
    // 2 groups of 4, keep 1. b: g0 {.9 .5 .5 .5} top-2 sum 1.4 (all four: 2.4); g1 {.8 .8 .1 .1} top-2 1.6.
    // The top-2 rule keeps g1 -> experts 4, 5.
    const std::vector<float> bias = {0.4f, 0.0f, 0.0f, 0.0f, 0.3f, 0.3f, -0.4f, -0.4f};
    const auto r = route1(glm_like(8, 2, 2, 1, 1.0f), std::vector<float>(8, 0.0f), bias);
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{4, 5}));
}

TEST(Routing, SharedExpertsAreExtraSlotsWithWeightOne) {
    auto d = glm_like(4, 2);
    d.shared = 2;
    const auto r = route1(d, {0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.1f, 0.0f, 0.2f});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 1, 4, 5}));
    EXPECT_FLOAT_EQ(r.w[2], 1.0f);
    EXPECT_FLOAT_EQ(r.w[3], 1.0f);
}

TEST(Routing, TopKEqualsExperts) {
    const auto r = route1(qwen_like(3, 3), {0.0f, std::log(2.0f), std::log(3.0f)});
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{2, 1, 0}));
    EXPECT_NEAR(r.w[0] + r.w[1] + r.w[2], 1.0f, 1e-6f);
}

TEST(Routing, ErrorsNameTheProblem) {
    const auto d = glm_like(4, 2);
    moe_plan p(d, 2);
    const std::vector<float> bias(4, 0.0f);
    std::vector<float> logits(8, 0.0f);
    logits[6] = std::numeric_limits<float>::quiet_NaN();
    auto st = moe_route(d, logits, bias.data(), 2, p);
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_NE(st.message().find("token 1 expert 2"), std::string::npos) << st.message();

    st = moe_route(d, std::vector<float>(12, 0.0f), bias.data(), 3, p);
    EXPECT_NE(st.message().find("at most 2"), std::string::npos) << st.message();

    st = moe_route(d, std::vector<float>(8, 0.0f), nullptr, 2, p);
    EXPECT_NE(st.message().find("e_score_correction_bias"), std::string::npos) << st.message();

    auto bad = d;
    bad.routing.topk_group = 5;
    EXPECT_NE(bad.validate().message().find("topk_group"), std::string::npos);
    bad = d;
    bad.top_k = 5;
    EXPECT_NE(bad.validate().message().find("top_k"), std::string::npos);
    bad = d;
    bad.hidden = 24;
    EXPECT_NE(bad.validate().message().find("multiples of 16"), std::string::npos);
}

TEST(Plan, PermutationCountsAndMaskedLayout) {
    // 3 tokens, E = 4, k = 2, no shared. ids: t0 {2, 0}, t1 {2, 3}, t2 {0, 2}.
    auto d = qwen_like(4, 2);
    moe_plan p(d, 4);
    p.tokens = 3;
    p.topk_ids = {2, 0, 2, 3, 0, 2};
    p.topk_weights.assign(6, 0.5f);
    moe_plan_from_ids(d, p);
    EXPECT_EQ(p.counts, (std::vector<std::int32_t>{2, 0, 3, 1}));
    EXPECT_EQ(p.offsets, (std::vector<std::int32_t>{0, 2, 2, 5, 6}));
    // expert 0: pairs 1 (t0 s1), 4 (t2 s0); expert 2: pairs 0, 2, 5; expert 3: pair 3.
    EXPECT_EQ(p.perm, (std::vector<std::int32_t>{1, 4, 0, 2, 5, 3}));
    for (std::int32_t r = 0; r < 6; ++r) EXPECT_EQ(p.inv_perm[p.perm[r]], r);
    // masked: stride max_tokens = 4, unused entries -1.
    const std::vector<std::int32_t> masked = {1, 4, -1, -1, -1, -1, -1, -1, 0, 2, 5, -1, 3, -1, -1, -1};
    EXPECT_EQ(p.masked_pairs, masked);
}

TEST(Plan, EmptyBatchAndNoReallocation) {
    auto d = glm_like(8, 2, 2, 1);
    d.shared = 1;
    moe_plan p(d, 16);
    const auto *ids = p.topk_ids.data();
    const auto *perm = p.perm.data();
    const auto *masked = p.masked_pairs.data();
    std::vector<float> bias(8, 0.0f), logits(16 * 8);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
    ASSERT_TRUE(moe_route(d, logits, bias.data(), 0, p).ok());
    EXPECT_EQ(p.offsets.back(), 0);
    for (std::int64_t t : {16, 5, 1, 16}) {
        ASSERT_TRUE(moe_route(d, logits, bias.data(), t, p).ok());
        EXPECT_EQ(p.offsets.back(), t * 3);
        EXPECT_EQ(p.counts[8], t); // the shared slot sees every token
        // Buffers were reserved for 16 tokens: no reallocation.
        EXPECT_EQ(p.topk_ids.data(), ids);
        EXPECT_EQ(p.perm.data(), perm);
        EXPECT_EQ(p.masked_pairs.data(), masked);
    }
}
