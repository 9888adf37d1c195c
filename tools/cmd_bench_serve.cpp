// `fp4moe bench serve`: the serving load generator (src/loadgen/bench_serve.h), flags named as sglang.bench_serving
// names them; prints sglang's result block per --max-concurrency value; optionally JSON, markdown and SVG reports.
#include "commands.h"
#include "loadgen/bench_serve.h"

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

namespace fp4moe::tools {
namespace {

struct bench_serve_cli {
    loadgen::bench_serve_options o;
    std::string url, host = "127.0.0.1", backend = "sglang", request_rate = "inf", max_concurrency;
    int port = 30000;
    std::string json, md, plot;
};

int fail(const std::string &msg) {
    fmt::print(stderr, "fp4moe bench serve: {}\n", msg);
    return 1;
}

bool write_file(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    if (!f) fmt::print(stderr, "fp4moe bench serve: cannot write {}\n", path);
    return static_cast<bool>(f);
}

int run_bench_serve_cli(bench_serve_cli &c) {
    auto &o = c.o;
    if (!c.url.empty()) {
        auto ep = loadgen::parse_endpoint(c.url);
        if (!ep.ok()) return fail(ep.get_status().message());
        o.ep = ep.value();
    } else {
        o.ep.host = c.host;
        o.ep.port = c.port;
    }
    o.backend = c.backend == "openai" ? loadgen::backend_kind::openai : loadgen::backend_kind::sglang;
    if (c.request_rate == "inf") {
        o.request_rate = INFINITY;
    } else {
        try {
            std::size_t used = 0;
            o.request_rate = std::stod(c.request_rate, &used);
            if (used != c.request_rate.size()) throw std::invalid_argument("trailing text");
        } catch (const std::exception &) {
            return fail(fmt::format("--request-rate: '{}' is not a number or inf", c.request_rate));
        }
    }
    std::stringstream ss(c.max_concurrency);
    for (std::string item; std::getline(ss, item, ',');) {
        if (item.empty()) continue;
        try {
            std::size_t used = 0;
            const int v = std::stoi(item, &used);
            if (used != item.size() || v < 1) throw std::invalid_argument("bad");
            o.max_concurrency.push_back(v);
        } catch (const std::exception &) {
            return fail(fmt::format("--max-concurrency: '{}' is not a positive integer", item));
        }
    }
    if (o.api_key.empty())
        if (const char *k = std::getenv("OPENAI_API_KEY")) o.api_key = k; // as sglang.bench_serving

    // A server that closes a connection while a request body is written must fail that request, not kill us.
    std::signal(SIGPIPE, SIG_IGN);
    auto r = loadgen::run_bench_serve(o, [](const std::string &s) {
        fmt::print("{}", s);
        std::fflush(stdout);
    });
    if (!r.ok()) return fail(r.get_status().message());
    bool ok = true;
    if (!c.json.empty()) ok &= write_file(c.json, loadgen::sweep_json(r.value().meta, r.value().passes));
    if (!c.md.empty()) ok &= write_file(c.md, loadgen::sweep_markdown(r.value().meta, r.value().passes));
    if (!c.plot.empty()) ok &= write_file(c.plot, loadgen::sweep_svg(r.value().meta, r.value().passes));
    // Failed requests are results, not crashes: the blocks and reports above carry them. The exit code still says
    // so, for scripts.
    for (const auto &p : r.value().passes)
        if (p.metrics.failed > 0) {
            fmt::print(stderr, "fp4moe bench serve: {} of {} requests failed (max concurrency {}); errors above\n",
                       p.metrics.failed, p.metrics.failed + p.metrics.completed,
                       p.info.max_concurrency ? std::to_string(p.info.max_concurrency) : "not set");
            ok = false;
        }
    return ok ? 0 : 1;
}

} // namespace

void register_bench_serve(CLI::App &bench, command_registry &reg, int argc, char **argv) {
    auto c = std::make_shared<bench_serve_cli>();
    auto &o = c->o;
    auto *cmd = bench.add_subcommand(
        "serve", "Serving load generator against a running server (sglang.bench_serving's flags, metrics and "
                 "result block); --max-concurrency 1,4,16 sweeps");
    cmd->add_option("--url,--base-url", c->url, "Server base URL http://host:port[/prefix] (overrides --host/--port)");
    cmd->add_option("--host", c->host, "Server host")->capture_default_str();
    cmd->add_option("--port", c->port, "Server port")->capture_default_str();
    cmd->add_option("--backend", c->backend, "sglang: POST /generate; openai: POST /v1/completions")
        ->check(CLI::IsMember({"sglang", "openai"}))
        ->capture_default_str();
    cmd->add_option("--dataset-name", o.dataset_name,
                    "random (= random-ids here): sglang's random lengths, token content by its random-ids rule; "
                    "jsonl: --dataset-path")
        ->check(CLI::IsMember({"random", "random-ids", "jsonl"}))
        ->capture_default_str();
    cmd->add_option("--dataset-path", o.dataset_path,
                    "JSONL file: one object per line, \"prompt\" (text or token ids), optional \"output_len\"");
    cmd->add_option("--num-prompts", o.num_prompts, "Requests per pass")->capture_default_str();
    cmd->add_option("--random-input-len", o.random_input_len, "Largest input length L_in")->capture_default_str();
    cmd->add_option("--random-output-len", o.random_output_len,
                    "Largest output length L_out (also the jsonl default output length)")
        ->capture_default_str();
    cmd->add_option("--random-range-ratio", o.random_range_ratio,
                    "Lengths uniform on [max(int(L*r), 1), L]: 0 = [1, L] (sglang's default), 1 = exactly L")
        ->capture_default_str();
    cmd->add_option("--request-rate", c->request_rate, "Poisson arrivals in requests/s; inf = all at once")
        ->capture_default_str();
    cmd->add_option("--max-concurrency", c->max_concurrency,
                    "Most requests in flight; a comma list (1,4,16,64) runs one pass per value (default: no limit)");
    cmd->add_option("--warmup-requests", o.warmup_requests, "Warmup copies of the first prompt (<= 32 new tokens)")
        ->capture_default_str();
    cmd->add_option("--seed", o.seed, "numpy seed of the lengths, token offsets and arrival gaps")
        ->capture_default_str();
    cmd->add_option("--model", o.model,
                    "Served model name for the openai backend (default: the first of /v1/models); a directory also "
                    "serves as --tokenizer");
    cmd->add_option("--tokenizer", o.tokenizer,
                    "Tokenizer or checkpoint directory (default: --model or the served model when a local directory)");
    cmd->add_option("--api-key", o.api_key, "Sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)");
    cmd->add_flag("--tokenize-prompt", o.tokenize_prompt,
                  "Send prompts as token ids (sglang: input_ids) instead of decoded text");
    cmd->add_flag("--disable-stream", o.disable_stream, "Non-streamed requests (TTFT = latency, no ITL)");
    cmd->add_flag("--disable-ignore-eos", o.disable_ignore_eos, "Let requests stop at EOS (default: ignore_eos)");
    cmd->add_option("--read-timeout", o.read_timeout_s, "Fail a request after this many seconds without a byte")
        ->capture_default_str();
    cmd->add_option("--output-file", o.output_file, "Append sglang's JSON result line per pass to this JSONL file");
    cmd->add_flag("--output-details", o.output_details, "Add per-request lists to the --output-file lines");
    cmd->add_option("--json", c->json, "Write our report: {meta (command, server /v1/models), rows per concurrency}");
    cmd->add_option("--md", c->md, "Write a markdown table (for bench/results/) here");
    cmd->add_option("--plot", c->plot, "Write an SVG: output throughput and median TPOT vs max concurrency");
    std::string command;
    for (int i = 0; i < argc; ++i) command += fmt::format("{}{}", i ? " " : "", argv[i]);
    cmd->callback([c, &reg, command] {
        c->o.command = command;
        reg.result = run_bench_serve_cli(*c);
    });
}

} // namespace fp4moe::tools
