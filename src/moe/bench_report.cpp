#include "moe/bench_report.h"

#include "core/build_info.h"
#include "core/svg.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

namespace fp4moe {

std::uint64_t moe_matrix_bytes(moe_weight_format f, std::int64_t n, std::int64_t k) {
    const auto nk = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(k);
    return f == moe_weight_format::nvfp4 ? nk / 2 + nk / 16 + 4 : 2 * nk;
}

std::uint64_t moe_expert_bytes(const moe_desc &d) {
    return 2 * moe_matrix_bytes(d.weights, d.intermediate, d.hidden) +
           moe_matrix_bytes(d.weights, d.hidden, d.intermediate);
}

std::int64_t moe_plan_touched_experts(const moe_plan &p) {
    std::int64_t n = 0;
    for (std::int64_t e = 0; e < p.num_experts; ++e) n += p.counts[e] > 0;
    return n;
}

moe_block_work moe_block_cost(const moe_desc &d, std::int64_t tokens, std::int64_t touched_experts) {
    const double t = static_cast<double>(tokens), h = static_cast<double>(d.hidden);
    const double e = static_cast<double>(d.experts), i = static_cast<double>(d.intermediate);
    moe_block_work w;
    w.bytes =
        e * h * 4 + static_cast<double>(touched_experts) * static_cast<double>(moe_expert_bytes(d)) + 2 * t * h * 2;
    w.flops = 2 * t * h * e + 2 * t * static_cast<double>(d.slots()) * 3 * h * i;
    return w;
}

moe_bench_meta moe_bench_meta_from(const moe_bench_options &o) {
    moe_bench_meta m;
    m.commit = get_build_info().commit;
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    m.date = buf;
    m.command = o.command;
    m.shape = o.shape_name;
    m.desc = o.desc.to_string();
    m.skew = o.skew;
    m.seed = o.seed;
    return m;
}

std::vector<std::int64_t> moe_bench_token_list(const moe_bench_options &o) {
    std::vector<std::int64_t> tokens = o.tokens;
    std::sort(tokens.begin(), tokens.end());
    tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    return tokens;
}

std::vector<moe_tactic> moe_bench_tactics(std::vector<moe_tactic> tactics, const moe_bench_options &o) {
    if (!o.all_tactics && !tactics.empty()) tactics.resize(1);
    if (o.tactic_filter.empty()) return tactics;
    std::vector<moe_tactic> kept;
    for (auto &t : tactics)
        if (std::any_of(o.tactic_filter.begin(), o.tactic_filter.end(),
                        [&](const std::string &f) { return t.name.find(f) != std::string::npos; }))
            kept.push_back(std::move(t));
    return kept;
}

status moe_bench_check_tactics(const moe_bench_options &o,
                               const std::vector<std::pair<std::string, std::vector<moe_tactic>>> &runners) {
    if (o.tactic_filter.empty()) return {};
    std::string known;
    for (const auto &[name, tactics] : runners) {
        if (!moe_bench_tactics(tactics, o).empty()) return {};
        for (const auto &t : tactics) known += fmt::format("\n  {} [{}]", name, t.name);
    }
    std::string filter;
    for (const auto &f : o.tactic_filter) filter += (filter.empty() ? "" : "|") + f;
    return {status_code::invalid_argument,
            fmt::format("--tactics '{}' matches no tactic of the runners benched; their tactics:{}", filter, known)};
}

void moe_bench_fill_rates(moe_bench_row &r, double bandwidth_gbps, double peak_tflops) {
    if (!r.skipped.empty() || r.us <= 0) return;
    r.tflops = r.flops / (r.us * 1e6);
    r.gbps = r.bytes / (r.us * 1e3);
    const double floor_us = std::max(bandwidth_gbps > 0 ? r.bytes / (bandwidth_gbps * 1e3) : 0.0,
                                     peak_tflops > 0 ? r.flops / (peak_tflops * 1e6) : 0.0);
    r.pct_floor = 100.0 * floor_us / r.us;
}

namespace {

std::string human_bytes(double b) {
    const char *units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000.0 && u < 4) b /= 1000.0, ++u;
    return fmt::format("{:.3g} {}", b, units[u]);
}

std::string series_name(const moe_bench_row &r) {
    return r.runner == "auto" || r.tactic_id == 0 ? r.runner : fmt::format("{}#{}", r.runner, r.tactic_id);
}

std::vector<std::string> meta_lines(const moe_bench_meta &m) {
    return {fmt::format("device: {}", m.device),
            fmt::format("commit: {}   date: {}", m.commit, m.date),
            fmt::format("command: {}", m.command),
            fmt::format("shape: {} ({})", m.shape, m.desc),
            fmt::format("measured floor: read bandwidth {:.1f} GB/s, peak {:.3f} TFLOP/s ({})", m.bandwidth_gbps,
                        m.peak_tflops, m.peak_kind),
            fmt::format("routing skew (Zipf s): {}   seed: {}", m.skew, m.seed),
            fmt::format("weight pool: {}", m.pool)};
}

std::string regret_text(const moe_bench_row &r) {
    return r.regret ? fmt::format("{:.2f}x", *r.regret) : "";
}

} // namespace

std::string moe_bench_table(const moe_bench_report &rep) {
    std::string s;
    for (const auto &l : meta_lines(rep.meta)) s += l + "\n";
    s += fmt::format("\n{:<10} {:<34} {:>6} {:>12} {:>5} {:>9} {:>9} {:>8} {:>10} {:>7}\n", "runner", "tactic", "T",
                     "us", "n", "TFLOP/s", "GB/s", "%floor", "bytes", "regret");
    for (const auto &r : rep.rows) {
        if (!r.skipped.empty()) {
            s += fmt::format("{:<10} {:<34} {:>6} skipped: {}\n", r.runner, r.tactic, r.tokens, r.skipped);
            continue;
        }
        s += fmt::format("{:<10} {:<34} {:>6} {:>12.1f} {:>5} {:>9.4f} {:>9.2f} {:>7.1f}% {:>10} {:>7}\n", r.runner,
                         r.tactic, r.tokens, r.us, r.samples, r.tflops, r.gbps, r.pct_floor, human_bytes(r.bytes),
                         regret_text(r));
    }
    return s;
}

std::string moe_bench_markdown(const moe_bench_report &rep) {
    std::string s = fmt::format("# bench moe: {}\n\n", rep.meta.shape);
    for (const auto &l : meta_lines(rep.meta)) s += "- " + l + "\n";
    s += "\n| runner | tactic | T | µs | TFLOP/s | GB/s | % of floor | bytes | regret |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &r : rep.rows) {
        if (!r.skipped.empty()) {
            s += fmt::format("| {} | {} | {} | skipped: {} | | | | | |\n", r.runner, r.tactic, r.tokens, r.skipped);
            continue;
        }
        s += fmt::format("| {} | {} | {} | {:.1f} | {:.4f} | {:.2f} | {:.1f} | {} | {} |\n", r.runner, r.tactic,
                         r.tokens, r.us, r.tflops, r.gbps, r.pct_floor, human_bytes(r.bytes), regret_text(r));
    }
    return s;
}

std::string moe_bench_json(const moe_bench_report &rep) {
    const auto &m = rep.meta;
    nlohmann::ordered_json j;
    j["meta"] = {{"device", m.device},
                 {"commit", m.commit},
                 {"date", m.date},
                 {"command", m.command},
                 {"bandwidth_gbps", m.bandwidth_gbps},
                 {"peak_tflops", m.peak_tflops},
                 {"peak_kind", m.peak_kind},
                 {"shape", m.shape},
                 {"desc", m.desc},
                 {"threads", m.threads},
                 {"skew", m.skew},
                 {"pool", m.pool},
                 {"seed", m.seed}};
    auto &rows = j["rows"] = nlohmann::json::array();
    for (const auto &r : rep.rows) {
        nlohmann::ordered_json o;
        o["runner"] = r.runner;
        o["tactic"] = r.tactic;
        o["tactic_id"] = r.tactic_id;
        o["shape"] = r.shape;
        o["tokens"] = r.tokens;
        const bool ok = r.skipped.empty();
        const auto num = [ok](double v) { return ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
        o["us"] = num(r.us);
        o["samples"] = r.samples;
        o["tflops"] = num(r.tflops);
        o["gbps"] = num(r.gbps);
        o["pct_floor"] = num(r.pct_floor);
        o["bytes"] = num(r.bytes);
        o["flops"] = num(r.flops);
        if (r.regret) o["regret"] = *r.regret;
        if (!ok) o["skipped"] = r.skipped;
        rows.push_back(std::move(o));
    }
    return j.dump(2) + "\n";
}

std::string moe_bench_csv(const moe_bench_report &rep) {
    std::string s =
        "runner,tactic,tactic_id,shape,tokens,us,samples,tflops,gbps,pct_floor,bytes,flops,regret,skipped\n";
    const auto quote = [](std::string v) {
        std::string q = "\"";
        for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    };
    for (const auto &r : rep.rows) {
        const bool ok = r.skipped.empty();
        s += fmt::format("{},{},{},{},{},", r.runner, quote(r.tactic), r.tactic_id, r.shape, r.tokens);
        s += ok ? fmt::format("{:.3f},{},{:.6f},{:.3f},{:.3f},{:.0f},{:.0f},", r.us, r.samples, r.tflops, r.gbps,
                              r.pct_floor, r.bytes, r.flops)
                : std::string(",0,,,,,,");
        s += fmt::format("{},{}\n", r.regret ? fmt::format("{:.4f}", *r.regret) : "", quote(r.skipped));
    }
    return s;
}

std::string moe_bench_svg(const moe_bench_report &rep) {
    // Two panels, log2 x axis (tokens); left: log10 us; right: linear % of floor.
    std::map<std::string, std::vector<const moe_bench_row *>> series;
    double tmin = 1e300, tmax = 0, umin = 1e300, umax = 0, pmax = 0;
    for (const auto &r : rep.rows) {
        if (!r.skipped.empty() || r.us <= 0) continue;
        series[series_name(r)].push_back(&r);
        tmin = std::min(tmin, double(r.tokens)), tmax = std::max(tmax, double(r.tokens));
        umin = std::min(umin, r.us), umax = std::max(umax, r.us), pmax = std::max(pmax, r.pct_floor);
    }
    const int W = 1100, H = 460, pw = 440, ph = 340, top = 60, lefts[2] = {80, 620};
    std::string s =
        svg::open(W, H, fmt::format("bench moe: {} ({}) on {}", rep.meta.shape, rep.meta.desc, rep.meta.device));
    if (series.empty()) return s + "</svg>\n";
    if (tmax <= tmin) tmax = tmin * 2;
    const double lx0 = std::log2(tmin), lx1 = std::log2(tmax);
    const double ly0 = std::floor(std::log10(umin)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(umax)));
    const double p1 = std::max(10.0, std::ceil(pmax / 10.0) * 10.0);
    const auto X = [&](int panel, double t) { return lefts[panel] + (std::log2(t) - lx0) / (lx1 - lx0) * pw; };
    const auto Y = [&](int panel, double v) {
        const double f = panel == 0 ? (std::log10(v) - ly0) / (ly1 - ly0) : v / p1;
        return top + ph - f * ph;
    };
    const char *titles[2] = {"time per block (us, log scale)", "% of measured floor"};
    for (int p = 0; p < 2; ++p) {
        s += svg::panel(lefts[p], top, pw, ph, titles[p], "tokens T");
        for (double t = tmin; t <= tmax * 1.0001; t *= 2)
            s += svg::x_tick(X(p, t), top, top + ph, fmt::format("{}", t));
        const int nticks = p == 0 ? int(ly1 - ly0) : 5;
        for (int i = 0; i <= nticks; ++i) {
            const double v = p == 0 ? std::pow(10.0, ly0 + i) : p1 * i / 5;
            s += svg::y_tick(Y(p, v), lefts[p], lefts[p] + pw,
                             p == 0 ? fmt::format("{:g}", v) : fmt::format("{:g}%", v));
        }
    }
    const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                            "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    int k = 0;
    for (const auto &[name, rows] : series) {
        const char *c = colors[k % 10];
        const bool dashed = name == "auto";
        for (int p = 0; p < 2; ++p) {
            std::string pts;
            for (const auto *r : rows)
                pts += fmt::format("{:.1f},{:.1f} ", X(p, r->tokens), Y(p, p == 0 ? r->us : r->pct_floor));
            s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts, c,
                             dashed ? " stroke-dasharray=\"6,4\"" : "");
            for (const auto *r : rows)
                s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", X(p, r->tokens),
                                 Y(p, p == 0 ? r->us : r->pct_floor), c);
        }
        const int ly = top + ph + 56 + (k / 5) * 16, lx = 80 + (k % 5) * 200;
        s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
                         "<text x=\"{}\" y=\"{}\">{}</text>\n",
                         lx, ly - 4, lx + 24, ly - 4, c, dashed ? " stroke-dasharray=\"6,4\"" : "", lx + 30, ly, name);
        ++k;
    }
    // Grow the canvas for the legend rows.
    const int need = top + ph + 64 + ((k + 4) / 5) * 16;
    if (need > H)
        s.replace(s.find(fmt::format("height=\"{}\"", H)), fmt::format("height=\"{}\"", H).size(),
                  fmt::format("height=\"{}\"", need));
    return s + "</svg>\n";
}

} // namespace fp4moe
