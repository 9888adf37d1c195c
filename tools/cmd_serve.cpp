// `fp4moe serve`: the OpenAI-compatible (and SGLang /generate) HTTP server on a checkpoint, on the CPU.
// Flag names follow vLLM / SGLang where they exist (aliases given for both).
#include "checkpoint_writer_cli.h"
#include "commands.h"
#include "fp4moe/tokenizer.h"
#include "model/make_model.h"
#include "runtime/cpu_model.h"
#include "runtime/engine.h"
#include "server/http_server.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace fp4moe::tools {
namespace {

struct serve_cli {
    std::string model_dir;
    server::server_options so;
    engine_options eo;
    double kv_memory_gib = 1.0;
    std::int64_t kv_blocks = 0;
    int threads = 0;
    std::string moe_runner;
    int shutdown_timeout_s = 60;
};

/// With no --model: models/tiny in the working directory, created (as `make-model --preset tiny`) if missing.
bool default_model(serve_cli &c, command_registry &reg) {
    namespace fs = std::filesystem;
    c.model_dir = (fs::current_path() / "models" / "tiny").string();
    if (fs::exists(fs::path(c.model_dir) / "config.json")) return true;
    fmt::print("fp4moe serve: no --model given; creating the tiny generated model in {} (random weights, real "
               "NVFP4 format; same as `fp4moe make-model --preset tiny --out {}`)\n",
               c.model_dir, c.model_dir);
    std::fflush(stdout);
    make_model_options mo;
    mo.preset = "tiny";
    mo.out = c.model_dir;
    run_checkpoint_writer(
        "serve", c.model_dir, [&] { return make_model(mo); }, reg);
    return reg.result == 0;
}

int run(serve_cli &c, command_registry &reg) {
    if (c.model_dir.empty() && !default_model(c, reg)) return reg.result;
    auto tok = tokenizer::load(c.model_dir);
    if (!tok.ok()) {
        fmt::print(stderr, "fp4moe serve: {}\n", tok.get_status().message());
        return 1;
    }
    cpu_model_options mo;
    mo.model.threads = c.threads;
    mo.model.max_batch_tokens = c.eo.max_batch_tokens;
    mo.moe_runner = c.moe_runner;
    auto m = cpu_model::load(c.model_dir, mo);
    if (!m.ok()) {
        fmt::print(stderr, "fp4moe serve: {}\n", m.get_status().message());
        return 1;
    }
    if (c.kv_memory_gib <= 0) {
        fmt::print(stderr, "fp4moe serve: --kv-memory must be > 0, got {}\n", c.kv_memory_gib);
        return 2;
    }
    c.eo.kv_blocks = c.kv_blocks;
    c.eo.kv_memory_bytes = static_cast<std::int64_t>(c.kv_memory_gib * (1 << 30));
    auto eng = engine::create(m.value()->get(), &tok.value(), c.eo);
    if (!eng.ok()) {
        fmt::print(stderr, "fp4moe serve: {}\n", eng.get_status().message());
        return 2;
    }
    c.so.model_path = c.model_dir;
    c.so.shutdown_timeout = std::chrono::seconds(c.shutdown_timeout_s);
    auto srv = server::http_server::create(*eng.value(), tok.value(), c.so);
    if (!srv.ok()) {
        fmt::print(stderr, "fp4moe serve: {}\n", srv.get_status().message());
        eng.value()->shutdown(false);
        return srv.get_status().code() == status_code::invalid_argument ? 2 : 1;
    }
    auto &s = *srv.value();
    const auto st = eng.value()->stats();
    fmt::print("fp4moe serve: model {} as \"{}\": max model len {}, KV {} blocks x {} positions, up to {} running "
               "and {} queued requests\n",
               c.model_dir, s.state().served_name, eng.value()->max_model_len(), st.kv_blocks_total, st.kv_block_size,
               c.eo.max_running_requests, c.eo.max_queue);
    fmt::print("fp4moe serve: listening on {} (Ctrl-C or SIGTERM: finish the requests in flight, then exit)\n",
               s.url());
    std::fflush(stdout);
    server::serve_until_signal(s);
    srv.value().reset();
    eng.value()->shutdown(false);
    fmt::print("fp4moe serve: stopped\n");
    return 0;
}

} // namespace

void register_serve(CLI::App &app, command_registry &reg) {
    auto c = std::make_shared<serve_cli>();
    c->so.host = "127.0.0.1";
    c->so.port = 30000;
    auto *cmd = app.add_subcommand(
        "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models), SGLang's "
                 "/generate, /health and Prometheus /metrics, on the CPU with continuous batching");
    cmd->add_option("--model,--model-path", c->model_dir,
                    "Checkpoint directory (default: models/tiny in the working directory, created if missing)");
    cmd->add_option("--host", c->so.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", c->so.port, "Port (0: any free port; the URL is printed)")->capture_default_str();
    cmd->add_option("--api-key", c->so.api_key, "Require `Authorization: Bearer KEY` on every route but /health");
    cmd->add_option("--served-model-name", c->so.served_model_name,
                    "Model name in /v1/models and responses (default: the --model path)");
    cmd->add_option("--max-running-requests,--max-num-seqs", c->eo.max_running_requests,
                    "Requests in the running batch at once")
        ->capture_default_str();
    cmd->add_option("--max-queue,--max-queued-requests", c->eo.max_queue,
                    "Requests accepted but not running; beyond it requests get 503")
        ->capture_default_str();
    cmd->add_option("--max-batch-tokens,--max-num-batched-tokens", c->eo.max_batch_tokens,
                    "New tokens per engine step (chunked prefill budget)")
        ->capture_default_str();
    cmd->add_option("--kv-memory", c->kv_memory_gib, "KV-cache budget in GiB (when --kv-blocks is 0)")
        ->capture_default_str();
    cmd->add_option("--kv-blocks", c->kv_blocks, "KV-cache blocks of 16 positions (0: from --kv-memory)")
        ->capture_default_str();
    cmd->add_option("--max-model-len,--context-length", c->eo.max_model_len,
                    "Prompt + max_tokens limit (0: the model's max_position_embeddings)")
        ->capture_default_str();
    cmd->add_option("--threads", c->threads, "CPU threads for the model (0: all)")->capture_default_str();
    cmd->add_option("--moe-runner", c->moe_runner,
                    "MoE runner: auto (tune) or a runner name; overrides "
                    "FP4MOE_MOE_RUNNER");
    cmd->add_option("--max-body-bytes", c->so.max_body_bytes, "Largest request body; beyond: 413")
        ->capture_default_str();
    cmd->add_option("--http-threads", c->so.http_threads, "Connections served at once (each stream holds one)")
        ->capture_default_str();
    cmd->add_option("--shutdown-timeout", c->shutdown_timeout_s,
                    "Seconds to let requests in flight finish after SIGTERM before aborting them")
        ->capture_default_str();
    cmd->callback([c, &reg] { reg.result = run(*c, reg); });
}

} // namespace fp4moe::tools
