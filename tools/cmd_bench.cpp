// `fp4moe bench moe`: times the whole MoE block per (runner, tactic, T) against the floor measured in the
// same run (src/backend/cpu/bench_moe_cpu.h); prints a table, optionally writes JSON, CSV, markdown, SVG.
#include "backend/cpu/bench_moe_cpu.h"
#if defined(FP4MOE_WITH_CUDA)
#include "bench_moe_cuda.h"
#endif
#include "commands.h"
#include "moe/bench_report.h"
#include "moe/shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <utility>

namespace fp4moe::tools {
namespace {

struct bench_moe_opts {
    std::string shape;
    std::int64_t hidden = 0, intermediate = 0, experts = 0, top_k = 0, shared = 0;
    std::string tokens = "1,4,16,64,256,1024";
    std::string runners = "all";
    std::string tactics = "all";
    bool no_auto = false;
    std::string weights = "nvfp4", layout = "permuted";
    std::string device = "cpu";
    std::string json, csv, md, plot;
    moe_bench_options b;
};

// The parts of s between separators; empty parts are dropped unless keep_empty ("a||b" -> "a", "", "b").
std::vector<std::string> split(const std::string &s, char sep = ',', bool keep_empty = false) {
    std::vector<std::string> out;
    std::size_t at = 0;
    for (std::size_t end;; at = end + 1) {
        end = s.find(sep, at);
        std::string part = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (keep_empty || !part.empty()) out.push_back(std::move(part));
        if (end == std::string::npos) return out;
    }
}

bool write_file(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    if (!f) fmt::print(stderr, "fp4moe bench moe: cannot write {}\n", path);
    return static_cast<bool>(f);
}

int run_bench_moe(bench_moe_opts &o, const std::string &command) {
    auto fail = [](const std::string &msg) {
        fmt::print(stderr, "fp4moe bench moe: {}\n", msg);
        return 1;
    };
    moe_bench_options &b = o.b;
    if (!o.shape.empty()) {
        auto d = moe_shape_by_name(o.shape);
        if (!d.ok()) return fail(d.get_status().message());
        b.desc = d.value();
        b.shape_name = o.shape;
    } else {
        if (!o.hidden || !o.intermediate || !o.experts || !o.top_k)
            return fail("give --shape NAME, or --hidden, --intermediate, --experts and --top-k");
        auto d = moe_shape_custom(o.hidden, o.intermediate, o.experts, o.top_k, o.shared);
        if (!d.ok()) return fail(d.get_status().message());
        b.desc = d.value();
        b.shape_name = "custom";
    }
    b.desc.weights = o.weights == "bf16" ? moe_weight_format::bf16 : moe_weight_format::nvfp4;
    b.desc.layout = o.layout == "masked" ? moe_layout::masked : moe_layout::permuted;
    b.tokens.clear();
    for (const auto &t : split(o.tokens)) {
        try {
            b.tokens.push_back(std::stoll(t));
        } catch (const std::exception &) {
            return fail(fmt::format("--tokens: '{}' is not a number", t));
        }
    }
    b.runners = o.runners == "all" ? std::vector<std::string>{} : split(o.runners);
    if (o.tactics == "default") {
        b.all_tactics = false;
    } else if (o.tactics != "all") { // parts of tactic names, '|'-separated
        b.tactic_filter = split(o.tactics, '|', true);
        if (std::find(b.tactic_filter.begin(), b.tactic_filter.end(), "") != b.tactic_filter.end())
            return fail(fmt::format("--tactics '{}': an empty alternative (give 'all', 'default', or '|'-separated "
                                    "parts of tactic names)",
                                    o.tactics));
    }
    b.auto_row = !o.no_auto;
    b.command = command;

    result<moe_bench_report> rep = status{status_code::unsupported, "this fp4moe was built without CUDA"};
    if (o.device == "cpu") rep = cpu::run_moe_bench(b);
#if defined(FP4MOE_WITH_CUDA)
    else
        rep = cuda::run_moe_bench_cuda(b);
#endif
    if (!rep.ok()) return fail(rep.get_status().message());
    fmt::print("{}", moe_bench_table(rep.value()));
    bool ok = true;
    if (!o.json.empty()) ok &= write_file(o.json, moe_bench_json(rep.value()));
    if (!o.csv.empty()) ok &= write_file(o.csv, moe_bench_csv(rep.value()));
    if (!o.md.empty()) ok &= write_file(o.md, moe_bench_markdown(rep.value()));
    if (!o.plot.empty()) ok &= write_file(o.plot, moe_bench_svg(rep.value()));
    return ok ? 0 : 1;
}

} // namespace

void register_bench_moe(CLI::App &bench, command_registry &reg, int argc, char **argv) {
    auto o = std::make_shared<bench_moe_opts>();
    auto *cmd = bench.add_subcommand(
        "moe", "Time the whole MoE block (router, routing, runner) per runner/tactic and token count against the "
               "measured bandwidth/compute floor");
    std::string shapes;
    for (const auto &p : moe_shape_presets()) shapes += fmt::format("{}{}", shapes.empty() ? "" : ", ", p.name);
    cmd->add_option("--shape", o->shape, "Preset layer shape: " + shapes);
    cmd->add_option("--hidden", o->hidden, "Custom shape: hidden size H");
    cmd->add_option("--intermediate", o->intermediate, "Custom shape: expert width I");
    cmd->add_option("--experts", o->experts, "Custom shape: routed experts E");
    cmd->add_option("--top-k", o->top_k, "Custom shape: experts per token k");
    cmd->add_option("--shared", o->shared, "Custom shape: shared-expert slots S (S > 0: sigmoid + bias routing)");
    cmd->add_option("--tokens", o->tokens, "Comma-separated token counts T")->capture_default_str();
    cmd->add_option("--runners", o->runners,
                    "'all' or comma-separated runner names (cpu.ref, cpu.fast; cuda.decode, cuda.grouped)")
        ->capture_default_str();
    cmd->add_option("--tactics", o->tactics,
                    "'all' (a row per tactic), 'default' (tactic 0 only), or '|'-separated parts of tactic names "
                    "('rows=256|bn=64': the tactics whose name contains one)")
        ->capture_default_str();
    cmd->add_flag("--no-auto", o->no_auto, "Leave out the autotuner's row (auto) per T");
    cmd->add_option("--moe-runner", o->b.moe_runner,
                    "The auto row: 'auto' tunes, a runner name forces it (default: FP4MOE_MOE_RUNNER, else auto)");
    cmd->add_option("--skew", o->b.skew,
                    "Zipf exponent s of expert popularity: logits get -s*ln(rank) (0 = uniform routing)")
        ->capture_default_str();
    cmd->add_option("--weights", o->weights, "Expert weight format")
        ->check(CLI::IsMember({"nvfp4", "bf16"}))
        ->capture_default_str();
    cmd->add_option("--layout", o->layout, "Plan layout")
        ->check(CLI::IsMember({"permuted", "masked"}))
        ->capture_default_str();
    cmd->add_option("--device", o->device,
                    "Where to run: cpu (cpu.ref, cpu.fast) or cuda (cuda.decode, cuda.grouped, GPU 0)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--threads", o->b.threads, "CPU threads (0 = all)")->capture_default_str();
    cmd->add_option("--warmup", o->b.warmup, "Untimed runs per row")->capture_default_str();
    cmd->add_option("--iters", o->b.iters, "Timed runs per row (median reported)")->capture_default_str();
    cmd->add_option("--row-budget-s", o->b.row_budget_s, "Stop sampling a row after this many seconds (>= 1 run)")
        ->capture_default_str();
    cmd->add_option("--max-run-s", o->b.max_run_s,
                    "Skip a (runner, T) whose single run is estimated (from its smaller T) to exceed this")
        ->capture_default_str();
    cmd->add_option("--pool-gib", o->b.pool_gib, "Cap of the random weight pool in GiB (0 = min(6, free/3))")
        ->capture_default_str();
    cmd->add_option("--seed", o->b.seed, "Seed of the random weights, inputs and routers")->capture_default_str();
    cmd->add_option("--json", o->json, "Write {meta, rows} JSON here");
    cmd->add_option("--csv", o->csv, "Write the rows as CSV here");
    cmd->add_option("--md", o->md, "Write a markdown table (for bench/results/) here");
    cmd->add_option("--plot", o->plot, "Write an SVG plot (us and % of floor vs T) here; PNG: bench/plot.py JSON");
    std::string command;
    for (int i = 0; i < argc; ++i) command += fmt::format("{}{}", i ? " " : "", argv[i]);
    cmd->callback([o, &reg, command] { reg.result = run_bench_moe(*o, command); });
}

} // namespace fp4moe::tools
