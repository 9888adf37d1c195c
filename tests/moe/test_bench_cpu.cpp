// The CPU bench harness end to end on a tiny shape (small pool), and the threaded router against the
// reference router.
#include "backend/cpu/bench_cpu.h"
#include "backend/cpu/bench_moe_cpu.h"
#include "backend/cpu/runners.h"
#include "moe/shapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace fp4moe;

TEST(moe_bench_cpu, router_logits_parallel_matches_reference) {
    auto d = moe_shape_custom(80, 32, 12, 2, 0).value();
    const std::int64_t T = 37;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<bf16_t> x(T * d.hidden);
    for (auto &v : x) v = float_to_bf16(u(rng));
    std::vector<float> router(d.experts * d.hidden), ref(T * d.experts), got(T * d.experts), xf(T * d.hidden);
    for (auto &v : router) v = u(rng);
    cpu::router_logits(d, x.data(), T, router.data(), ref.data());
    thread_pool tp(2);
    cpu::router_logits_parallel(tp, d, x.data(), T, router.data(), xf.data(), got.data());
    for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-4f * (1 + std::fabs(ref[i]))) << i;
}

namespace {

// A bench of both CPU runners on a tiny custom layer (H=64, I=32, E=8, k=2, S=1), quick to time.
moe_bench_options tiny_bench() {
    moe_bench_options o;
    o.shape_name = "custom";
    o.desc = moe_shape_custom(64, 32, 8, 2, 1).value();
    o.runners = {"cpu.ref", "cpu.fast"};
    o.warmup = 0;
    o.threads = 2;
    o.pool_gib = 0.001;
    return o;
}

} // namespace

TEST(moe_bench_cpu, tiny_run_has_a_row_per_runner_tactic_and_token_count) {
    moe_bench_options o = tiny_bench();
    o.tokens = {2, 1};
    o.all_tactics = false;
    o.iters = 2;
    o.skew = 1.0;
    auto rep = cpu::run_moe_bench(o);
    ASSERT_TRUE(rep.ok()) << rep.get_status().to_string();
    const auto &r = rep.value();
    EXPECT_GT(r.meta.bandwidth_gbps, 0);
    EXPECT_GT(r.meta.peak_tflops, 0);
    ASSERT_EQ(r.rows.size(), 6u); // (ref, fast, auto) x T in {1, 2}, sorted by T
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        const auto &row = r.rows[i];
        EXPECT_EQ(row.tokens, i < 3 ? 1 : 2);
        EXPECT_TRUE(row.skipped.empty()) << row.skipped;
        EXPECT_GT(row.us, 0);
        EXPECT_GE(row.samples, 1);
        EXPECT_GT(row.pct_floor, 0);
        // 2 routed + 1 shared slot per token: between 3 and 3T experts touched.
        const double expert = double(moe_expert_bytes(o.desc));
        const double fixed = 8.0 * 64 * 4 + 2.0 * row.tokens * 64 * 2;
        EXPECT_GE(row.bytes, fixed + 3 * expert - 1);
        EXPECT_LE(row.bytes, fixed + 3 * row.tokens * expert + 1);
        EXPECT_DOUBLE_EQ(row.flops, moe_block_cost(o.desc, row.tokens, 0).flops);
    }
    EXPECT_EQ(r.rows[0].runner, "cpu.ref");
    EXPECT_EQ(r.rows[1].runner, "cpu.fast");
    ASSERT_EQ(r.rows[2].runner, "auto");
    ASSERT_TRUE(r.rows[2].regret.has_value());
    EXPECT_GE(*r.rows[2].regret, 1.0);

    o.runners = {"cpu.nope"};
    auto bad = cpu::run_moe_bench(o);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.get_status().message().find("cpu.ref, cpu.fast"), std::string::npos);
}

TEST(moe_bench_cpu, tactic_filter_benches_the_matching_tactics_and_names_a_miss) {
    moe_bench_options o = tiny_bench();
    o.tokens = {1};
    o.tactic_filter = {"block_n=auto", "fp64 accumulate"}; // cpu.fast's tactic 0; no tactic of cpu.ref (fp32)
    o.auto_row = false;
    o.iters = 1;
    auto rep = cpu::run_moe_bench(o);
    ASSERT_TRUE(rep.ok()) << rep.get_status().to_string();
    ASSERT_EQ(rep.value().rows.size(), 1u);
    EXPECT_EQ(rep.value().rows[0].runner, "cpu.fast");
    EXPECT_NE(rep.value().rows[0].tactic.find("block_n=auto"), std::string::npos);

    o.tactic_filter = {"bn=128", "no such"};
    auto bad = cpu::run_moe_bench(o);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.get_status().code(), status_code::invalid_argument);
    const std::string msg = bad.get_status().message();
    EXPECT_NE(msg.find("--tactics 'bn=128|no such'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu.ref [fp32 accumulate]"), std::string::npos) << msg; // what there is to pick from
    EXPECT_NE(msg.find("cpu.fast [isa="), std::string::npos) << msg;
}
