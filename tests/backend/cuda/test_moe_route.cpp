// The routing and plan kernels (kernels/moe_route.h) against the CPU: fp4moe::moe_route, moe_plan_from_ids and
// cpu::router_logits. Ids and every plan array must be equal exactly; weights within 4 ulps or 1e-6 relative;
// logits within the fp32 summation bound, and bit-exact on inputs whose every partial sum is exact.
// Inputs are drawn fresh from a std::random_device seed (printed with every failure). Outputs are poisoned
// before every run: float outputs with 0xFF bytes (NaN), int32 outputs with 0xD5 bytes, because 0xFF would read
// as -1, a value the plan writes on purpose (skipped pairs, masked padding).
#include "backend/cpu/runners.h"
#include "cuda_test_util.h"
#include "device.h"
#include "kernels/moe_route.h"
#include "route_test_util.h"

#include "fp4moe/moe.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace fc = fp4moe::cuda;

namespace {

using fp4moe::test::device_buffer;
using namespace fp4moe::test::route;

std::vector<named_rule> all_rules() {
    return {
        {"qwen3 softmax E128 k8", make_desc(128, 8, 0, softmax_routing(true))},
        {"qwen3 softmax E128 k8 no-renorm", make_desc(128, 8, 0, softmax_routing(false))},
        {"glm sigmoid+bias E128 k8 S1 x1", make_desc(128, 8, 1, sigmoid_routing(true, 1, 1, 1.0f))},
        {"glm sigmoid+bias E128 k8 S1 x2.5", make_desc(128, 8, 1, sigmoid_routing(true, 1, 1, 2.5f))},
        {"dsv3 sigmoid+bias E256 g8/4 k8 S1 x2.5", make_desc(256, 8, 1, sigmoid_routing(true, 8, 4, 2.5f))},
        // Groups of whole lane columns: 64 experts per group (two per lane), and 32 per group with register slots
        // left over (E = 192 runs 8 slots per lane).
        {"sigmoid+bias E128 g2/1 k8 S1", make_desc(128, 8, 1, sigmoid_routing(true, 2, 1, 1.0f))},
        {"sigmoid+bias E192 g6/3 k8 x2.5", make_desc(192, 8, 0, sigmoid_routing(true, 6, 3, 2.5f))},
        // Shapes off the 32-lane grid: partial lanes, groups straddling lanes, several shared slots.
        {"odd sigmoid+bias E72 g4/2 k6 S2 x1.5", make_desc(72, 6, 2, sigmoid_routing(true, 4, 2, 1.5f))},
        {"odd sigmoid E60 k4 no-renorm x0.75", make_desc(60, 4, 0, sigmoid_routing(false, 1, 1, 0.75f, false))},
        {"odd softmax E8 k2", make_desc(8, 2, 0, softmax_routing(true))},
        {"odd softmax E200 k40 S3", make_desc(200, 40, 3, softmax_routing(true))},
    };
}

// ---- inputs ----------------------------------------------------------------------------------------------

std::vector<float> make_logits(input_kind kind, int tokens, int experts, std::mt19937 &rng) {
    std::vector<float> l(static_cast<std::size_t>(tokens) * experts);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    if (kind == input_kind::ties) {
        // Nine distinct values: exact ties everywhere (selection, group scores); token 0 all equal.
        std::uniform_int_distribution<int> q(-4, 4);
        for (auto &v : l) v = static_cast<float>(q(rng)) * 0.25f;
        std::fill_n(l.begin(), experts, 0.5f);
        return l;
    }
    for (auto &v : l) v = normal(rng);
    if (kind == input_kind::hot) { // two experts win for most tokens: counts far from uniform
        std::uniform_int_distribution<int> pick(0, experts - 1);
        std::uniform_real_distribution<float> u(0.0f, 1.0f);
        const int hot1 = pick(rng), hot2 = pick(rng);
        for (int t = 0; t < tokens; ++t) {
            if (u(rng) < 0.9f) l[static_cast<std::size_t>(t) * experts + hot1] += 6.0f;
            if (u(rng) < 0.7f) l[static_cast<std::size_t>(t) * experts + hot2] += 4.0f;
        }
    }
    return l;
}

// ---- comparisons -----------------------------------------------------------------------------------------

bool weight_close(float got, float want) {
    if (std::isnan(got) || std::isnan(want)) return false;
    if (got == want) return true;
    const auto a = std::bit_cast<std::int32_t>(got), b = std::bit_cast<std::int32_t>(want);
    if ((a < 0) == (b < 0) && std::llabs(static_cast<long long>(a) - b) <= 4) return true;
    return std::fabs(got - want) <= 1e-6f * std::fabs(want);
}

host_plan from_cpu(const fp4moe::moe_plan &p) {
    return {p.counts, p.offsets, p.perm, p.inv_perm, p.masked_pairs};
}

// An independent stable counting sort that skips ids outside [0, num_experts) (what the GPU does for a bad
// token's -1): perm rows past the valid pairs and inv_perm of skipped pairs are -1.
host_plan reference_plan(const std::vector<std::int32_t> &ids, int num_experts, int max_tokens) {
    host_plan p;
    p.counts.assign(num_experts, 0);
    for (auto e : ids)
        if (e >= 0 && e < num_experts) ++p.counts[e];
    p.offsets.assign(num_experts + 1, 0);
    for (int e = 0; e < num_experts; ++e) p.offsets[e + 1] = p.offsets[e] + p.counts[e];
    p.perm.assign(ids.size(), -1);
    p.inv_perm.assign(ids.size(), -1);
    std::vector<std::int32_t> cursor(p.offsets.begin(), p.offsets.end() - 1);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto e = ids[i];
        if (e < 0 || e >= num_experts) continue;
        const auto row = cursor[e]++;
        p.perm[row] = static_cast<std::int32_t>(i);
        p.inv_perm[i] = row;
    }
    p.masked_pairs.assign(static_cast<std::size_t>(num_experts) * max_tokens, -1);
    for (int e = 0; e < num_experts; ++e)
        for (int i = 0; i < std::min(p.counts[e], max_tokens); ++i)
            p.masked_pairs[static_cast<std::size_t>(e) * max_tokens + i] = p.perm[p.offsets[e] + i];
    return p;
}

void expect_equal_array(const char *what, const std::vector<std::int32_t> &got, const std::vector<std::int32_t> &want) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int shown = 0;
    for (std::size_t i = 0; i < got.size() && shown < 8; ++i)
        if (got[i] != want[i]) {
            ++shown;
            ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
        }
}

void expect_equal_plan(const host_plan &got, const host_plan &want) {
    expect_equal_array("counts", got.counts, want.counts);
    expect_equal_array("offsets", got.offsets, want.offsets);
    expect_equal_array("perm", got.perm, want.perm);
    expect_equal_array("inv_perm", got.inv_perm, want.inv_perm);
    expect_equal_array("masked_pairs", got.masked_pairs, want.masked_pairs);
}

// Routes `logits` on the CPU (plan for max_tokens = tokens + 5, so masked rows have padding) and on the GPU
// (top-k, then the plan from the GPU's ids), and compares everything.
void check_route(const named_rule &r, int tokens, input_kind kind, std::mt19937 &rng) {
    SCOPED_TRACE(r.name + ", T=" + std::to_string(tokens) + ", " + name_of(kind) + " logits");
    const auto &d = r.d;
    const int E = static_cast<int>(d.experts), slots = static_cast<int>(d.slots());
    const int NE = static_cast<int>(d.total_experts()), max_tokens = tokens + 5;
    const auto logits = make_logits(kind, tokens, E, rng);
    const auto bias = make_bias(kind, E, rng);
    const float *cpu_bias = d.routing.correction_bias ? bias.data() : nullptr;

    fp4moe::moe_plan want(d, max_tokens);
    const auto st = fp4moe::moe_route(d, logits, cpu_bias, tokens, want);
    ASSERT_TRUE(st.ok()) << st.to_string();

    device_buffer<float> d_logits(logits), d_bias(bias), d_weights(static_cast<std::size_t>(tokens) * slots);
    device_buffer<std::int32_t> d_ids(static_cast<std::size_t>(tokens) * slots);
    device_buffer<int> d_bad(std::vector<int>{INT_MAX});
    device_plan plan(NE, tokens * slots, max_tokens);
    d_weights.poison(), d_ids.poison();
    ASSERT_EQ(fc::moe_route_topk(d_logits.ptr, cpu_bias ? d_bias.ptr : nullptr, tokens, to_rule(d), d_ids.ptr,
                                 d_weights.ptr, d_bad.ptr, nullptr),
              cudaSuccess);
    ASSERT_EQ(fc::moe_build_plan(d_ids.ptr, tokens, slots, NE, max_tokens, plan.buffers(), nullptr), cudaSuccess);
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());

    const auto ids = d_ids.download();
    const auto weights = d_weights.download();
    EXPECT_EQ(d_bad.download()[0], INT_MAX) << "bad_token set on finite logits";
    int bad_ids = 0, bad_w = 0, exact_w = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const int t = static_cast<int>(i / slots), j = static_cast<int>(i % slots);
        if (ids[i] != want.topk_ids[i] && ++bad_ids <= 8) {
            const auto logit = [&](int e) {
                return e >= 0 && e < E ? std::to_string(logits[static_cast<std::size_t>(t) * E + e]) : std::string("-");
            };
            ADD_FAILURE() << "token " << t << " slot " << j << ": id " << ids[i] << " (logit " << logit(ids[i])
                          << "), want " << want.topk_ids[i] << " (logit " << logit(want.topk_ids[i]) << ")";
        }
        if (weights[i] == want.topk_weights[i]) ++exact_w;
        if (!weight_close(weights[i], want.topk_weights[i]) && ++bad_w <= 8)
            ADD_FAILURE() << "token " << t << " slot " << j << ": weight " << weights[i] << ", want "
                          << want.topk_weights[i] << " (bits " << std::bit_cast<std::uint32_t>(weights[i]) << " vs "
                          << std::bit_cast<std::uint32_t>(want.topk_weights[i]) << ")";
    }
    EXPECT_EQ(bad_ids, 0);
    EXPECT_EQ(bad_w, 0);
    if (exact_w != static_cast<int>(weights.size()))
        std::printf("note: %s T=%d %s: %d of %zu weights bit-equal to the CPU's\n", r.name.c_str(), tokens,
                    name_of(kind), exact_w, weights.size());
    expect_equal_plan(plan.download(), from_cpu(want));

    // Small batches: top-k + plan in one kernel gives the same ids and weights (bit for bit: the same device
    // code) and the CPU's plan; also with a capacity whose masked rows are filled by the separate grid.
    if (!fc::moe_route_topk_plan_fits(tokens, to_rule(d))) return;
    for (const int cap : {max_tokens, 300}) {
        SCOPED_TRACE("fused top-k + plan, max_tokens " + std::to_string(cap));
        device_plan fplan(NE, tokens * slots, cap);
        device_buffer<std::int32_t> f_ids(ids.size());
        device_buffer<float> f_weights(weights.size());
        device_buffer<int> f_bad(std::vector<int>{INT_MAX});
        f_ids.poison(), f_weights.poison();
        ASSERT_EQ(fc::moe_route_topk_plan(d_logits.ptr, cpu_bias ? d_bias.ptr : nullptr, tokens, to_rule(d), cap,
                                          f_ids.ptr, f_weights.ptr, f_bad.ptr, fplan.buffers(), nullptr),
                  cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        expect_equal_array("fused topk_ids", f_ids.download(), want.topk_ids);
        const auto fw = f_weights.download();
        for (std::size_t i = 0; i < fw.size(); ++i)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(fw[i]), std::bit_cast<std::uint32_t>(weights[i])) << "weight " << i;
        EXPECT_EQ(f_bad.download()[0], INT_MAX);
        expect_equal_plan(fplan.download(), reference_plan(want.topk_ids, NE, cap));
        if (cap == max_tokens) expect_equal_plan(fplan.download(), from_cpu(want));
    }
}

// ---- router logits ---------------------------------------------------------------------------------------

struct logits_case {
    int tokens, hidden, experts;
};

// Runs the GPU router on (x, router) and returns its logits (poisoned output, so unwritten entries are NaN).
std::vector<float> gpu_logits(const std::vector<fp4moe::bf16_t> &x, const std::vector<float> &router,
                              const logits_case &c, bool router_bf16 = false) {
    std::vector<std::uint16_t> xbits(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xbits[i] = x[i].bits;
    device_buffer<std::uint16_t> d_x(xbits);
    device_buffer<float> d_router(router), d_out(static_cast<std::size_t>(c.tokens) * c.experts);
    d_out.poison();
    EXPECT_EQ(
        fc::moe_router_logits(d_x.ptr, d_router.ptr, c.tokens, c.hidden, c.experts, d_out.ptr, nullptr, router_bf16),
        cudaSuccess);
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
    return d_out.download();
}

std::vector<float> cpu_logits(const std::vector<fp4moe::bf16_t> &x, const std::vector<float> &router,
                              const logits_case &c) {
    auto d = make_desc(c.experts, 1, 0, softmax_routing(true));
    d.hidden = c.hidden;
    std::vector<float> out(static_cast<std::size_t>(c.tokens) * c.experts);
    fp4moe::cpu::router_logits(d, x.data(), c.tokens, router.data(), out.data());
    return out;
}

std::string case_name(const logits_case &c) {
    return "T=" + std::to_string(c.tokens) + " H=" + std::to_string(c.hidden) + " E=" + std::to_string(c.experts);
}

// GEMV (small T; 1 expert per CTA up to T = 8, 4 after) and tiled (>= 64 tiles of 64 x 64) paths, vector
// (H % 4 == 0) and scalar loads, ragged token and expert edges (100 x 1024 x 64: a batch past split-K too small
// for the tensor cores); from T = 65 and 2^25 MACs (or >= 64 tiles) with H % 8 == 0 on
// tensor cores: mma.sync below T = 256 (and on GPUs other than sm_90) with K split over a cluster of 2 CTAs at
// 160 x 1024 x 256, 4 at 255 x 2048 x 128, 8 at 200 x 4096 x 64 and 130 x 4104 x 70, whose last split is
// shorter; wgmma from T = 256 on sm_90 (2113 x 1000 x 130, 2500 x 520 x 200: ragged T, E and K steps, and the
// cases listed with them), else fp32 (2000 x 998).
// Split-K (T <= 64, H % 4 == 0) per token-count variant (1, <= 4, <= 16, <= 32, <= 64), experts off the
// 8-expert clusters, H too small for every CTA or warp of a cluster to hold a K chunk.
const logits_case kLogitsCases[] = {
    {1, 7168, 256},
    {2, 4096, 160},
    {3, 2048, 128},
    {7, 1002, 37},
    {8, 2048, 300},
    {9, 4096, 160},
    {16, 7168, 256},
    {24, 4096, 160},
    {40, 1002, 37},
    {64, 5120, 157},
    {255, 2048, 128},
    {1024, 1024, 256},
    {2113, 1000, 130},
    {2000, 998, 70},
    {1, 4096, 128},
    {1, 4, 3},
    {5, 2048, 130},
    {12, 7168, 256},
    {24, 1004, 37},
    {33, 4096, 128},
    {64, 64, 9},
    {64, 7168, 256},
    {17, 36, 250},
    {2500, 520, 200},
    {200, 4096, 64},
    {130, 4104, 70},
    {100, 1024, 64},
    // the wgmma kernel (T >= 256 on sm_90): K in 8, 4 (a partial last token tile; a K tail), 4 and 1 splits
    {512, 4096, 128},
    {4100, 2048, 128},
    {260, 2056, 64},
    {600, 7168, 256},
    {300, 1000, 130},
    {160, 1024, 256},
};

} // namespace

TEST(CudaMoeRoute, TopkAndPlanMatchCpuForEveryRule) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    for (const auto &r : all_rules())
        for (int tokens : {1, 2, 3, 7, 16, 64, 255, 1024})
            for (auto kind : {input_kind::random, input_kind::hot, input_kind::ties}) {
                check_route(r, tokens, kind, rng);
                if (HasFatalFailure()) return;
            }
}

TEST(CudaMoeRoute, NonFiniteLogitsMarkTheTokenBad) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    for (const auto &r : all_rules()) {
        SCOPED_TRACE(r.name);
        const auto &d = r.d;
        const int T = 40, E = static_cast<int>(d.experts), slots = static_cast<int>(d.slots());
        const int NE = static_cast<int>(d.total_experts());
        auto logits = make_logits(input_kind::random, T, E, rng);
        const auto bias = make_bias(input_kind::random, E, rng);
        const float *cpu_bias = d.routing.correction_bias ? bias.data() : nullptr;
        const std::vector<std::pair<int, float>> bad = {
            {5, std::nanf("")}, {33, INFINITY}, {34, -INFINITY}, {6, std::nanf("")}};
        auto clean = logits;
        for (const auto &[t, v] : bad) {
            logits[static_cast<std::size_t>(t) * E + (t * 7) % E] = v;
            std::fill_n(clean.begin() + static_cast<std::ptrdiff_t>(t) * E, E, 0.0f);
        }
        fp4moe::moe_plan want(d, T);
        ASSERT_TRUE(fp4moe::moe_route(d, clean, cpu_bias, T, want).ok());
        for (const auto &b : bad)
            std::fill_n(want.topk_ids.begin() + static_cast<std::ptrdiff_t>(b.first) * slots, slots, -1);

        device_buffer<float> d_logits(logits), d_bias(bias), d_weights(static_cast<std::size_t>(T) * slots);
        device_buffer<std::int32_t> d_ids(static_cast<std::size_t>(T) * slots);
        device_buffer<int> d_bad(std::vector<int>{INT_MAX});
        device_plan plan(NE, T * slots, T);
        d_weights.poison(), d_ids.poison();
        ASSERT_EQ(fc::moe_route_topk(d_logits.ptr, cpu_bias ? d_bias.ptr : nullptr, T, to_rule(d), d_ids.ptr,
                                     d_weights.ptr, d_bad.ptr, nullptr),
                  cudaSuccess);
        ASSERT_EQ(fc::moe_build_plan(d_ids.ptr, T, slots, NE, T, plan.buffers(), nullptr), cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(d_bad.download()[0], 5) << "the smallest bad token";
        const auto ids = d_ids.download();
        expect_equal_array("topk_ids", ids, want.topk_ids);
        const auto weights = d_weights.download();
        for (std::size_t i = 0; i < weights.size(); ++i) {
            if (want.topk_ids[i] < 0) continue;
            EXPECT_TRUE(weight_close(weights[i], want.topk_weights[i])) << "weight " << i;
        }
        // The plan skips the bad tokens' pairs: perm's tail rows and their inv_perm entries are -1.
        expect_equal_plan(plan.download(), reference_plan(want.topk_ids, NE, T));

        // The same through top-k + plan in one kernel (where the batch fits it).
        if (!fc::moe_route_topk_plan_fits(T, to_rule(d))) continue;
        device_plan fplan(NE, T * slots, T);
        device_buffer<int> f_bad(std::vector<int>{INT_MAX});
        d_weights.poison(), d_ids.poison();
        ASSERT_EQ(fc::moe_route_topk_plan(d_logits.ptr, cpu_bias ? d_bias.ptr : nullptr, T, to_rule(d), T, d_ids.ptr,
                                          d_weights.ptr, f_bad.ptr, fplan.buffers(), nullptr),
                  cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(f_bad.download()[0], 5) << "fused: the smallest bad token";
        expect_equal_array("fused topk_ids", d_ids.download(), want.topk_ids);
        const auto fw = d_weights.download();
        for (std::size_t i = 0; i < fw.size(); ++i)
            EXPECT_EQ(std::bit_cast<std::uint32_t>(fw[i]), std::bit_cast<std::uint32_t>(weights[i])) << "weight " << i;
        expect_equal_plan(fplan.download(), reference_plan(want.topk_ids, NE, T));

        // The first 8 tokens (bad tokens 5 and 6 among them): one token per warp, where sigmoid scores are
        // computed by the whole CTA first.
        const int T8 = 8;
        const std::vector<std::int32_t> want8(want.topk_ids.begin(), want.topk_ids.begin() + T8 * slots);
        device_plan plan8(NE, T8 * slots, T8);
        device_buffer<int> bad8(std::vector<int>{INT_MAX});
        d_weights.poison(), d_ids.poison();
        ASSERT_EQ(fc::moe_route_topk_plan(d_logits.ptr, cpu_bias ? d_bias.ptr : nullptr, T8, to_rule(d), T8, d_ids.ptr,
                                          d_weights.ptr, bad8.ptr, plan8.buffers(), nullptr),
                  cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(bad8.download()[0], 5) << "fused, 8 tokens: the smallest bad token";
        auto ids8 = d_ids.download();
        ids8.resize(want8.size());
        expect_equal_array("fused topk_ids, 8 tokens", ids8, want8);
        const auto w8 = d_weights.download();
        for (std::size_t i = 0; i < want8.size(); ++i)
            EXPECT_EQ(std::bit_cast<std::uint32_t>(w8[i]), std::bit_cast<std::uint32_t>(weights[i])) << "weight " << i;
        expect_equal_plan(plan8.download(), reference_plan(want8, NE, T8));
    }
}

TEST(CudaMoeRoute, PlanMatchesCpuAtLargeT) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    struct plan_case {
        int tokens, experts, top_k, shared;
    };
    // GLM-5 / DeepSeek-V3 slots up to 16384 tokens; one expert (every pair equal); 2048 experts (few warps);
    // 8192 pairs over 1024 experts (the multi-CTA plan's edges: 4 chunks, the widest counter rows).
    for (auto c : {plan_case{1, 256, 8, 1},
                   {67, 256, 8, 1},
                   {600, 128, 8, 1},
                   {4097, 256, 8, 1},
                   {16384, 256, 8, 1},
                   {3000, 1, 1, 0},
                   {777, 2048, 4, 0},
                   {1024, 1024, 8, 0},
                   {100, 8, 8, 0}}) {
        SCOPED_TRACE("T=" + std::to_string(c.tokens) + " E=" + std::to_string(c.experts) +
                     " k=" + std::to_string(c.top_k) + " S=" + std::to_string(c.shared));
        const auto d = make_desc(c.experts, c.top_k, c.shared, softmax_routing(true));
        const int slots = c.top_k + c.shared, NE = c.experts + c.shared, max_tokens = c.tokens + 3;
        fp4moe::moe_plan want(d, max_tokens);
        want.tokens = c.tokens;
        want.topk_ids.resize(static_cast<std::size_t>(c.tokens) * slots);
        // Distinct experts per token, a hot expert in most tokens, the rest uniform; shared slots as routing sets.
        std::vector<std::int32_t> all(c.experts);
        const int hot = std::uniform_int_distribution<int>(0, c.experts - 1)(rng);
        for (int t = 0; t < c.tokens; ++t) {
            for (int e = 0; e < c.experts; ++e) all[e] = e;
            std::shuffle(all.begin(), all.end(), rng);
            if (rng() % 10 < 9) std::iter_swap(all.begin() + (rng() % c.top_k), std::find(all.begin(), all.end(), hot));
            for (int j = 0; j < c.top_k; ++j) want.topk_ids[static_cast<std::size_t>(t) * slots + j] = all[j];
            for (int s = 0; s < c.shared; ++s)
                want.topk_ids[static_cast<std::size_t>(t) * slots + c.top_k + s] = c.experts + s;
        }
        fp4moe::moe_plan_from_ids(d, want);

        device_buffer<std::int32_t> d_ids(want.topk_ids);
        device_plan plan(NE, c.tokens * slots, max_tokens);
        ASSERT_EQ(fc::moe_build_plan(d_ids.ptr, c.tokens, slots, NE, max_tokens, plan.buffers(), nullptr), cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        const auto got = plan.download();
        expect_equal_plan(got, from_cpu(want));
        expect_equal_plan(got, reference_plan(want.topk_ids, NE, max_tokens));

        // Without masked_pairs: the same permuted arrays, the masked buffer untouched.
        plan.poison();
        ASSERT_EQ(fc::moe_build_plan(d_ids.ptr, c.tokens, slots, NE, max_tokens, plan.buffers(false), nullptr),
                  cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
        auto got2 = plan.download();
        for (auto v : got2.masked_pairs) ASSERT_EQ(v, static_cast<std::int32_t>(0xD5D5D5D5u)) << "masked written";
        got2.masked_pairs = got.masked_pairs;
        expect_equal_plan(got2, got);

        // With scratch (the multi-CTA plan from 8192 pairs on): the same arrays, also with skipped pairs (a bad
        // token's ids are -1) at the start, the middle and the end.
        const std::size_t scratch = fc::moe_plan_scratch_ints(c.tokens, slots, NE);
        EXPECT_EQ(scratch > 0, c.tokens * slots >= 8192 && NE <= 1024);
        device_buffer<std::int32_t> d_scratch(std::max<std::size_t>(scratch, 1));
        for (const bool skips : {false, true}) {
            SCOPED_TRACE(skips ? "scratch, skipped pairs" : "scratch");
            auto ids = want.topk_ids;
            if (skips)
                for (int t : {0, c.tokens / 2, c.tokens - 1})
                    for (int j = 0; j < slots; ++j) ids[static_cast<std::size_t>(t) * slots + j] = -1;
            device_buffer<std::int32_t> d_ids3(ids);
            plan.poison(), d_scratch.poison();
            auto b = plan.buffers();
            b.scratch = d_scratch.ptr;
            ASSERT_EQ(fc::moe_build_plan(d_ids3.ptr, c.tokens, slots, NE, max_tokens, b, nullptr), cudaSuccess);
            FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
            expect_equal_plan(plan.download(), reference_plan(ids, NE, max_tokens));
        }
    }
}

TEST(CudaMoeRoute, EmptyBatch) {
    SKIP_WITHOUT_GPU();
    const auto d = make_desc(256, 8, 1, sigmoid_routing(true, 8, 4, 2.5f));
    device_buffer<float> d_logits(16), d_bias(256), d_weights(16);
    device_buffer<std::int32_t> d_ids(16);
    d_weights.poison(), d_ids.poison();
    EXPECT_EQ(fc::moe_route_topk(d_logits.ptr, d_bias.ptr, 0, to_rule(d), d_ids.ptr, d_weights.ptr, nullptr, nullptr),
              cudaSuccess);
    EXPECT_EQ(fc::moe_router_logits(nullptr, nullptr, 0, 7168, 256, nullptr, nullptr), cudaSuccess);
    // The plan of an empty batch still says so: counts and offsets 0, masked rows all -1.
    device_plan plan(257, 0, 4);
    ASSERT_EQ(fc::moe_build_plan(d_ids.ptr, 0, 9, 257, 4, plan.buffers(), nullptr), cudaSuccess);
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = plan.download();
    expect_equal_array("counts", got.counts, std::vector<std::int32_t>(257, 0));
    expect_equal_array("offsets", got.offsets, std::vector<std::int32_t>(258, 0));
    expect_equal_array("masked_pairs", got.masked_pairs, std::vector<std::int32_t>(257 * 4, -1));
    for (auto v : d_ids.download()) EXPECT_EQ(v, static_cast<std::int32_t>(0xD5D5D5D5u)) << "ids written at T=0";

    device_plan fplan(257, 0, 4);
    ASSERT_EQ(fc::moe_route_topk_plan(d_logits.ptr, d_bias.ptr, 0, to_rule(d), 4, d_ids.ptr, d_weights.ptr, nullptr,
                                      fplan.buffers(), nullptr),
              cudaSuccess);
    ASSERT_EQ(fc::moe_route_fused(nullptr, nullptr, d_bias.ptr, 0, 7168, to_rule(d), 4, nullptr, nullptr, nullptr,
                                  nullptr, fplan.buffers(), nullptr),
              cudaSuccess);
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto fgot = fplan.download();
    expect_equal_array("fused counts", fgot.counts, std::vector<std::int32_t>(257, 0));
    expect_equal_array("fused offsets", fgot.offsets, std::vector<std::int32_t>(258, 0));
    expect_equal_array("fused masked_pairs", fgot.masked_pairs, std::vector<std::int32_t>(257 * 4, -1));
    for (auto v : d_ids.download()) EXPECT_EQ(v, static_cast<std::int32_t>(0xD5D5D5D5u)) << "fused: ids written at T=0";
}

TEST(CudaMoeRoute, RejectsBadArguments) {
    SKIP_WITHOUT_GPU();
    device_buffer<float> f(4096);
    device_buffer<std::int32_t> i32(4096);
    device_buffer<std::uint16_t> x(4096);
    f.poison(), i32.poison();
    const auto base = to_rule(make_desc(256, 8, 1, sigmoid_routing(true, 8, 4, 2.5f)));
    auto topk = [&](fc::route_rule r, int tokens = 2, const float *bias = nullptr) {
        return fc::moe_route_topk(f.ptr, bias ? bias : f.ptr, tokens, r, i32.ptr, f.ptr, nullptr, nullptr);
    };
    auto with = [&](auto edit) {
        auto r = base;
        edit(r);
        return r;
    };
    EXPECT_EQ(topk(base, -1), cudaErrorInvalidValue) << "negative tokens";
    EXPECT_EQ(topk(with([](auto &r) { r.top_k = 257; })), cudaErrorInvalidValue) << "top_k > experts";
    EXPECT_EQ(topk(with([](auto &r) { r.top_k = 0; })), cudaErrorInvalidValue) << "top_k 0";
    EXPECT_EQ(topk(with([](auto &r) { r.experts = 512, r.n_group = 1, r.topk_group = 1; })), cudaErrorInvalidValue)
        << "experts > 256";
    EXPECT_EQ(topk(with([](auto &r) { r.n_group = 7; })), cudaErrorInvalidValue) << "groups do not divide experts";
    EXPECT_EQ(topk(with([](auto &r) { r.topk_group = 9; })), cudaErrorInvalidValue) << "topk_group > n_group";
    EXPECT_EQ(topk(with([](auto &r) { r.topk_group = 0; })), cudaErrorInvalidValue) << "topk_group 0";
    EXPECT_EQ(topk(with([](auto &r) { r.top_k = 40, r.topk_group = 1; })), cudaErrorInvalidValue)
        << "top_k beyond the kept groups";
    EXPECT_EQ(topk(with([](auto &r) { r.n_group = 256, r.topk_group = 8; })), cudaErrorInvalidValue)
        << "one expert per group";
    EXPECT_EQ(topk(with([](auto &r) { r.shared = -1; })), cudaErrorInvalidValue) << "negative shared";
    EXPECT_EQ(topk(with([](auto &r) { r.softmax = true; })), cudaErrorInvalidValue) << "bias with softmax";
    EXPECT_EQ(fc::moe_route_topk(f.ptr, nullptr, 2, base, i32.ptr, f.ptr, nullptr, nullptr), cudaErrorInvalidValue)
        << "correction_bias without a bias";

    fc::plan_buffers pb{i32.ptr, i32.ptr + 300, i32.ptr + 600, i32.ptr + 1200, i32.ptr + 1800};
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, -1, 9, 257, 4, pb, nullptr), cudaErrorInvalidValue) << "negative tokens";
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 2, 0, 257, 4, pb, nullptr), cudaErrorInvalidValue) << "no slots";
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 2, 9, 0, 4, pb, nullptr), cudaErrorInvalidValue) << "no experts";
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 2, 9, 4096, 4, pb, nullptr), cudaErrorInvalidValue) << "experts > 2048";
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 5, 9, 257, 4, pb, nullptr), cudaErrorInvalidValue) << "T > max_tokens";
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 2, 9, 257, -1, pb, nullptr), cudaErrorInvalidValue) << "max_tokens < 0";
    auto no_counts = pb;
    no_counts.counts = nullptr;
    EXPECT_EQ(fc::moe_build_plan(i32.ptr, 2, 9, 257, 4, no_counts, nullptr), cudaErrorInvalidValue) << "null counts";

    // Top-k + plan in one kernel: its own limits (T <= 64, T * slots <= 2048, E + S <= 1024) and the rule's.
    EXPECT_TRUE(fc::moe_route_topk_plan_fits(64, base));
    EXPECT_FALSE(fc::moe_route_topk_plan_fits(65, base)) << "T > 64";
    EXPECT_FALSE(fc::moe_route_topk_plan_fits(60, with([](auto &r) { r.top_k = 40, r.topk_group = 8; })))
        << "pairs > 2048";
    EXPECT_FALSE(fc::moe_route_topk_plan_fits(2, with([](auto &r) { r.shared = 800; }))) << "E + S > 1024";
    auto fused = [&](fc::route_rule r, int tokens, int max_tokens, fc::plan_buffers b) {
        return fc::moe_route_topk_plan(f.ptr, f.ptr, tokens, r, max_tokens, i32.ptr, f.ptr, nullptr, b, nullptr);
    };
    EXPECT_EQ(fused(base, 65, 65, pb), cudaErrorInvalidValue) << "fused: T > 64";
    EXPECT_EQ(fused(base, -1, 4, pb), cudaErrorInvalidValue) << "fused: negative tokens";
    EXPECT_EQ(fused(base, 5, 4, pb), cudaErrorInvalidValue) << "fused: T > max_tokens with masked";
    EXPECT_EQ(fused(with([](auto &r) { r.n_group = 7; }), 2, 4, pb), cudaErrorInvalidValue) << "fused: bad groups";
    EXPECT_EQ(fused(base, 2, 4, no_counts), cudaErrorInvalidValue) << "fused: null counts";
    EXPECT_EQ(fc::moe_route_topk_plan(f.ptr, nullptr, 2, base, 4, i32.ptr, f.ptr, nullptr, pb, nullptr),
              cudaErrorInvalidValue)
        << "fused: correction_bias without a bias";
    EXPECT_EQ(fc::moe_route_fused(x.ptr, f.ptr, f.ptr, 2, 0, base, 4, f.ptr, i32.ptr, f.ptr, nullptr, pb, nullptr),
              cudaErrorInvalidValue)
        << "fused: H = 0";
    EXPECT_EQ(fc::moe_route_fused(x.ptr, f.ptr, f.ptr, 2, 64, base, 4, f.ptr, nullptr, f.ptr, nullptr, pb, nullptr),
              cudaErrorInvalidValue)
        << "fused: null ids";
    EXPECT_EQ(fc::moe_route_fused(x.ptr, f.ptr, f.ptr, 5, 64, base, 4, f.ptr, i32.ptr, f.ptr, nullptr, pb, nullptr),
              cudaErrorInvalidValue)
        << "fused: T > max_tokens with masked";

    EXPECT_EQ(fc::moe_router_logits(x.ptr, f.ptr, -1, 64, 8, f.ptr, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(fc::moe_router_logits(x.ptr, f.ptr, 2, 0, 8, f.ptr, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(fc::moe_router_logits(x.ptr, f.ptr, 2, 64, 0, f.ptr, nullptr), cudaErrorInvalidValue);

    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    for (auto v : f.download()) ASSERT_TRUE(std::isnan(v)) << "a rejected launch wrote";
    for (auto v : i32.download()) ASSERT_EQ(v, static_cast<std::int32_t>(0xD5D5D5D5u)) << "a rejected launch wrote";
}

// Exactly representable inputs: x in {-3..3}, router in {-511..511} / 64 (9 significant bits: the tensor-core
// path needs its hi and mid bf16 parts). Every product is a multiple of 1/64 of magnitude < 24, every partial
// sum a multiple of 1/64 below 2^18 (H <= 7168), so any summation order gives the exact dot: the GPU must equal
// the CPU bit for bit (catches any wrong, skipped or doubled index, or a lost part of the router). Also with a
// bf16 router passed as such ({-255..255} / 64: 8 significant bits), which takes the one-part kernels (the decode
// tensor-core kernel up to T = 64, wgmma from T = 256).
TEST(CudaMoeRoute, RouterLogitsExactOnExactInputs) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> xi(-3, 3), ri(-511, 511), ri_bf16(-255, 255);
    for (const bool router_bf16 : {false, true})
        for (const auto &c : kLogitsCases) {
            SCOPED_TRACE(case_name(c) + (router_bf16 ? " (bf16 router)" : ""));
            std::vector<fp4moe::bf16_t> x(static_cast<std::size_t>(c.tokens) * c.hidden);
            std::vector<float> router(static_cast<std::size_t>(c.experts) * c.hidden);
            for (auto &v : x) v = fp4moe::float_to_bf16(static_cast<float>(xi(rng)));
            for (auto &v : router) v = static_cast<float>(router_bf16 ? ri_bf16(rng) : ri(rng)) / 64.0f;
            const auto got = gpu_logits(x, router, c, router_bf16), want = cpu_logits(x, router, c);
            int bad = 0;
            for (std::size_t i = 0; i < got.size(); ++i)
                if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) && ++bad <= 8)
                    ADD_FAILURE() << "logit [" << i / c.experts << ", " << i % c.experts << "]: got " << got[i]
                                  << ", want " << want[i];
            EXPECT_EQ(bad, 0);
        }
}

// Random bf16 x and fp32 router. Any fp32 summation of n products (n - 1 additions after n roundings of the
// products, or FMAs) is within gamma_n * S of the exact dot, S = sum |x_k r_k| (Higham, Thm 3.1; gamma_n =
// n u / (1 - n u), u = 2^-24). The CPU (sequential) and the GPU (any order) both are, so they differ by at most
// 2 gamma_H S; each is also checked against the exact dot (in double) within gamma_H S. Also with a bf16 router
// (the checkpoints' dtype) passed as such: the wgmma kernel then multiplies one bf16 part instead of three.
TEST(CudaMoeRoute, RouterLogitsWithinSummationBound) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    std::normal_distribution<float> xn(0.0f, 1.0f), rn(0.0f, 0.02f);
    for (const bool router_bf16 : {false, true})
        for (const auto &c : kLogitsCases) {
            SCOPED_TRACE(case_name(c) + (router_bf16 ? " (bf16 router)" : ""));
            std::vector<fp4moe::bf16_t> x(static_cast<std::size_t>(c.tokens) * c.hidden);
            std::vector<float> router(static_cast<std::size_t>(c.experts) * c.hidden);
            for (auto &v : x) v = fp4moe::float_to_bf16(xn(rng));
            for (auto &v : router) v = router_bf16 ? fp4moe::bf16_to_float(fp4moe::float_to_bf16(rn(rng))) : rn(rng);
            const auto got = gpu_logits(x, router, c, router_bf16), want = cpu_logits(x, router, c);
            const double u = std::ldexp(1.0, -24), gamma = c.hidden * u / (1.0 - c.hidden * u);
            int bad = 0;
            for (int t = 0; t < c.tokens; ++t)
                for (int e = 0; e < c.experts; ++e) {
                    double exact = 0.0, s = 0.0;
                    for (int k = 0; k < c.hidden; ++k) {
                        const double p =
                            static_cast<double>(fp4moe::bf16_to_float(x[static_cast<std::size_t>(t) * c.hidden + k])) *
                            router[static_cast<std::size_t>(e) * c.hidden + k];
                        exact += p;
                        s += std::fabs(p);
                    }
                    const std::size_t i = static_cast<std::size_t>(t) * c.experts + e;
                    const bool ok = std::isfinite(got[i]) && std::fabs(got[i] - exact) <= gamma * s &&
                                    std::fabs(static_cast<double>(got[i]) - want[i]) <= 2 * gamma * s;
                    if (!ok && ++bad <= 8)
                        ADD_FAILURE() << "logit [" << t << ", " << e << "]: got " << got[i] << ", cpu " << want[i]
                                      << ", exact " << exact << ", bound " << gamma * s;
                }
            EXPECT_EQ(bad, 0);
        }
}

namespace {

// Exactly representable routing inputs: x in {-3..3}, router in {-8..8} / 1024. Every partial sum of a logit is
// then exact, so any summation order gives `logits` (the CPU's) bit for bit.
struct exact_routing {
    std::vector<std::uint16_t> xbits; // x [T, H] as bf16 bits
    std::vector<float> router;        // [E, H]
    std::vector<float> logits;        // [T, E]: fp4moe::cpu::router_logits
};
exact_routing make_exact_routing(fp4moe::moe_desc d, int T, int H, std::mt19937 &rng) {
    std::uniform_int_distribution<int> xi(-3, 3), ri(-8, 8);
    const int E = static_cast<int>(d.experts);
    std::vector<fp4moe::bf16_t> x(static_cast<std::size_t>(T) * H);
    exact_routing r{std::vector<std::uint16_t>(x.size()), std::vector<float>(static_cast<std::size_t>(E) * H),
                    std::vector<float>(static_cast<std::size_t>(T) * E)};
    for (std::size_t i = 0; i < x.size(); ++i)
        r.xbits[i] = (x[i] = fp4moe::float_to_bf16(static_cast<float>(xi(rng)))).bits;
    for (auto &v : r.router) v = static_cast<float>(ri(rng)) / 1024.0f;
    d.hidden = H;
    fp4moe::cpu::router_logits(d, x.data(), T, r.router.data(), r.logits.data());
    return r;
}

} // namespace

// The decode routing of the layer forward (moe_route_fused at T <= 8: split-K logits, then the 256-thread top-k +
// plan CTA): every rule, every T it takes, both layouts (masked_pairs in-kernel, and past 65536 entries by the
// separate grid). Exact inputs (make_exact_routing) make the logits equal the CPU's bit for bit, so ids and the plan
// must equal the CPU chain's exactly, weights within weight_close. Each case runs twice on poisoned outputs. One case
// in five also has a NaN in a token's x: that token gets ids -1 and bad_token, the others the CPU's ids.
TEST(CudaMoeRoute, DecodeRoutingMatchesCpu) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    int case_no = 0;
    for (const auto &r : all_rules())
        for (int T : {1, 2, 3, 4, 5, 7, 8}) {
            const auto &d = r.d;
            const int E = static_cast<int>(d.experts), slots = static_cast<int>(d.slots());
            const int NE = static_cast<int>(d.total_experts()), H = case_no % 2 ? 2056 : 1000;
            const int max_tokens = case_no % 3 == 2 ? 512 : 8; // 512: masked_pairs by the separate grid
            const bool nan_token = T >= 2 && case_no % 5 == 0;
            ++case_no;
            SCOPED_TRACE(r.name + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
                         " max_tokens=" + std::to_string(max_tokens) + (nan_token ? " (NaN in token 1)" : ""));
            if (!fc::moe_route_topk_plan_fits(T, to_rule(d))) continue;
            auto [xbits, router, logits] = make_exact_routing(d, T, H, rng);
            const auto bias = make_bias(input_kind::random, E, rng);
            const bool cpu_bias = d.routing.correction_bias;
            if (nan_token) { // the GPU's logits of token 1 are NaN; the CPU routes the others from zeros there
                xbits[static_cast<std::size_t>(H) + 5] = 0x7FC0;
                std::fill_n(logits.begin() + E, E, 0.0f);
            }
            fp4moe::moe_plan want(d, max_tokens);
            ASSERT_TRUE(fp4moe::moe_route(d, logits, bias.data(), T, want).ok());

            device_buffer<std::uint16_t> d_x(xbits);
            device_buffer<float> d_router(router), d_bias(bias), d_logits(logits.size()),
                d_w(static_cast<std::size_t>(T) * slots);
            device_buffer<std::int32_t> d_ids(static_cast<std::size_t>(T) * slots);
            device_plan plan(NE, T * slots, max_tokens);
            ASSERT_TRUE(fc::moe_route_fused_preferred(T, to_rule(d)));
            for (int call = 0; call < 2; ++call) {
                SCOPED_TRACE("call " + std::to_string(call));
                device_buffer<int> d_bad(std::vector<int>{INT_MAX});
                d_logits.poison(), d_w.poison(), d_ids.poison(), plan.poison();
                ASSERT_EQ(fc::moe_route_fused(d_x.ptr, d_router.ptr, cpu_bias ? d_bias.ptr : nullptr, T, H, to_rule(d),
                                              max_tokens, d_logits.ptr, d_ids.ptr, d_w.ptr, d_bad.ptr, plan.buffers(),
                                              nullptr),
                          cudaSuccess);
                FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
                const auto got_logits = d_logits.download();
                for (int t = 0; t < T; ++t)
                    for (int e = 0; e < E; ++e) {
                        const std::size_t i = static_cast<std::size_t>(t) * E + e;
                        if (nan_token && t == 1) {
                            ASSERT_TRUE(std::isnan(got_logits[i])) << "logit [1, " << e << "]";
                            continue;
                        }
                        ASSERT_EQ(std::bit_cast<std::uint32_t>(got_logits[i]), std::bit_cast<std::uint32_t>(logits[i]))
                            << "logit [" << t << ", " << e << "]";
                    }
                const auto ids = d_ids.download();
                const auto w = d_w.download();
                for (int t = 0; t < T; ++t)
                    for (int j = 0; j < slots; ++j) {
                        const std::size_t i = static_cast<std::size_t>(t) * slots + j;
                        if (nan_token && t == 1) {
                            EXPECT_EQ(ids[i], -1) << "slot " << j << " of the NaN token";
                            EXPECT_EQ(w[i], 0.0f) << "slot " << j << " of the NaN token";
                            continue;
                        }
                        EXPECT_EQ(ids[i], want.topk_ids[i]) << "token " << t << " slot " << j;
                        EXPECT_TRUE(weight_close(w[i], want.topk_weights[i]))
                            << "token " << t << " slot " << j << ": " << w[i] << " vs " << want.topk_weights[i];
                    }
                if (nan_token) {
                    EXPECT_EQ(d_bad.download()[0], 1);
                    expect_equal_plan(plan.download(), reference_plan(ids, NE, max_tokens));
                } else {
                    EXPECT_EQ(d_bad.download()[0], INT_MAX);
                    expect_equal_plan(plan.download(), from_cpu(want));
                }
                if (HasFailure()) return;
            }
        }
}

// logits -> top-k -> plan captured in one CUDA graph and replayed twice (outputs poisoned in between): both
// replays equal the CPU chain. Exact inputs (as above, router / 1024) make the logits equal too, so the ids must.
TEST(CudaMoeRoute, GraphCaptureReplaysTheSameResult) {
    SKIP_WITHOUT_GPU();
    const unsigned seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    const auto d = make_desc(256, 8, 1, sigmoid_routing(true, 8, 4, 2.5f));
    const int T = 37, H = 2048, E = 256, slots = 9, NE = 257, max_tokens = 64;
    const auto [xbits, router, logits] = make_exact_routing(d, T, H, rng);
    const auto bias = make_bias(input_kind::random, E, rng);
    fp4moe::moe_plan want(d, max_tokens);
    ASSERT_TRUE(fp4moe::moe_route(d, logits, bias.data(), T, want).ok());

    device_buffer<std::uint16_t> d_x(xbits);
    device_buffer<float> d_router(router), d_bias(bias), d_logits(logits.size()),
        d_w(static_cast<std::size_t>(T) * slots);
    device_buffer<std::int32_t> d_ids(static_cast<std::size_t>(T) * slots);
    device_buffer<int> d_bad(std::vector<int>{INT_MAX});
    device_plan plan(NE, T * slots, max_tokens);
    cudaStream_t stream;
    FP4MOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const bool fused : {false, true}) { // three launches; moe_route_fused (PDL-chained kernels)
        SCOPED_TRACE(fused ? "moe_route_fused" : "logits, top-k, plan");
        cudaGraph_t graph;
        FP4MOE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        cudaError_t e1 = cudaSuccess, e2 = cudaSuccess, e3 = cudaSuccess;
        if (fused) {
            e1 = fc::moe_route_fused(d_x.ptr, d_router.ptr, d_bias.ptr, T, H, to_rule(d), max_tokens, d_logits.ptr,
                                     d_ids.ptr, d_w.ptr, d_bad.ptr, plan.buffers(), stream);
        } else {
            e1 = fc::moe_router_logits(d_x.ptr, d_router.ptr, T, H, E, d_logits.ptr, stream);
            e2 = fc::moe_route_topk(d_logits.ptr, d_bias.ptr, T, to_rule(d), d_ids.ptr, d_w.ptr, d_bad.ptr, stream);
            e3 = fc::moe_build_plan(d_ids.ptr, T, slots, NE, max_tokens, plan.buffers(), stream);
        }
        FP4MOE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        ASSERT_EQ(e1, cudaSuccess);
        ASSERT_EQ(e2, cudaSuccess);
        ASSERT_EQ(e3, cudaSuccess);
        cudaGraphExec_t exec;
        FP4MOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int replay = 0; replay < 2; ++replay) {
            SCOPED_TRACE("replay " + std::to_string(replay));
            d_logits.poison(stream), d_w.poison(stream), d_ids.poison(stream), plan.poison(stream);
            FP4MOE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
            FP4MOE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const auto got_logits = d_logits.download();
            for (std::size_t i = 0; i < logits.size(); ++i)
                ASSERT_EQ(std::bit_cast<std::uint32_t>(got_logits[i]), std::bit_cast<std::uint32_t>(logits[i]))
                    << "logit " << i;
            expect_equal_array("topk_ids", d_ids.download(), want.topk_ids);
            const auto w = d_w.download();
            for (std::size_t i = 0; i < w.size(); ++i)
                EXPECT_TRUE(weight_close(w[i], want.topk_weights[i]))
                    << "weight " << i << ": " << w[i] << " vs " << want.topk_weights[i];
            expect_equal_plan(plan.download(), from_cpu(want));
            EXPECT_EQ(d_bad.download()[0], INT_MAX);
        }
        FP4MOE_CUDA_CHECK(cudaGraphExecDestroy(exec));
        FP4MOE_CUDA_CHECK(cudaGraphDestroy(graph));
    }
    FP4MOE_CUDA_CHECK(cudaStreamDestroy(stream));
}
