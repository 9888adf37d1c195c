// cuda.decode and cuda.grouped against the cpu.ref oracle (fp64): every routing rule, both layouts, T in {1, 2, 3,
// 7, 16, 64, 255, 1024} (cuda.grouped also 4096 and 16384), every tactic, experts with no tokens, one hot expert,
// x scaled by 2^12 and 2^-20 (cuda.grouped), K not a multiple of 64, a down K of 1504 (cuda.decode); outputs
// and workspace poisoned before each run. The whole layer on the device (router -> top-k -> plan -> runner) against the
// same oracle, and its CUDA graph replays, with each runner. Fresh random layers each run (seed printed on failure).
//
// Tolerance: the runners round SiLU(gate) * up to bf16 before the down GEMM (cpu.ref keeps fp32) and both round
// the output to bf16: each rounding is a relative error uniform in +-2^-9 (RMS 2^-9 / sqrt(3) = 1.1e-3), the
// act rounding averages over I terms of random sign, so ||gpu - ref|| / ||ref|| ~ sqrt(3) x 1.1e-3 = 2e-3 at
// worst with fp32 accumulation-order noise far below. 2^-8 = 3.9e-3 leaves a 2x margin; a wrong tile, scale or
// row gives errors of order 1. (Rounding each weighted slot row to bf16 before the sum, as a first cuda.grouped
// did, adds a third rounding and measured 4.0e-3 at T = 1: it keeps fp32 rows like cuda.decode.)
#include "../cpu/moe_case.h"
#include "cuda_test_util.h"
#include "device.h"
#include "moe_gpu.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace fp4moe::test {
namespace {

constexpr double kTol = 1.0 / 256;

struct dev_mem {
    void *p = nullptr;
    explicit dev_mem(std::size_t n) { FP4MOE_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1))); }
    ~dev_mem() { cudaFree(p); }
    dev_mem(const dev_mem &) = delete;
    template <typename T>
    T *as() const {
        return static_cast<T *>(p);
    }
};

moe_desc qwen3_like() {
    moe_desc d;
    d.hidden = 272, d.intermediate = 144, d.experts = 16, d.top_k = 4;
    d.routing.scoring = moe_scoring::softmax;
    return d;
}
moe_desc glm_like() {
    moe_desc d;
    d.hidden = 256, d.intermediate = 96, d.experts = 16, d.top_k = 4, d.shared = 1;
    d.routing.scoring = moe_scoring::sigmoid, d.routing.correction_bias = true;
    d.routing.routed_scaling_factor = 1.0f;
    return d;
}
moe_desc deepseek_like() {
    moe_desc d;
    d.hidden = 320, d.intermediate = 64, d.experts = 32, d.top_k = 4, d.shared = 1;
    d.routing.scoring = moe_scoring::sigmoid, d.routing.correction_bias = true;
    d.routing.n_group = 4, d.routing.topk_group = 2, d.routing.routed_scaling_factor = 2.5f;
    return d;
}

std::uint32_t fresh_seed() {
    return std::random_device{}();
}

// Whether routing x through L picks the same experts when every logit moves by up to 1e-5 (logits are of order
// one): the device computes the logits in another summation order (and from T = 65 on tensor cores), so where a
// selection hinges on an ulp of a logit a correct device may pick the other expert. Seen once in ~10^3 layers
// (deepseek_like, T = 300, seed 2360729653: 1e-7 of noise flips it in half of the trials); tests that compare
// the device's own routing with the CPU's draw their inputs until this holds.
bool routing_is_stable(const moe_layer &L, const std::vector<bf16_t> &x, std::int64_t T, const moe_plan &p) {
    std::vector<float> logits(T * L.d.experts);
    cpu::router_logits(L.d, x.data(), T, L.router.data(), logits.data());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> noise(-1e-5f, 1e-5f);
    for (int trial = 0; trial < 8; ++trial) { // a tie flips in about half of the trials: 8 miss one in ~250
        std::vector<float> moved = logits;
        for (auto &v : moved) v += noise(rng);
        moe_plan q(L.d, T);
        if (!moe_route(L.d, moved, L.w.correction_bias, T, q).ok() || q.topk_ids != p.topk_ids) return false;
    }
    return true;
}

// Runs cuda.decode on a host plan with poisoned output and workspace; returns the output as floats.
std::vector<float> run_gpu(const moe_runner &r, const moe_layer &L, const cuda::gpu_moe_weights &w, const moe_plan &p,
                           const std::vector<bf16_t> &x, const moe_tactic &t) {
    const std::int64_t H = L.d.hidden;
    dev_mem dx(2 * x.size()), dout(2 * p.tokens * H), ws(r.workspace_size(L.d, p.max_tokens));
    FP4MOE_CUDA_CHECK(cudaMemcpy(dx.p, x.data(), 2 * x.size(), cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemset(dout.p, kPoison, 2 * p.tokens * H));
    FP4MOE_CUDA_CHECK(cudaMemset(ws.p, 0xFF, r.workspace_size(L.d, p.max_tokens))); // NaN floats, -1 ints
    moe_args a;
    a.x = dx.as<bf16_t>(), a.out = dout.as<bf16_t>(), a.device_weights = &w;
    a.workspace = ws.p, a.workspace_bytes = r.workspace_size(L.d, p.max_tokens);
    moe_device dev;
    dev.cuda = true, dev.cuda_device = 0, dev.name = "gpu";
    const status st = r.run(L.d, a, p, t, dev);
    EXPECT_TRUE(st.ok()) << st.to_string();
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16_t> out(p.tokens * H);
    FP4MOE_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, 2 * out.size(), cudaMemcpyDeviceToHost));
    std::vector<float> f(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) f[i] = bf16_to_float(out[i]);
    return f;
}

void check_all_tactics(cuda::gpu_runner kind, const moe_desc &base, moe_layout layout, std::int64_t tokens, bool hot,
                       float x_scale = 1.0f) {
    moe_desc d = base;
    d.layout = layout;
    const std::uint32_t seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << d.to_string() << " T=" << tokens << (hot ? " hot" : "")
                                      << " x_scale=" << x_scale << " seed=" << seed);
    auto L = random_layer(d, seed);
    auto x = random_x(tokens, d.hidden, seed + 1);
    for (auto &v : x) v = float_to_bf16(bf16_to_float(v) * x_scale); // a power of two: exact
    if (hot) { // expert 3 wins every token: x[t][0] = 1 and router row 3 = (100, 0, ...); with a correction bias,
               // bias 10 also wins its group the group selection (group score = top-2 sum of biased scores)
        for (std::int64_t k = 0; k < d.hidden; ++k) L->router[3 * d.hidden + k] = k == 0 ? 100.0f : 0.0f;
        if (!L->bias.empty()) L->bias[3] = 10.0f;
        for (std::int64_t t = 0; t < tokens; ++t) x[t * d.hidden] = float_to_bf16(1.0f);
    }
    moe_plan p = route(*L, x, tokens);
    if (hot) {
        ASSERT_EQ(p.counts[3], tokens) << "the hot-expert setup did not route every token to expert 3";
    }
    auto oracle = cpu::make_ref_runner(true);
    const auto ref = run_poisoned(*oracle, *L, p, x, {0, "fp64"});
    auto w = cuda::gpu_moe_weights::upload(d, L->w);
    ASSERT_TRUE(w.ok()) << w.get_status().to_string();
    auto r = cuda::make_gpu_runner(kind);
    for (const auto &t : r->tactics(d)) {
        const auto got = run_gpu(*r, *L, *w.value(), p, x, t);
        const auto bad = first_non_finite(got);
        EXPECT_EQ(bad, -1) << t.name << ": got " << (bad >= 0 ? got[bad] : 0.0f) << ", oracle "
                           << (bad >= 0 ? ref[bad] : 0.0f);
        EXPECT_LT(normalized_error(got, ref), kTol) << t.name;
    }
}

using rule_layout = std::tuple<int, moe_layout>;

std::string rule_layout_name(const ::testing::TestParamInfo<rule_layout> &info) {
    static const char *const rules[] = {"qwen3_softmax", "glm_sigmoid_bias_shared", "deepseek_grouped"};
    return std::string(rules[std::get<0>(info.param)]) +
           (std::get<1>(info.param) == moe_layout::masked ? "_masked" : "_permuted");
}

moe_desc desc_of_rule(int rule) {
    return rule == 0 ? qwen3_like() : rule == 1 ? glm_like() : deepseek_like();
}

class DecodeRunner : public ::testing::TestWithParam<rule_layout> {};

TEST_P(DecodeRunner, MatchesOracleForEveryTokenCountAndTactic) {
    SKIP_WITHOUT_GPU();
    const auto [rule, layout] = GetParam();
    for (std::int64_t T : {1, 2, 3, 7, 16, 64, 255, 1024})
        check_all_tactics(cuda::gpu_runner::decode, desc_of_rule(rule), layout, T, false);
}

// An intermediate size of real models' order (1504 = 23.5 K steps of 64) for the down GEMMs: the K loops' check-free
// fast path (a whole chunk and B's lead inside the data) runs only where K holds several chunks, which the sizes above
// do not, and its hand-off to the checked path at the end of K is tested here (T = 1, 4, 8: every tactic). 1408 (22
// whole K steps, glm-4.5-air's) makes down's last-but-one chunk a check-free one whose B prefetches run past the end
// of K (never used): they read act's next row, and past its last row into the workspace's next region.
TEST_P(DecodeRunner, LongIntermediate) {
    SKIP_WITHOUT_GPU();
    const auto [rule, layout] = GetParam();
    moe_desc d = desc_of_rule(rule);
    for (std::int64_t inter : {1504, 1408}) {
        d.intermediate = inter;
        for (std::int64_t T : {1, 4, 8}) check_all_tactics(cuda::gpu_runner::decode, d, layout, T, false);
    }
}

TEST_P(DecodeRunner, OneHotExpert) {
    SKIP_WITHOUT_GPU();
    const auto [rule, layout] = GetParam();
    check_all_tactics(cuda::gpu_runner::decode, desc_of_rule(rule), layout, 255, true);
}

INSTANTIATE_TEST_SUITE_P(Rules, DecodeRunner,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(moe_layout::permuted, moe_layout::masked)),
                         rule_layout_name);

// cuda.grouped needs sm_90 (wgmma, TMA); on another GPU the runner says it does not support the device.
#define SKIP_WITHOUT_HOPPER()                                                                                          \
    do {                                                                                                               \
        SKIP_WITHOUT_GPU();                                                                                            \
        if (!cuda::moe_grouped_supported()) GTEST_SKIP() << "cuda.grouped needs an sm_90 (Hopper) GPU";                \
    } while (0)

class GroupedRunner : public ::testing::TestWithParam<rule_layout> {};

TEST_P(GroupedRunner, MatchesOracleForEveryTokenCountAndTactic) {
    SKIP_WITHOUT_HOPPER();
    const auto [rule, layout] = GetParam();
    for (std::int64_t T : {1, 2, 3, 7, 16, 64, 255, 1024, 4096, 16384})
        check_all_tactics(cuda::gpu_runner::grouped, desc_of_rule(rule), layout, T, false);
}

TEST_P(GroupedRunner, OneHotExpert) {
    SKIP_WITHOUT_HOPPER();
    const auto [rule, layout] = GetParam();
    check_all_tactics(cuda::gpu_runner::grouped, desc_of_rule(rule), layout, 1000, true);
}

// Activations far past fp16's range (x * 2^12: act ~ 1e7, slot rows ~ 1e8) and far below its normal range
// (x * 2^-20): bf16 act and fp32 slot rows keep their relative precision at both ends (a compact slot-row format
// that does not, as an fp16 one tried on a branch, fails here).
TEST_P(GroupedRunner, LargeAndTinyActivations) {
    SKIP_WITHOUT_HOPPER();
    const auto [rule, layout] = GetParam();
    for (float scale : {4096.0f, 1.0f / 1048576.0f})
        check_all_tactics(cuda::gpu_runner::grouped, desc_of_rule(rule), layout, 300, false, scale);
}

INSTANTIATE_TEST_SUITE_P(Rules, GroupedRunner,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(moe_layout::permuted, moe_layout::masked)),
                         rule_layout_name);

TEST(DecodeRunner, RefusesBf16AndMissingWeights) {
    auto r = cuda::make_decode_runner();
    moe_desc d = glm_like();
    moe_device gpu;
    gpu.cuda = true;
    EXPECT_TRUE(r->supports(d, gpu));
    EXPECT_FALSE(r->supports(d, moe_device{}));
    d.weights = moe_weight_format::bf16;
    EXPECT_FALSE(r->supports(d, gpu));
    d.weights = moe_weight_format::nvfp4;
    moe_plan p(d, 1);
    moe_args a;
    const status st = r->run(d, a, p, {0, ""}, gpu);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("device weights"), std::string::npos) << st.message();
}

TEST(GroupedRunner, RefusesBadTacticAndMissingWeights) {
    auto r = cuda::make_gpu_runner(cuda::gpu_runner::grouped);
    EXPECT_EQ(r->name(), "cuda.grouped");
    moe_desc d = glm_like();
    EXPECT_FALSE(r->supports(d, moe_device{})); // not a CUDA device
    moe_device gpu;
    gpu.cuda = true;
    moe_plan p(d, 1);
    moe_args a;
    status st = r->run(d, a, p, {0, ""}, gpu);
    EXPECT_NE(st.message().find("device weights"), std::string::npos) << st.message();
    int dummy = 0;
    a.device_weights = &dummy;
    st = r->run(d, a, p, {99, ""}, gpu);
    EXPECT_NE(st.message().find("no tactic 99"), std::string::npos) << st.message();
}

// Tactic ids the layer test runs: tactic 0 eagerly, then tactic 4 as two graph replays.
std::vector<std::pair<int, bool>> layer_passes(cuda::gpu_runner kind) {
    const int tactics = cuda::gpu_tactic_count(kind);
    return {{0, false}, {4 % tactics, true}, {4 % tactics, true}};
}

// Runs the layer forward with tactic `id` eagerly or as a captured graph, on poisoned output and workspace.
void run_layer(const moe_desc &d, const cuda::gpu_moe_weights &w, cuda::gpu_runner kind, int id, bool graph,
               const void *x, void *out, std::int64_t T, std::int64_t cap, void *ws, cudaStream_t s) {
    FP4MOE_CUDA_CHECK(cudaMemset(out, kPoison, 2 * T * d.hidden));
    FP4MOE_CUDA_CHECK(cudaMemset(ws, 0xFF, cuda::gpu_moe_forward_workspace(d, cap)));
    const auto *xb = static_cast<const bf16_t *>(x);
    auto *ob = static_cast<bf16_t *>(out);
    if (!graph) {
        const status st = cuda::gpu_moe_forward(d, w, xb, ob, T, cap, ws, {kind, id}, s);
        ASSERT_TRUE(st.ok()) << st.to_string();
    } else {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        FP4MOE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        const status st = cuda::gpu_moe_forward(d, w, xb, ob, T, cap, ws, {kind, id}, s);
        FP4MOE_CUDA_CHECK(cudaStreamEndCapture(s, &g));
        ASSERT_TRUE(st.ok()) << st.to_string();
        FP4MOE_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
        FP4MOE_CUDA_CHECK(cudaGraphLaunch(ge, s));
        FP4MOE_CUDA_CHECK(cudaGraphExecDestroy(ge));
        FP4MOE_CUDA_CHECK(cudaGraphDestroy(g));
    }
    FP4MOE_CUDA_CHECK(cudaStreamSynchronize(s));
}

std::vector<float> download_floats(const void *dev, std::size_t n) {
    std::vector<bf16_t> out(n);
    FP4MOE_CUDA_CHECK(cudaMemcpy(out.data(), dev, 2 * n, cudaMemcpyDeviceToHost));
    std::vector<float> got(n);
    for (std::size_t i = 0; i < n; ++i) got[i] = bf16_to_float(out[i]);
    return got;
}

// The whole layer on the device, routing included, against routing + cpu.ref on the CPU; then as a graph. T = 300
// takes the tensor-core router (wgmma on sm_90), with a bf16 router (the checkpoints' dtype: one bf16 part per
// weight) for the second rule and an fp32 one (three parts) for the others.
void check_layer(cuda::gpu_runner kind) {
    for (int rule = 0; rule < 3; ++rule)
        for (auto layout : {moe_layout::permuted, moe_layout::masked})
            for (std::int64_t T : {1, 3, 7, 64, 300}) {
                moe_desc d = rule == 0 ? qwen3_like() : rule == 1 ? glm_like() : deepseek_like();
                d.layout = layout;
                const bool bf16_router = T == 300 && rule == 1;
                std::uint32_t seed = 0;
                std::unique_ptr<moe_layer> L;
                std::vector<bf16_t> x;
                moe_plan p;
                for (int draw = 0; draw < 16; ++draw) { // inputs whose routing has no near tie
                    seed = fresh_seed();
                    L = random_layer(d, seed);
                    if (bf16_router)
                        for (auto &v : L->router) v = bf16_to_float(float_to_bf16(v));
                    x = random_x(T, d.hidden, seed + 1);
                    p = route(*L, x, T);
                    if (routing_is_stable(*L, x, T, p)) break;
                }
                SCOPED_TRACE(::testing::Message() << cuda::make_gpu_runner(kind)->name() << " " << d.to_string()
                                                  << " T=" << T << " seed=" << seed);
                ASSERT_TRUE(routing_is_stable(*L, x, T, p)) << "16 draws of inputs all had a near tie in routing";
                auto oracle = cpu::make_ref_runner(true);
                const auto ref = run_poisoned(*oracle, *L, p, x, {0, "fp64"});
                auto w = cuda::gpu_moe_weights::upload(d, L->w);
                ASSERT_TRUE(w.ok()) << w.get_status().to_string();
                EXPECT_EQ(w.value()->router_bf16(), bf16_router);
                const std::int64_t cap = std::max<std::int64_t>(64, T);
                dev_mem dx(2 * T * d.hidden), dout(2 * T * d.hidden), ws(cuda::gpu_moe_forward_workspace(d, cap));
                FP4MOE_CUDA_CHECK(cudaMemcpy(dx.p, x.data(), 2 * x.size(), cudaMemcpyHostToDevice));
                cudaStream_t s;
                FP4MOE_CUDA_CHECK(cudaStreamCreate(&s));
                for (const auto &[id, graph] : layer_passes(kind)) {
                    const std::string pass =
                        cuda::gpu_tactic_name({kind, id}) + (graph ? " (graph replay)" : " (eager)");
                    run_layer(d, *w.value(), kind, id, graph, dx.p, dout.p, T, cap, ws.p, s);
                    auto counts = cuda::gpu_moe_counts(d, cap, ws.p, s);
                    ASSERT_TRUE(counts.ok());
                    EXPECT_EQ(counts.value(), p.counts) << "device routing chose other experts: " << pass;
                    const auto got = download_floats(dout.p, T * d.hidden);
                    EXPECT_EQ(first_non_finite(got), -1) << pass;
                    EXPECT_LT(normalized_error(got, ref), kTol) << pass;
                }
                FP4MOE_CUDA_CHECK(cudaStreamDestroy(s));
            }
}

TEST(DecodeLayer, DeviceRoutingAndGraphReplayMatchOracle) {
    SKIP_WITHOUT_GPU();
    check_layer(cuda::gpu_runner::decode);
}

// A token whose logits are not finite (an inf in its x) gets NaN outputs and no expert; the other tokens of the
// batch are unaffected: they match cpu.ref on the batch without it, and the counts are theirs. Every decode tactic
// at T = 1 and 3 (the fused top-k + plan kernel), each rule.
TEST(DecodeLayer, NonFiniteTokenGetsNaNOutputs) {
    SKIP_WITHOUT_GPU();
    for (int rule = 0; rule < 3; ++rule)
        for (std::int64_t T : {1, 3}) {
            const moe_desc d = desc_of_rule(rule);
            const std::int64_t bad = T / 2;
            std::uint32_t seed = 0;
            std::unique_ptr<moe_layer> L;
            std::vector<bf16_t> x, rest; // rest: the batch without the bad token
            moe_plan p;
            for (int draw = 0; draw < 16; ++draw) { // inputs whose routing has no near tie
                seed = fresh_seed();
                L = random_layer(d, seed);
                x = random_x(T, d.hidden, seed + 1);
                x[bad * d.hidden + 5] = float_to_bf16(INFINITY);
                rest.clear();
                for (std::int64_t t = 0; t < T; ++t)
                    if (t != bad) rest.insert(rest.end(), x.begin() + t * d.hidden, x.begin() + (t + 1) * d.hidden);
                if (T == 1) break;
                p = route(*L, rest, T - 1);
                if (routing_is_stable(*L, rest, T - 1, p)) break;
            }
            SCOPED_TRACE(::testing::Message() << d.to_string() << " T=" << T << " seed=" << seed);
            std::vector<float> ref;
            std::vector<std::int32_t> counts(d.total_experts(), 0);
            if (T > 1) {
                ASSERT_TRUE(routing_is_stable(*L, rest, T - 1, p)) << "16 draws of inputs all had a near tie";
                auto oracle = cpu::make_ref_runner(true);
                ref = run_poisoned(*oracle, *L, p, rest, {0, "fp64"});
                counts = p.counts;
            }
            auto w = cuda::gpu_moe_weights::upload(d, L->w);
            ASSERT_TRUE(w.ok()) << w.get_status().to_string();
            const std::int64_t cap = 64;
            dev_mem dx(2 * T * d.hidden), dout(2 * T * d.hidden), ws(cuda::gpu_moe_forward_workspace(d, cap));
            FP4MOE_CUDA_CHECK(cudaMemcpy(dx.p, x.data(), 2 * x.size(), cudaMemcpyHostToDevice));
            cudaStream_t s;
            FP4MOE_CUDA_CHECK(cudaStreamCreate(&s));
            for (int id = 0; id < cuda::gpu_tactic_count(cuda::gpu_runner::decode); ++id) {
                const std::string name = cuda::gpu_tactic_name({cuda::gpu_runner::decode, id});
                run_layer(d, *w.value(), cuda::gpu_runner::decode, id, false, dx.p, dout.p, T, cap, ws.p, s);
                const auto got = download_floats(dout.p, T * d.hidden);
                std::vector<float> good;
                for (std::int64_t t = 0; t < T; ++t) {
                    const auto row = got.begin() + t * d.hidden;
                    if (t == bad)
                        EXPECT_TRUE(std::all_of(row, row + d.hidden, [](float v) { return std::isnan(v); })) << name;
                    else
                        good.insert(good.end(), row, row + d.hidden);
                }
                if (T > 1) {
                    EXPECT_EQ(first_non_finite(good), -1) << name;
                    EXPECT_LT(normalized_error(good, ref), kTol) << name;
                }
                auto c = cuda::gpu_moe_counts(d, cap, ws.p, s);
                ASSERT_TRUE(c.ok());
                EXPECT_EQ(c.value(), counts) << name;
            }
            FP4MOE_CUDA_CHECK(cudaStreamDestroy(s));
        }
}

TEST(GroupedLayer, DeviceRoutingAndGraphReplayMatchOracle) {
    SKIP_WITHOUT_HOPPER();
    check_layer(cuda::gpu_runner::grouped);
}

} // namespace
} // namespace fp4moe::test
