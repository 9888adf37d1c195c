// `fp4moe generate --model DIR --prompt TEXT`: one request on the CPU, text streamed to stdout, a summary on stderr.
#include "commands.h"
#include "fp4moe/tokenizer.h"
#include "runtime/cpu_model.h"
#include "runtime/generate.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

namespace fp4moe::tools {
namespace {

struct generate_cli {
    std::string model_dir;
    std::string prompt;
    std::string system;
    bool chat = false;
    sampling_params p;
    std::string moe_runner;
    int threads = 0;
    std::int64_t max_batch_tokens = 512;
};

int run(const generate_cli &c) {
    if (c.model_dir.empty()) {
        fmt::print(stderr, "fp4moe generate: no --model given. Make a small synthetic one with\n"
                           "  fp4moe make-model --preset tiny --out DIR\n"
                           "then run\n"
                           "  fp4moe generate --model DIR --prompt hi\n");
        return 2;
    }
    if (auto st = validate(c.p); !st.ok()) {
        fmt::print(stderr, "fp4moe generate: {}\n", st.message());
        return 2;
    }
    auto tok = tokenizer::load(c.model_dir);
    if (!tok.ok()) {
        fmt::print(stderr, "fp4moe generate: {}\n", tok.get_status().message());
        return 1;
    }
    std::string text = c.prompt;
    if (c.chat) {
        std::vector<chat_message> msgs;
        if (!c.system.empty()) msgs.push_back({"system", c.system});
        msgs.push_back({"user", c.prompt});
        auto t = tok.value().apply_chat_template(msgs, true);
        if (!t.ok()) {
            fmt::print(stderr, "fp4moe generate: --chat: {}\n", t.get_status().message());
            return 1;
        }
        text = std::move(t.value());
    } else if (!c.system.empty()) {
        fmt::print(stderr, "fp4moe generate: --system needs --chat\n");
        return 2;
    }
    // A chat template writes its own prefix; a raw prompt gets the tokenizer's (a BOS), as vLLM's completions do.
    auto ids = tok.value().encode(text, true, !c.chat);
    if (!ids.ok()) {
        fmt::print(stderr, "fp4moe generate: {}\n", ids.get_status().message());
        return 2;
    }

    cpu_model_options mo;
    mo.model.threads = c.threads;
    mo.model.max_batch_tokens = c.max_batch_tokens;
    mo.moe_runner = c.moe_runner;
    auto m = cpu_model::load(c.model_dir, mo);
    if (!m.ok()) {
        fmt::print(stderr, "fp4moe generate: {}\n", m.get_status().message());
        return 1;
    }
    generate_options go;
    go.max_batch_tokens = c.max_batch_tokens;
    auto r = generate(
        *m.value(), tok.value(), ids.value(), c.p,
        [](std::string_view s) {
            std::fwrite(s.data(), 1, s.size(), stdout);
            std::fflush(stdout);
        },
        go);
    if (!r.ok()) {
        fmt::print(stderr, "fp4moe generate: {}\n", r.get_status().message());
        return r.get_status().code() == status_code::invalid_argument ? 2 : 1;
    }
    const auto &g = r.value();
    std::fputc('\n', stdout);
    std::fflush(stdout);
    fmt::print(stderr,
               "prompt tokens: {}, generated tokens: {}, prefill: {:.1f} tokens/s ({:.3f} s), decode: {:.1f} tokens/s, "
               "finish reason: {}{}\n",
               g.prompt_tokens, g.output_ids.size(), g.prefill_tokens_per_s(), g.prefill_seconds,
               g.decode_tokens_per_s(), g.finish,
               !g.stop_string.empty() ? fmt::format(" (stop string \"{}\")", g.stop_string)
               : g.stop_token >= 0    ? fmt::format(" (stop token {})", g.stop_token)
                                      : std::string{});
    return 0;
}

} // namespace

void register_generate(CLI::App &app, command_registry &reg) {
    auto c = std::make_shared<generate_cli>();
    c->p.max_tokens = 128;
    auto *cmd = app.add_subcommand("generate", "Generate a continuation of one prompt on the CPU, streamed to stdout "
                                               "(a summary with tokens/s goes to stderr)");
    cmd->add_option("--model", c->model_dir, "Checkpoint directory (config.json, safetensors, tokenizer.json)");
    cmd->add_option("--prompt", c->prompt, "Prompt text")->required();
    cmd->add_flag("--chat", c->chat, "Wrap the prompt in the checkpoint's chat template (with the generation prompt)");
    cmd->add_option("--system", c->system, "System message (with --chat)");
    cmd->add_option("--max-tokens", c->p.max_tokens, "Most tokens to generate")->capture_default_str();
    cmd->add_option("--temperature", c->p.temperature, "Sampling temperature; 0: greedy")->capture_default_str();
    cmd->add_option("--top-p", c->p.top_p, "Nucleus sampling mass in (0, 1]; 1: off")->capture_default_str();
    cmd->add_option("--top-k", c->p.top_k, "Keep the K most likely tokens; 0 or -1: off")->capture_default_str();
    cmd->add_option("--min-p", c->p.min_p, "Drop tokens below P x the top probability; 0: off")->capture_default_str();
    cmd->add_option("--repetition-penalty", c->p.repetition_penalty,
                    "Divide positive (multiply negative) logits of prompt and output tokens by R; 1: off")
        ->capture_default_str();
    cmd->add_option("--presence-penalty", c->p.presence_penalty,
                    "Subtract from the logit of every token already generated, in [-2, 2]")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", c->p.frequency_penalty,
                    "Subtract this times its count from the logit of a generated token, in [-2, 2]")
        ->capture_default_str();
    cmd->add_option("--seed", c->p.seed, "Random seed; -1: random")->capture_default_str();
    cmd->add_option("--stop", c->p.stop, "Stop string (repeatable); not printed");
    cmd->add_flag("--ignore-eos", c->p.ignore_eos, "Keep generating past the checkpoint's end-of-sequence tokens");
    cmd->add_option("--moe-runner", c->moe_runner,
                    "MoE runner: auto (tune) or a runner name; overrides "
                    "FP4MOE_MOE_RUNNER");
    cmd->add_option("--threads", c->threads, "CPU threads (0: all)")->capture_default_str();
    cmd->add_option("--max-batch-tokens", c->max_batch_tokens, "Prompt tokens per prefill step")->capture_default_str();
    cmd->callback([c, &reg] { reg.result = run(*c); });
}

} // namespace fp4moe::tools
