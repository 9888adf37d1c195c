// The subcommands of the `fp4moe` CLI. Each register_* adds one subcommand to the app; its callback stores
// the process exit code in the registry.
#pragma once

#include <CLI/CLI.hpp>

namespace fp4moe::tools {

struct command_registry {
    int result = 0; ///< exit code of the subcommand that ran
};

void register_inspect(CLI::App &app, command_registry &reg);
/// `bench`: adds the group and its subcommands below. argv is kept for the command line in reports.
void register_bench(CLI::App &app, command_registry &reg, int argc, char **argv);
/// `bench moe` (cmd_bench.cpp): the MoE block per runner, tactic and token count.
void register_bench_moe(CLI::App &bench, command_registry &reg, int argc, char **argv);
/// `bench serve` (cmd_bench_serve.cpp): load generator against a running server (sglang.bench_serving's flags).
void register_bench_serve(CLI::App &bench, command_registry &reg, int argc, char **argv);
/// `serve` (cmd_serve.cpp): the OpenAI-compatible HTTP server.
void register_serve(CLI::App &app, command_registry &reg);
void register_make_model(CLI::App &app, command_registry &reg);
void register_quantize(CLI::App &app, command_registry &reg);
/// `generate`: one prompt on the CPU, streamed to stdout.
void register_generate(CLI::App &app, command_registry &reg);

} // namespace fp4moe::tools
