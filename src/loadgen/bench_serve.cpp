#include "loadgen/bench_serve.h"

#include "core/build_info.h"
#include "fp4moe/tokenizer.h"
#include "loadgen/scheduler.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

namespace fp4moe::loadgen {
namespace {

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm);
}

std::string machine_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string model = "unknown cpu";
    for (std::string l; std::getline(f, l);)
        if (l.starts_with("model name")) {
            const auto c = l.find(':');
            if (c != std::string::npos) model = l.substr(l.find_first_not_of(' ', c + 1));
            break;
        }
    return fmt::format("{} ({} threads)", model, std::thread::hardware_concurrency());
}

bool is_dir(const std::string &p) {
    std::error_code ec;
    return !p.empty() && std::filesystem::is_directory(p, ec);
}

// The served model's id and root (vLLM-style) from a /v1/models body.
std::vector<std::string> model_entries(const std::string &models_json, std::string &first_id) {
    std::vector<std::string> out;
    try {
        const auto j = nlohmann::json::parse(models_json);
        for (const auto &m : j.at("data")) {
            if (m.contains("id") && m["id"].is_string()) {
                if (first_id.empty()) first_id = m["id"].get<std::string>();
                out.push_back(m["id"].get<std::string>());
            }
            if (m.contains("root") && m["root"].is_string()) out.push_back(m["root"].get<std::string>());
        }
    } catch (const std::exception &) {
    }
    return out;
}

result<bench_serve_result> run_checked(const bench_serve_options &o,
                                       const std::function<void(const std::string &)> &print) {
    // sglang's random-ids is what our random does (token content by its rule): both names are accepted.
    const bool random = o.dataset_name == "random" || o.dataset_name == "random-ids";
    if (!random && o.dataset_name != "jsonl")
        return status(status_code::invalid_argument,
                      fmt::format("--dataset-name must be random, random-ids or jsonl (got '{}')", o.dataset_name));
    for (int c : o.max_concurrency)
        if (c < 1)
            return status(status_code::invalid_argument,
                          fmt::format("--max-concurrency values must be >= 1 (got {})", c));
    if (!(o.request_rate > 0))
        return status(status_code::invalid_argument,
                      fmt::format("--request-rate must be > 0 or inf (got {})", o.request_rate));
    if (o.warmup_requests < 0)
        return status(status_code::invalid_argument,
                      fmt::format("--warmup-requests must be >= 0 (got {})", o.warmup_requests));

    bench_serve_result res;
    auto &meta = res.meta;
    meta.command = o.command;
    meta.date = utc_now();
    meta.commit = get_build_info().commit;
    meta.machine = machine_name();
    meta.url = o.ep.url();
    meta.backend = backend_name(o.backend);
    meta.dataset = o.dataset_name == "jsonl" ? "jsonl:" + o.dataset_path : o.dataset_name;
    meta.num_prompts = o.num_prompts;
    meta.random_input_len = o.random_input_len;
    meta.random_output_len = o.random_output_len;
    meta.random_range_ratio = o.random_range_ratio;
    meta.request_rate = o.request_rate;
    meta.seed = o.seed;
    meta.warmup_requests = o.warmup_requests;

    // /v1/models: reachability, the served name and the tokenizer's location. A server without the route (a bare
    // /generate server) is still measurable when --tokenizer (and, for openai, --model) say what it would.
    int models_http = 0;
    auto models = http_get(o.ep, "/v1/models", o.api_key, 10, &models_http);
    if (!models.ok()) {
        const bool auth = models_http == 401 || models_http == 403;
        const bool can_go_on = models_http != 0 && !auth && !o.tokenizer.empty() &&
                               (o.backend == backend_kind::sglang || !o.model.empty());
        if (!can_go_on)
            return status(models.get_status().code(),
                          fmt::format("cannot query the server: {}{}", models.get_status().message(),
                                      auth ? " (--api-key or $OPENAI_API_KEY)" : ""));
        print(fmt::format("note: {}; going on with --tokenizer {}\n", models.get_status().message(), o.tokenizer));
    } else {
        meta.models_json = models.value();
    }
    std::string served_id;
    const auto candidates = model_entries(meta.models_json, served_id);
    for (const char *path : {"/server_info", "/get_server_info"}) {
        auto si = http_get(o.ep, path, o.api_key);
        if (si.ok()) {
            meta.server_info_json = si.value();
            break;
        }
    }

    sender_options so;
    so.backend = o.backend;
    so.model = !o.model.empty() ? o.model : served_id;
    so.api_key = o.api_key;
    so.stream = !o.disable_stream;
    so.ignore_eos = !o.disable_ignore_eos;
    so.read_timeout_s = o.read_timeout_s;
    if (o.backend == backend_kind::openai && so.model.empty())
        return status(status_code::invalid_argument,
                      fmt::format("GET {}/v1/models lists no model: give --model NAME", o.ep.url()));

    std::string tok_path = o.tokenizer;
    if (tok_path.empty() && is_dir(o.model)) tok_path = o.model;
    if (tok_path.empty())
        for (const auto &c : candidates)
            if (is_dir(c)) {
                tok_path = c;
                break;
            }
    if (tok_path.empty())
        return status(
            status_code::invalid_argument,
            fmt::format("no tokenizer: the server's model ({}) is not a local directory; give --tokenizer DIR "
                        "(a checkpoint or tokenizer directory)",
                        served_id.empty() ? "none listed" : served_id));
    auto tok = tokenizer::load(tok_path);
    if (!tok.ok()) return status(tok.get_status().code(), fmt::format("--tokenizer: {}", tok.get_status().message()));
    meta.tokenizer = tok_path;

    numpy_legacy_rng rng(o.seed);
    std::vector<bench_prompt> prompts;
    if (random) {
        auto vocab = hf_base_vocab_size(tok_path);
        if (!vocab.ok()) return status(vocab.get_status().code(), "--tokenizer: " + vocab.get_status().message());
        random_dataset_options ro;
        ro.num_prompts = o.num_prompts;
        ro.input_len = o.random_input_len;
        ro.output_len = o.random_output_len;
        ro.range_ratio = o.random_range_ratio;
        ro.token_ids = o.tokenize_prompt;
        auto ds = make_random_dataset(ro, &tok.value(), vocab.value(), rng);
        if (!ds.ok()) return ds.get_status();
        prompts = std::move(ds).value();
    } else {
        jsonl_dataset_options jo;
        jo.path = o.dataset_path;
        jo.num_prompts = o.num_prompts;
        jo.default_output_len = o.random_output_len;
        jo.token_ids = o.tokenize_prompt;
        auto ds = load_jsonl_dataset(jo, &tok.value());
        if (!ds.ok()) return ds.get_status();
        prompts = std::move(ds).value();
        if (static_cast<std::int64_t>(prompts.size()) < o.num_prompts)
            print(fmt::format("{} has {} prompts (fewer than --num-prompts {}): using them all\n", o.dataset_path,
                              prompts.size(), o.num_prompts));
    }
    std::int64_t in_sum = 0, out_sum = 0;
    for (const auto &p : prompts) in_sum += p.prompt_len, out_sum += p.output_len;
    print(fmt::format("#Input tokens: {}\n#Output tokens: {}\n", in_sum, out_sum));

    const tokenizer &tk = tok.value();
    const auto retokenize = [&tk](const std::string &text) -> std::int64_t {
        auto ids = tk.encode(text, true, false);
        return ids.ok() ? static_cast<std::int64_t>(ids.value().size()) : 0;
    };
    const send_fn send = [&](const bench_prompt &p, std::int64_t out_len, std::chrono::steady_clock::time_point t0) {
        return send_request(o.ep, so, p, out_len, t0);
    };
    std::vector<int> sweep = o.max_concurrency;
    if (sweep.empty()) sweep.push_back(0);
    for (int c : sweep) {
        schedule_options sch;
        sch.request_rate = o.request_rate;
        sch.max_concurrency = c;
        sch.warmup_requests = o.warmup_requests;
        sch.warmup_pause_s = o.warmup_pause_s;
        print(fmt::format("Running {} prompts, max concurrency {}, request rate {} ...\n", prompts.size(),
                          c ? std::to_string(c) : "not set", python_float(o.request_rate)));
        auto run = run_schedule(prompts, sch, rng, send);
        if (!run.ok())
            return status(run.get_status().code(), fmt::format("{} (server {})", run.get_status().message(), meta.url));
        pass_report pr;
        pr.info.backend = meta.backend;
        pr.info.dataset_name = o.dataset_name;
        pr.info.request_rate = o.request_rate;
        pr.info.max_concurrency = c;
        pr.info.num_prompts = static_cast<std::int64_t>(prompts.size());
        pr.info.random_input_len = o.random_input_len;
        pr.info.random_output_len = o.random_output_len;
        pr.info.random_range_ratio = o.random_range_ratio;
        pr.info.server_info_json = meta.server_info_json;
        pr.metrics = calculate_metrics(run.value().outputs, run.value().duration_s, retokenize);
        pr.outputs = std::move(run.value().outputs);
        const auto wanted = c ? std::min<std::size_t>(static_cast<std::size_t>(c), prompts.size()) : prompts.size();
        if (static_cast<std::size_t>(run.value().workers) < wanted)
            print(fmt::format("note: the system gave {} request threads, not {}: at most {} requests were in flight\n",
                              run.value().workers, wanted, run.value().workers));
        if (run.value().warmup_failed > 0)
            print(
                fmt::format("note: {} of {} warmup request(s) failed\n", run.value().warmup_failed, o.warmup_requests));
        print(format_result_block(pr));
        if (!o.output_file.empty()) {
            std::ofstream f(o.output_file, std::ios::app);
            f << output_file_line(pr, o.output_details);
            if (!f) return status(status_code::io_error, fmt::format("--output-file: cannot write {}", o.output_file));
            print(fmt::format("Results saved to {}\n", o.output_file));
        }
        if (!o.output_details) pr.outputs.clear();
        res.passes.push_back(std::move(pr));
    }
    return res;
}

} // namespace

result<bench_serve_result> run_bench_serve(const bench_serve_options &o,
                                           const std::function<void(const std::string &)> &print) {
    try {
        return run_checked(o, print);
    } catch (const std::exception &e) { // a bug or out of memory: a message, not a crash
        return status(status_code::internal, fmt::format("bench serve: {}", e.what()));
    }
}

} // namespace fp4moe::loadgen
