#include "loadgen/report.h"

#include "core/svg.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace fp4moe::loadgen {

std::string python_float(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "nan";
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
}

namespace {

std::string line(const std::string &label, const std::string &value) {
    return fmt::format("{:<40} {}\n", label, value);
}
std::string num(double v) {
    return fmt::format("{:.2f}", v);
}
std::string rule(const std::string &title, char c) {
    const std::size_t n = 50, pad = n > title.size() ? n - title.size() : 0;
    return std::string(pad / 2, c) + title + std::string(pad - pad / 2, c) + "\n";
}

// NaN (E2E when nothing succeeded) has no JSON form: null.
nlohmann::ordered_json jnum(double v) {
    if (std::isnan(v)) return nullptr;
    return v;
}

// Our report writes an infinite rate as the string "inf" (strict JSON has no Infinity).
nlohmann::ordered_json rate_json(double r) {
    return std::isinf(r) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(r);
}

nlohmann::ordered_json parse_or_null(const std::string &s) {
    if (s.empty()) return nullptr;
    try {
        return nlohmann::ordered_json::parse(s);
    } catch (const std::exception &) {
        return s;
    }
}

nlohmann::ordered_json result_object(const pass_report &p) {
    const auto &m = p.metrics;
    const auto &i = p.info;
    nlohmann::ordered_json j;
    j["tag"] = nullptr;
    j["backend"] = i.backend;
    j["dataset_name"] = i.dataset_name;
    j["request_rate"] =
        std::isinf(i.request_rate) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(i.request_rate);
    j["max_concurrency"] = i.max_concurrency ? nlohmann::ordered_json(i.max_concurrency) : nullptr;
    j["sharegpt_output_len"] = nullptr;
    j["random_input_len"] = i.random_input_len;
    j["random_output_len"] = i.random_output_len;
    j["random_range_ratio"] = i.random_range_ratio;
    j["server_info"] = parse_or_null(i.server_info_json);
    j["duration"] = m.duration_s;
    j["completed"] = m.completed;
    j["failed"] = m.failed;
    j["total_input_tokens"] = m.total_input;
    j["total_input_text_tokens"] = m.total_input;
    j["total_input_vision_tokens"] = 0;
    j["total_output_tokens"] = m.total_output;
    j["total_output_tokens_retokenized"] = m.total_output_retokenized;
    j["request_throughput"] = m.request_throughput;
    j["input_throughput"] = m.input_throughput;
    j["output_throughput"] = m.output_throughput;
    j["total_throughput"] = m.total_throughput;
    auto stats = [&](const char *name, const stat_summary &s, bool p95) {
        j[fmt::format("mean_{}_ms", name)] = jnum(s.mean);
        j[fmt::format("median_{}_ms", name)] = jnum(s.median);
        j[fmt::format("std_{}_ms", name)] = jnum(s.std);
        j[fmt::format("p90_{}_ms", name)] = jnum(s.p90);
        if (p95) j[fmt::format("p95_{}_ms", name)] = jnum(s.p95);
        j[fmt::format("p99_{}_ms", name)] = jnum(s.p99);
    };
    stats("e2e_latency", m.e2e_ms, false);
    stats("ttft", m.ttft_ms, false);
    stats("tpot", m.tpot_ms, false);
    stats("itl", m.itl_ms, true);
    j["concurrency"] = m.concurrency;
    j["accept_length"] = nullptr;
    j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
    j["max_concurrent_requests"] = m.max_concurrent_requests;
    return j;
}

} // namespace

std::string format_result_block(const pass_report &p) {
    const auto &m = p.metrics;
    const auto &i = p.info;
    std::string s = "\n" + rule(" Serving Benchmark Result ", '=');
    s += line("Backend:", fmt::format("{:<10}", i.backend));
    s += line("Traffic request rate:", python_float(i.request_rate));
    s += line("Max request concurrency:", i.max_concurrency ? std::to_string(i.max_concurrency) : "not set");
    s += line("Successful requests:", std::to_string(m.completed));
    s += line("Failed requests:", std::to_string(m.failed));
    s += line("Benchmark duration (s):", num(m.duration_s));
    s += line("Total input tokens:", std::to_string(m.total_input));
    s += line("Total input text tokens:", std::to_string(m.total_input));
    s += line("Total input vision tokens:", "0");
    s += line("Total generated tokens:", std::to_string(m.total_output));
    s += line("Total generated tokens (retokenized):", std::to_string(m.total_output_retokenized));
    s += line("Request throughput (req/s):", num(m.request_throughput));
    s += line("Input token throughput (tok/s):", num(m.input_throughput));
    s += line("Output token throughput (tok/s):", num(m.output_throughput));
    s += line("Peak output token throughput (tok/s):", num(m.max_output_tokens_per_s));
    s += line("Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
    s += line("Total token throughput (tok/s):", num(m.total_throughput));
    s += line("Concurrency:", num(m.concurrency));
    s += rule("End-to-End Latency", '-');
    s += line("Mean E2E Latency (ms):", num(m.e2e_ms.mean));
    s += line("Median E2E Latency (ms):", num(m.e2e_ms.median));
    s += line("P90 E2E Latency (ms):", num(m.e2e_ms.p90));
    s += line("P99 E2E Latency (ms):", num(m.e2e_ms.p99));
    s += rule("Time to First Token", '-');
    s += line("Mean TTFT (ms):", num(m.ttft_ms.mean));
    s += line("Median TTFT (ms):", num(m.ttft_ms.median));
    s += line("P90 TTFT (ms):", num(m.ttft_ms.p90));
    s += line("P99 TTFT (ms):", num(m.ttft_ms.p99));
    s += rule("Time per Output Token (excl. 1st token)", '-');
    s += line("Mean TPOT (ms):", num(m.tpot_ms.mean));
    s += line("Median TPOT (ms):", num(m.tpot_ms.median));
    s += line("P90 TPOT (ms):", num(m.tpot_ms.p90));
    s += line("P99 TPOT (ms):", num(m.tpot_ms.p99));
    s += rule("Inter-Token Latency", '-');
    s += line("Mean ITL (ms):", num(m.itl_ms.mean));
    s += line("Median ITL (ms):", num(m.itl_ms.median));
    s += line("P90 ITL (ms):", num(m.itl_ms.p90));
    s += line("P95 ITL (ms):", num(m.itl_ms.p95));
    s += line("P99 ITL (ms):", num(m.itl_ms.p99));
    s += line("Max ITL (ms):", num(m.itl_ms.max));
    s += std::string(50, '=') + "\n";
    if (!m.errors.empty()) {
        s += fmt::format("Errors of the {} failed request(s):\n", m.failed);
        for (const auto &e : m.errors) s += "  " + e + "\n";
    }
    return s;
}

std::string output_file_line(const pass_report &p, bool details) {
    auto j = result_object(p);
    if (details) {
        auto &l = j["input_lens"] = nlohmann::ordered_json::array();
        auto &o = j["output_lens"] = nlohmann::ordered_json::array();
        auto &t = j["ttfts"] = nlohmann::ordered_json::array();
        auto &it = j["itls"] = nlohmann::ordered_json::array();
        auto &g = j["generated_texts"] = nlohmann::ordered_json::array();
        auto &e = j["errors"] = nlohmann::ordered_json::array();
        // Beyond sglang's lists: what recomputing every metric needs (latency, start) and the chunk arrivals.
        auto &lat = j["latencies"] = nlohmann::ordered_json::array();
        auto &st = j["start_times"] = nlohmann::ordered_json::array();
        auto &ct = j["chunk_times"] = nlohmann::ordered_json::array();
        for (const auto &r : p.outputs) {
            l.push_back(r.prompt_len);
            o.push_back(r.success ? r.output_len : 0);
            t.push_back(r.ttft);
            it.push_back(r.itl);
            g.push_back(r.generated_text);
            e.push_back(r.error);
            lat.push_back(r.latency);
            st.push_back(r.start_time);
            ct.push_back(r.chunk_times);
        }
    }
    // Invalid UTF-8 in generated text must not abort the dump: replace it.
    std::string s = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    if (std::isinf(p.info.request_rate)) {
        const std::string key = "\"request_rate\":null";
        if (auto at = s.find(key); at != std::string::npos) s.replace(at, key.size(), "\"request_rate\":Infinity");
    }
    return s + "\n";
}

std::string sweep_json(const sweep_meta &m, const std::vector<pass_report> &passes) {
    nlohmann::ordered_json j;
    auto &meta = j["meta"];
    meta["command"] = m.command;
    meta["date"] = m.date;
    meta["commit"] = m.commit;
    meta["machine"] = m.machine;
    meta["url"] = m.url;
    meta["backend"] = m.backend;
    meta["dataset"] = m.dataset;
    meta["tokenizer"] = m.tokenizer;
    meta["num_prompts"] = m.num_prompts;
    meta["random_input_len"] = m.random_input_len;
    meta["random_output_len"] = m.random_output_len;
    meta["random_range_ratio"] = m.random_range_ratio;
    meta["request_rate"] = rate_json(m.request_rate);
    meta["seed"] = m.seed;
    meta["warmup_requests"] = m.warmup_requests;
    meta["models"] = parse_or_null(m.models_json);
    meta["server_info"] = parse_or_null(m.server_info_json);
    auto &rows = j["rows"] = nlohmann::ordered_json::array();
    for (const auto &p : passes) {
        auto r = result_object(p);
        r.erase("server_info");
        r["request_rate"] = rate_json(p.info.request_rate);
        r["max_itl_ms"] = p.metrics.itl_ms.max;
        r["errors"] = p.metrics.errors;
        rows.push_back(std::move(r));
    }
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string sweep_markdown(const sweep_meta &m, const std::vector<pass_report> &passes) {
    std::string s = "# fp4moe bench serve\n\n";
    s += fmt::format("- command: `{}`\n- date: {}\n- commit: {}\n- machine: {}\n- server: {} ({} backend)\n", m.command,
                     m.date, m.commit, m.machine, m.url, m.backend);
    s += fmt::format(
        "- dataset: {}, {} prompts, input len {}, output len {}, range ratio {}, request rate {}, seed {}\n", m.dataset,
        m.num_prompts, m.random_input_len, m.random_output_len, m.random_range_ratio, python_float(m.request_rate),
        m.seed);
    s += "\n| max concurrency | ok | failed | duration s | req/s | output tok/s | peak output tok/s | total tok/s | "
         "concurrency | median TTFT ms | p99 TTFT ms | median TPOT ms | p99 TPOT ms | median ITL ms | p99 ITL ms | "
         "median E2E ms |\n";
    s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &p : passes) {
        const auto &x = p.metrics;
        s += fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | "
                         "{:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
                         p.info.max_concurrency ? std::to_string(p.info.max_concurrency) : "not set", x.completed,
                         x.failed, x.duration_s, x.request_throughput, x.output_throughput, x.max_output_tokens_per_s,
                         x.total_throughput, x.concurrency, x.ttft_ms.median, x.ttft_ms.p99, x.tpot_ms.median,
                         x.tpot_ms.p99, x.itl_ms.median, x.itl_ms.p99, x.e2e_ms.median);
    }
    return s;
}

std::string sweep_svg(const sweep_meta &m, const std::vector<pass_report> &passes) {
    struct pt {
        double c, tput, tpot;
    };
    std::vector<pt> pts;
    for (const auto &p : passes) {
        const double c = p.info.max_concurrency ? p.info.max_concurrency : static_cast<double>(p.info.num_prompts);
        if (p.metrics.completed > 0)
            pts.push_back({std::max(c, 1.0), p.metrics.output_throughput, p.metrics.tpot_ms.median});
    }
    std::sort(pts.begin(), pts.end(), [](const pt &a, const pt &b) { return a.c < b.c; });
    const int W = 1000, H = 440, pw = 400, ph = 320, top = 60, lefts[2] = {80, 560};
    std::string s =
        svg::open(W, H,
                  fmt::format("bench serve ({}, {} prompts, in {} / out {}, rate {}) on {}", m.backend, m.num_prompts,
                              m.random_input_len, m.random_output_len, python_float(m.request_rate), m.machine));
    if (pts.empty()) return s + "</svg>\n";
    const double c0 = std::log2(pts.front().c), c1 = std::max(c0 + 1, std::log2(pts.back().c));
    double ymax[2] = {0, 0};
    for (const auto &q : pts) ymax[0] = std::max(ymax[0], q.tput), ymax[1] = std::max(ymax[1], q.tpot);
    for (double &y : ymax) {
        // A round axis end just above the largest value (its fifths stay readable numbers).
        const double e = std::pow(10.0, std::floor(std::log10(std::max(y, 1e-9))));
        for (double step : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
            if (y <= step * e) {
                y = step * e;
                break;
            }
    }
    const auto X = [&](int p, double c) { return lefts[p] + (std::log2(c) - c0) / (c1 - c0) * pw; };
    const auto Y = [&](int p, double v) { return top + ph - v / ymax[p] * ph; };
    const char *titles[2] = {"output token throughput (tok/s)", "median TPOT (ms)"};
    for (int p = 0; p < 2; ++p) {
        s += svg::panel(lefts[p], top, pw, ph, titles[p], "max concurrency");
        for (const auto &q : pts) s += svg::x_tick(X(p, q.c), top, top + ph, fmt::format("{}", q.c));
        for (int i = 0; i <= 5; ++i) {
            const double v = ymax[p] * i / 5;
            s += svg::y_tick(Y(p, v), lefts[p], lefts[p] + pw, fmt::format("{:g}", v));
        }
        std::string line_pts;
        for (const auto &q : pts) line_pts += fmt::format("{:.1f},{:.1f} ", X(p, q.c), Y(p, p ? q.tpot : q.tput));
        s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", line_pts);
        for (const auto &q : pts) {
            const double v = p ? q.tpot : q.tput;
            s += fmt::format(
                "<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"3\" fill=\"#1f77b4\"/>"
                "<text x=\"{0:.1f}\" y=\"{2:.1f}\" text-anchor=\"middle\" font-size=\"10\">{3:.1f}</text>\n",
                X(p, q.c), Y(p, v), Y(p, v) - 7, v);
        }
    }
    return s + "</svg>\n";
}

} // namespace fp4moe::loadgen
