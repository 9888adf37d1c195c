// Bench accounting (bytes, FLOPs, rates, floor) on a tiny hand-computed shape; report formats; shape presets.
#include "moe/bench_report.h"
#include "moe/shapes.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace fp4moe;

namespace {

// H=32, I=16, E=4, k=2, S=1.
moe_desc tiny(moe_weight_format f = moe_weight_format::nvfp4) {
    moe_desc d;
    d.hidden = 32;
    d.intermediate = 16;
    d.experts = 4;
    d.top_k = 2;
    d.shared = 1;
    d.weights = f;
    d.routing.scoring = moe_scoring::sigmoid;
    d.routing.correction_bias = true;
    return d;
}

moe_bench_report sample_report() {
    moe_bench_report r;
    r.meta.device = "cpu test";
    r.meta.shape = "custom";
    r.meta.desc = tiny().to_string();
    r.meta.bandwidth_gbps = 100;
    r.meta.peak_tflops = 0.001;
    moe_bench_row a{"cpu.fast", 0, "isa=avx2 block_n=auto", "custom", 3};
    a.us = 56.832, a.samples = 5, a.bytes = 3524, a.flops = 28416;
    moe_bench_fill_rates(a, 100, 0.001);
    moe_bench_row b = a;
    b.runner = "cpu.ref", b.tactic = "fp32 accumulate", b.us = 113.664;
    moe_bench_fill_rates(b, 100, 0.001);
    moe_bench_row s{"cpu.ref", 0, "fp32 accumulate", "custom", 1024};
    s.skipped = "estimated 99 s per run > --max-run-s 20";
    moe_bench_row au = a;
    au.runner = "auto", au.tactic = "cpu.fast [isa=avx2 block_n=auto]", au.regret = 1.0;
    r.rows = {a, b, au, s};
    return r;
}

} // namespace

TEST(moe_bench, matrix_and_expert_bytes) {
    // nvfp4 [16, 32]: 512/2 E2M1 + 512/16 E4M3 + 4 global = 292.
    EXPECT_EQ(moe_matrix_bytes(moe_weight_format::nvfp4, 16, 32), 292u);
    EXPECT_EQ(moe_matrix_bytes(moe_weight_format::bf16, 16, 32), 1024u);
    EXPECT_EQ(moe_expert_bytes(tiny()), 3u * 292u);
    EXPECT_EQ(moe_expert_bytes(tiny(moe_weight_format::bf16)), 3u * 1024u);
    // glm-4.5-air: 3 * 1408 * 4096 * 0.5625 + 12 bytes per expert.
    auto air = moe_shape_by_name("glm-4.5-air");
    ASSERT_TRUE(air.ok());
    EXPECT_EQ(moe_expert_bytes(air.value()), 3u * (1408u * 4096u / 2 + 1408u * 4096u / 16 + 4));
}

TEST(moe_bench, block_cost_by_hand) {
    // T=3, 3 experts touched: router 4*32*4 = 512, experts 3*876 = 2628, x in + out 2*3*32*2 = 384.
    const auto w = moe_block_cost(tiny(), 3, 3);
    EXPECT_DOUBLE_EQ(w.bytes, 512 + 2628 + 384);
    // Router 2*3*32*4 = 768; experts 2*3*(2+1)*3*32*16 = 27648.
    EXPECT_DOUBLE_EQ(w.flops, 768 + 27648);
}

TEST(moe_bench, touched_experts_counts_distinct_experts_including_shared) {
    const auto d = tiny();
    moe_plan p(d, 4);
    p.tokens = 2;
    p.topk_ids = {0, 2, 4, 2, 0, 4}; // slots: 2 routed + the shared slot 4
    p.topk_weights.assign(6, 1.0f);
    moe_plan_from_ids(d, p);
    EXPECT_EQ(moe_plan_touched_experts(p), 3);
}

TEST(moe_bench, rates_and_floor) {
    moe_bench_row r{"x", 0, "t", "custom", 3};
    r.us = 56.832, r.bytes = 3524, r.flops = 28416;
    // Memory floor 3524 B / 100 GB/s = 0.03524 us; compute floor 28416 / 1 GFLOP/s = 28.416 us: 50 %.
    moe_bench_fill_rates(r, 100, 0.001);
    EXPECT_NEAR(r.pct_floor, 50.0, 1e-9);
    EXPECT_NEAR(r.tflops, 28416 / 56.832e6, 1e-15);
    EXPECT_NEAR(r.gbps, 3524 / 56.832e3, 1e-12);
    // Bandwidth-bound when the bandwidth is tiny: floor = 3524 / 1e-3 GB/s = 3524 us > time: 6200 %.
    moe_bench_fill_rates(r, 0.001, 0.001);
    EXPECT_NEAR(r.pct_floor, 100.0 * 3524.0 / 56.832, 1e-9);
}

TEST(moe_bench, json_rows_carry_every_field) {
    const auto j = nlohmann::json::parse(moe_bench_json(sample_report()));
    for (const char *k : {"device", "commit", "date", "command", "bandwidth_gbps", "peak_tflops", "shape", "desc"})
        EXPECT_TRUE(j["meta"].contains(k)) << k;
    ASSERT_EQ(j["rows"].size(), 4u);
    for (const auto &row : j["rows"])
        for (const char *k :
             {"runner", "tactic", "shape", "tokens", "us", "tflops", "gbps", "pct_floor", "bytes", "flops"})
            EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_NEAR(j["rows"][0]["pct_floor"].get<double>(), 50.0, 1e-9);
    EXPECT_EQ(j["rows"][0]["tokens"].get<int>(), 3);
    EXPECT_FALSE(j["rows"][0].contains("regret"));
    EXPECT_DOUBLE_EQ(j["rows"][2]["regret"].get<double>(), 1.0);
    EXPECT_TRUE(j["rows"][3]["us"].is_null());
    EXPECT_NE(j["rows"][3]["skipped"].get<std::string>().find("max-run-s"), std::string::npos);
}

TEST(moe_bench, csv_table_markdown_svg) {
    const auto rep = sample_report();
    const std::string csv = moe_bench_csv(rep);
    EXPECT_EQ(csv.rfind("runner,tactic,tactic_id,shape,tokens,us,", 0), 0u);
    std::size_t lines = 0;
    for (char c : csv) lines += c == '\n';
    EXPECT_EQ(lines, 5u);
    EXPECT_NE(moe_bench_table(rep).find("50.0%"), std::string::npos);
    EXPECT_NE(moe_bench_markdown(rep).find("| cpu.fast | isa=avx2 block_n=auto | 3 | 56.8 |"), std::string::npos);
    const std::string svg = moe_bench_svg(rep);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    std::size_t polylines = 0;
    for (auto p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++polylines;
    EXPECT_EQ(polylines, 6u); // 3 series (cpu.fast, cpu.ref, auto) x 2 panels
}

TEST(moe_bench, tactic_selection_all_default_and_filtered) {
    const std::vector<moe_tactic> all = {
        {0, "bn=128 stages=5"}, {1, "bn=256 stages=4"}, {2, "bn=128 stages=4 rows=256"}};
    moe_bench_options o;
    EXPECT_EQ(moe_bench_tactics(all, o).size(), 3u);
    o.all_tactics = false;
    ASSERT_EQ(moe_bench_tactics(all, o).size(), 1u);
    EXPECT_EQ(moe_bench_tactics(all, o)[0].id, 0);
    o.all_tactics = true;
    o.tactic_filter = {"rows=256", "bn=256"};
    const auto kept = moe_bench_tactics(all, o);
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[0].id, 1); // in the runner's order
    EXPECT_EQ(kept[1].id, 2);
    EXPECT_TRUE(moe_bench_check_tactics(o, {{"cuda.decode", {{0, "nt=1"}}}, {"cuda.grouped", all}}).ok());
    o.tactic_filter = {"stages=9"};
    EXPECT_TRUE(moe_bench_tactics(all, o).empty());
    const status st = moe_bench_check_tactics(o, {{"cuda.grouped", all}});
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_NE(st.message().find("cuda.grouped [bn=256 stages=4]"), std::string::npos) << st.message();
    o.tactic_filter.clear();
    EXPECT_TRUE(moe_bench_check_tactics(o, {}).ok()); // no filter: nothing to check
}

TEST(moe_shapes, presets_match_models_md) {
    auto air = moe_shape_by_name("glm-4.5-air").value();
    EXPECT_EQ(air.hidden, 4096);
    EXPECT_EQ(air.intermediate, 1408);
    EXPECT_EQ(air.experts, 128);
    EXPECT_EQ(air.shared, 1);
    EXPECT_EQ(air.routing.scoring, moe_scoring::sigmoid);
    EXPECT_FLOAT_EQ(air.routing.routed_scaling_factor, 1.0f);
    auto dsv3 = moe_shape_by_name("deepseek-v3").value();
    EXPECT_EQ(dsv3.hidden, 7168);
    EXPECT_EQ(dsv3.routing.n_group, 8);
    EXPECT_EQ(dsv3.routing.topk_group, 4);
    EXPECT_FLOAT_EQ(dsv3.routing.routed_scaling_factor, 2.5f);
    auto qwen = moe_shape_by_name("qwen3-30b-a3b").value();
    EXPECT_EQ(qwen.shared, 0);
    EXPECT_EQ(qwen.routing.scoring, moe_scoring::softmax);
    for (const auto &p : moe_shape_presets()) EXPECT_TRUE(p.desc.validate().ok()) << p.name;
    auto bad = moe_shape_by_name("llama");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.get_status().message().find("glm-4.5-air"), std::string::npos);
    EXPECT_FALSE(moe_shape_custom(100, 64, 8, 2, 0).ok()); // H not a multiple of 16
    EXPECT_TRUE(moe_shape_custom(128, 64, 8, 2, 1).ok());
}
