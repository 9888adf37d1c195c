// The token permutation of an MoE batch: per-expert counts, offsets, permuted and masked layouts.
#include "core/error.h"
#include "fp4moe/moe.h"

#include <algorithm>

namespace fp4moe {

moe_plan::moe_plan(const moe_desc &d, std::int64_t max_tokens_)
    : max_tokens(max_tokens_), slots(d.slots()), num_experts(d.total_experts()) {
    FP4MOE_ASSERT(max_tokens_ >= 0);
    const auto pairs = static_cast<std::size_t>(max_tokens_ * slots);
    topk_ids.reserve(pairs);
    topk_weights.reserve(pairs);
    perm.reserve(pairs);
    inv_perm.reserve(pairs);
    counts.reserve(num_experts);
    offsets.reserve(num_experts + 1);
    masked_pairs.reserve(static_cast<std::size_t>(num_experts * max_tokens_));
}

// NOTE: every resize below stays within the capacity reserved by the constructor, so a plan built for
// max_tokens never allocates again (checked by the plan tests through data() pointers).
void moe_plan_from_ids(const moe_desc &d, moe_plan &p) {
    FP4MOE_ASSERT(p.tokens <= p.max_tokens && p.slots == d.slots() && p.num_experts == d.total_experts());
    const std::int64_t pairs = p.tokens * p.slots;
    FP4MOE_ASSERT(static_cast<std::int64_t>(p.topk_ids.size()) == pairs);
    p.counts.assign(p.num_experts, 0);
    for (std::int64_t i = 0; i < pairs; ++i) {
        const auto e = p.topk_ids[i];
        FP4MOE_ASSERT(e >= 0 && e < p.num_experts);
        ++p.counts[e];
    }
    p.offsets.resize(p.num_experts + 1);
    p.offsets[0] = 0;
    for (std::int64_t e = 0; e < p.num_experts; ++e) {
        // The masked layout holds at most max_tokens rows per expert: ids must be distinct within a token.
        FP4MOE_ASSERT(p.counts[e] <= p.max_tokens);
        p.offsets[e + 1] = p.offsets[e] + p.counts[e];
    }

    // Counting sort by expert; pairs are visited in (token, slot) order, so within an expert rows are
    // ordered by token: deterministic, and what the masked layout wants too.
    p.perm.resize(pairs);
    p.inv_perm.resize(pairs);
    p.masked_pairs.assign(static_cast<std::size_t>(p.num_experts * p.max_tokens), -1);
    // offsets doubles as the cursor array while filling; restore it afterwards.
    for (std::int64_t i = 0; i < pairs; ++i) {
        const auto e = p.topk_ids[i];
        const std::int32_t row = p.offsets[e]++;
        p.perm[row] = static_cast<std::int32_t>(i);
        p.inv_perm[i] = row;
    }
    for (std::int64_t e = p.num_experts; e > 0; --e) p.offsets[e] = p.offsets[e - 1];
    p.offsets[0] = 0;
    for (std::int64_t e = 0; e < p.num_experts; ++e)
        for (std::int32_t i = 0; i < p.counts[e]; ++i) p.masked_pairs[e * p.max_tokens + i] = p.perm[p.offsets[e] + i];
}

} // namespace fp4moe
