// Router top-k for every family (reference/models.md 2.6, 4.3, 5.2). fp32 throughout; ties go to the lower
// expert index, so routing is deterministic and the same on every backend.
#include "core/error.h"
#include "fp4moe/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace fp4moe {
namespace {

// Indices of the k largest values, in descending order of value, lower index first among equals.
void top_k_indices(std::span<const float> v, std::int64_t k, std::vector<std::int32_t> &idx) {
    idx.resize(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](std::int32_t a, std::int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
    idx.resize(k);
}

struct scratch {
    std::vector<float> score;  // softmax p, or sigmoid s
    std::vector<float> select; // what selection ranks: p, or s + bias with dropped groups at -inf
    std::vector<float> group;  // group scores
    std::vector<std::int32_t> idx, gidx;
};

void route_token(const moe_desc &d, const float *logits, const float *bias, float *w_out, std::int32_t *id_out,
                 scratch &s) {
    const auto &r = d.routing;
    const std::int64_t e_count = d.experts;
    s.score.resize(e_count);
    if (r.scoring == moe_scoring::softmax) {
        const float mx = *std::max_element(logits, logits + e_count);
        float sum = 0.0f;
        for (std::int64_t e = 0; e < e_count; ++e) sum += (s.score[e] = std::exp(logits[e] - mx));
        for (auto &p : s.score) p /= sum;
        s.select = s.score;
    } else {
        s.select.resize(e_count);
        for (std::int64_t e = 0; e < e_count; ++e) {
            s.score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
            s.select[e] = s.score[e] + (bias ? bias[e] : 0.0f);
        }
        if (r.n_group > 1) {
            // Group score = sum of the group's two largest biased scores; keep topk_group groups, drop the
            // rest to -inf (the DeepSeek reference; transformers uses 0.0, which differs only for negative
            // biased scores).
            const std::int64_t per = e_count / r.n_group;
            s.group.resize(r.n_group);
            for (int g = 0; g < r.n_group; ++g) {
                std::span<const float> grp(s.select.data() + g * per, per);
                top_k_indices(grp, 2, s.gidx);
                s.group[g] = grp[s.gidx[0]] + grp[s.gidx[1]];
            }
            top_k_indices(s.group, r.topk_group, s.gidx);
            for (int g = 0; g < r.n_group; ++g) {
                const bool kept = std::find(s.gidx.begin(), s.gidx.end(), g) != s.gidx.end();
                if (!kept) std::fill_n(s.select.begin() + g * per, per, -std::numeric_limits<float>::infinity());
            }
        }
    }
    top_k_indices(s.select, d.top_k, s.idx);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < d.top_k; ++j) {
        id_out[j] = s.idx[j];
        w_out[j] = s.score[s.idx[j]];
        sum += w_out[j];
    }
    if (r.renormalize) {
        // HF adds 1e-20 for sigmoid routers (DeepSeek-V3, GLM); Qwen3's softmax path divides by the sum alone.
        const float denom = r.scoring == moe_scoring::sigmoid ? sum + 1e-20f : sum;
        for (std::int64_t j = 0; j < d.top_k; ++j) w_out[j] /= denom;
    }
    if (r.routed_scaling_factor != 1.0f)
        for (std::int64_t j = 0; j < d.top_k; ++j) w_out[j] *= r.routed_scaling_factor;
}

} // namespace

status moe_route(const moe_desc &d, std::span<const float> logits, const float *correction_bias, std::int64_t tokens,
                 moe_plan &plan) {
    if (auto st = d.validate(); !st.ok()) return st;
    if (tokens < 0 || tokens > plan.max_tokens)
        return {status_code::invalid_argument,
                fmt::format("moe_route: {} tokens but the plan holds at most {}", tokens, plan.max_tokens)};
    if (plan.slots != d.slots() || plan.num_experts != d.total_experts())
        return {status_code::invalid_argument, "moe_route: plan was built for another moe_desc"};
    if (static_cast<std::int64_t>(logits.size()) < tokens * d.experts)
        return {status_code::invalid_argument,
                fmt::format("moe_route: {} logits for {} tokens x {} experts", logits.size(), tokens, d.experts)};
    if (d.routing.correction_bias && !correction_bias)
        return {status_code::invalid_argument, "moe_route: routing uses e_score_correction_bias but none was given"};
    for (std::int64_t i = 0; i < tokens * d.experts; ++i)
        if (!std::isfinite(logits[i]))
            return {status_code::invalid_argument, fmt::format("moe_route: router logit of token {} expert {} is {}",
                                                               i / d.experts, i % d.experts, logits[i])};

    plan.tokens = tokens;
    const std::int64_t slots = d.slots();
    plan.topk_ids.resize(tokens * slots);
    plan.topk_weights.resize(tokens * slots);
    thread_local scratch s;
    const float *bias = d.routing.correction_bias ? correction_bias : nullptr;
    for (std::int64_t t = 0; t < tokens; ++t) {
        float *w = plan.topk_weights.data() + t * slots;
        std::int32_t *ids = plan.topk_ids.data() + t * slots;
        route_token(d, logits.data() + t * d.experts, bias, w, ids, s);
        for (std::int64_t j = 0; j < d.shared; ++j) {
            ids[d.top_k + j] = static_cast<std::int32_t>(d.experts + j);
            w[d.top_k + j] = 1.0f;
        }
    }
    moe_plan_from_ids(d, plan);
    return status::success();
}

} // namespace fp4moe
