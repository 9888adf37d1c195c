// Metrics on a hand-computed timeline (every number worked out by hand in the comments), numpy's percentile and
// std, and the printed block and output-file line in sglang's layout.
#include "loadgen/metrics.h"
#include "loadgen/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace fp4moe::loadgen {
namespace {

request_result ok(double start, double ttft, std::vector<double> itl, double latency, std::int64_t out,
                  std::int64_t prompt, std::string text) {
    request_result r;
    r.success = true;
    r.start_time = start;
    r.ttft = ttft;
    r.itl = std::move(itl);
    r.latency = latency;
    r.output_len = out;
    r.prompt_len = prompt;
    r.generated_text = std::move(text);
    return r;
}

// A: start 0.0, tokens at 0.5, 0.75, 1.0, end 1.0          (3 tokens, prompt 10)
// B: start 0.2, tokens at 1.2, 1.7, 2.2, 2.7, end 2.7      (4 tokens, prompt 20)
// C: start 1.0, one token at 1.3, end 1.3                  (1 token, prompt 5)
// D: failed (HTTP 503); E: failed the same way. Duration 3 s.
std::vector<request_result> timeline() {
    std::vector<request_result> v{ok(0.0, 0.5, {0.25, 0.25}, 1.0, 3, 10, "abc"),
                                  ok(0.2, 1.0, {0.5, 0.5, 0.5}, 2.5, 4, 20, "abcd"), ok(1.0, 0.3, {}, 0.3, 1, 5, "a")};
    request_result d;
    d.error = "POST http://x/generate: HTTP 503 queue full";
    d.prompt_len = 7;
    v.push_back(d);
    v.push_back(d);
    return v;
}

TEST(loadgen_metrics, HandComputedTimeline) {
    const auto m = calculate_metrics(timeline(), 3.0, [](const std::string &t) { return std::int64_t(t.size()); });
    EXPECT_EQ(m.completed, 3);
    EXPECT_EQ(m.failed, 2);
    EXPECT_EQ(m.total_input, 35); // failed requests' prompts not counted
    EXPECT_EQ(m.total_output, 8);
    EXPECT_EQ(m.total_output_retokenized, 8);
    EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
    EXPECT_DOUBLE_EQ(m.input_throughput, 35.0 / 3);
    EXPECT_DOUBLE_EQ(m.output_throughput, 8.0 / 3);
    EXPECT_DOUBLE_EQ(m.total_throughput, 43.0 / 3);
    // Concurrency = (1.0 + 2.5 + 0.3) / 3.
    EXPECT_NEAR(m.concurrency, 3.8 / 3, 1e-12);
    // TTFT [0.3, 0.5, 1.0]: mean 0.6, median 0.5, std sqrt(0.26/3), p90 0.5 + 0.5*0.8, p99 0.5 + 0.5*0.98.
    EXPECT_NEAR(m.ttft_ms.mean, 600, 1e-9);
    EXPECT_NEAR(m.ttft_ms.median, 500, 1e-9);
    EXPECT_NEAR(m.ttft_ms.std, 1000 * std::sqrt(0.26 / 3), 1e-9);
    EXPECT_NEAR(m.ttft_ms.p90, 900, 1e-9);
    EXPECT_NEAR(m.ttft_ms.p99, 990, 1e-9);
    // TPOT: A (1.0-0.5)/2 = 0.25, B (2.5-1.0)/3 = 0.5, C excluded (1 token): mean 0.375, std 0.125, p99 0.4975.
    EXPECT_NEAR(m.tpot_ms.mean, 375, 1e-9);
    EXPECT_NEAR(m.tpot_ms.median, 375, 1e-9);
    EXPECT_NEAR(m.tpot_ms.std, 125, 1e-9);
    EXPECT_NEAR(m.tpot_ms.p99, 497.5, 1e-9);
    // ITL pooled [0.25, 0.25, 0.5, 0.5, 0.5]: mean 0.4, median 0.5, p95 0.5, max 0.5.
    EXPECT_NEAR(m.itl_ms.mean, 400, 1e-9);
    EXPECT_NEAR(m.itl_ms.median, 500, 1e-9);
    EXPECT_NEAR(m.itl_ms.p95, 500, 1e-9);
    EXPECT_NEAR(m.itl_ms.max, 500, 1e-9);
    // E2E [1.0, 2.5, 0.3]: mean 3.8/3, median 1.0, p99 1.0 + 1.5*0.98.
    EXPECT_NEAR(m.e2e_ms.mean, 3800.0 / 3, 1e-9);
    EXPECT_NEAR(m.e2e_ms.median, 1000, 1e-9);
    EXPECT_NEAR(m.e2e_ms.p99, 2470, 1e-9);
    // 1-s bins from the earliest start (0.0): tokens 0.5 0.75 | 1.0 1.2 1.7 1.3 | 2.2 2.7 -> [2, 4, 2, 0]: peak 4.
    EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4);
    // Requests per bin: A [0,1], B [0,2], C [1,1] -> [2, 3, 1, 0]: peak 3.
    EXPECT_EQ(m.max_concurrent_requests, 3);
    ASSERT_EQ(m.errors.size(), 1u);
    EXPECT_EQ(m.errors[0], "2 x POST http://x/generate: HTTP 503 queue full");
}

TEST(loadgen_metrics, SummaryMatchesNumpy) {
    // np.percentile(v, [50, 90, 95, 99]), np.std(v), np.mean(v) with numpy 2.4.
    const std::vector<double> v{0.013, 0.5, 0.77, 1.9, 2.25, 3.1};
    const auto s = summarize(v);
    EXPECT_DOUBLE_EQ(s.median, 1.335);
    EXPECT_DOUBLE_EQ(s.p90, 2.675);
    EXPECT_DOUBLE_EQ(s.p95, 2.8875);
    EXPECT_DOUBLE_EQ(s.p99, 3.0575);
    EXPECT_DOUBLE_EQ(s.std, 1.0793687069558555);
    EXPECT_DOUBLE_EQ(s.mean, 1.4221666666666666);
    EXPECT_DOUBLE_EQ(s.max, 3.1);
}

TEST(loadgen_metrics, NumpyPercentileAndEmptyLists) {
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);
    EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
    // Everything failed: zeros as sglang's `np.mean(x or 0)`, E2E NaN as np.mean([]).
    std::vector<request_result> v(2);
    v[0].error = v[1].error = "x";
    const auto m = calculate_metrics(v, 1.0, nullptr);
    EXPECT_EQ(m.completed, 0);
    EXPECT_EQ(m.failed, 2);
    EXPECT_EQ(m.ttft_ms.mean, 0);
    EXPECT_EQ(m.itl_ms.p99, 0);
    EXPECT_TRUE(std::isnan(m.e2e_ms.mean));
    EXPECT_EQ(m.max_output_tokens_per_s, 0);
}

pass_report report() {
    pass_report p;
    p.info.backend = "sglang";
    p.info.dataset_name = "random";
    p.info.request_rate = INFINITY;
    p.info.max_concurrency = 4;
    p.info.num_prompts = 5;
    p.info.random_input_len = 128;
    p.info.random_output_len = 64;
    p.outputs = timeline();
    p.metrics = calculate_metrics(p.outputs, 3.0, nullptr);
    return p;
}

TEST(loadgen_report, BlockInSglangLayout) {
    const auto s = format_result_block(report());
    std::vector<std::string> labels;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) labels.push_back(l);
    // The header and the 40-column labels, in order.
    EXPECT_EQ(labels[1], "============ Serving Benchmark Result ============");
    EXPECT_EQ(labels[2], "Backend:                                 sglang    ");
    EXPECT_EQ(labels[3], "Traffic request rate:                    inf");
    EXPECT_EQ(labels[4], "Max request concurrency:                 4");
    EXPECT_EQ(labels[5], "Successful requests:                     3");
    EXPECT_EQ(labels[6], "Failed requests:                         2");
    EXPECT_EQ(labels[7], "Benchmark duration (s):                  3.00");
    EXPECT_NE(s.find("Output token throughput (tok/s):         2.67\n"
                     "Peak output token throughput (tok/s):    4.00\n"
                     "Peak concurrent requests:                3\n"
                     "Total token throughput (tok/s):          14.33\n"
                     "Concurrency:                             1.27\n"
                     "----------------End-to-End Latency----------------\n"),
              std::string::npos)
        << s;
    EXPECT_NE(s.find("-----Time per Output Token (excl. 1st token)------\n"
                     "Mean TPOT (ms):                          375.00\n"),
              std::string::npos);
    EXPECT_NE(s.find("Max ITL (ms):                            500.00\n"
                     "==================================================\n"
                     "Errors of the 2 failed request(s):\n"
                     "  2 x POST http://x/generate: HTTP 503 queue full\n"),
              std::string::npos)
        << s;
    EXPECT_EQ(python_float(4), "4.0");
    EXPECT_EQ(python_float(0.5), "0.5");
}

TEST(loadgen_report, OutputFileLineKeysAndInfinity) {
    const auto line = output_file_line(report(), true);
    EXPECT_NE(line.find("\"request_rate\":Infinity"), std::string::npos);
    // Python reads Infinity; nlohmann does not: swap it for null to read the rest.
    auto text = line;
    text.replace(text.find("Infinity"), 8, "null");
    const auto j = nlohmann::ordered_json::parse(text);
    std::vector<std::string> keys;
    for (const auto &[k, v] : j.items()) keys.push_back(k);
    const std::vector<std::string> head{"tag",
                                        "backend",
                                        "dataset_name",
                                        "request_rate",
                                        "max_concurrency",
                                        "sharegpt_output_len",
                                        "random_input_len",
                                        "random_output_len",
                                        "random_range_ratio",
                                        "server_info",
                                        "duration",
                                        "completed"};
    EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 12), head);
    EXPECT_EQ(j["max_concurrency"], 4);
    EXPECT_EQ(j["total_output_tokens"], 8);
    EXPECT_DOUBLE_EQ(j["p99_itl_ms"].get<double>(), 500);
    EXPECT_DOUBLE_EQ(j["max_output_tokens_per_s"].get<double>(), 4);
    EXPECT_EQ(j["output_lens"], (std::vector<int>{3, 4, 1, 0, 0}));
    EXPECT_EQ(j["errors"][3], "POST http://x/generate: HTTP 503 queue full");
    EXPECT_EQ(line.back(), '\n');
}

TEST(loadgen_report, SweepJsonMarkdownSvg) {
    sweep_meta m;
    m.command = "fp4moe bench serve";
    m.models_json = "{\"data\": [{\"id\": \"tiny\"}]}";
    m.request_rate = INFINITY;
    auto p1 = report();
    auto p2 = report();
    p2.info.max_concurrency = 16;
    const auto j = nlohmann::json::parse(sweep_json(m, {p1, p2}));
    EXPECT_EQ(j["meta"]["models"]["data"][0]["id"], "tiny");
    EXPECT_EQ(j["meta"]["request_rate"], "inf");
    ASSERT_EQ(j["rows"].size(), 2u);
    EXPECT_EQ(j["rows"][1]["max_concurrency"], 16);
    EXPECT_EQ(j["rows"][0]["failed"], 2);
    EXPECT_EQ(j["rows"][0]["errors"][0], "2 x POST http://x/generate: HTTP 503 queue full");
    const auto md = sweep_markdown(m, {p1, p2});
    EXPECT_NE(md.find("| 16 | 3 | 2 | 3.00 |"), std::string::npos) << md;
    const auto svg = sweep_svg(m, {p1, p2});
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("median TPOT (ms)"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

} // namespace
} // namespace fp4moe::loadgen
