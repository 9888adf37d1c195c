// The subcommands of the `fp4moe` CLI. Each register_* adds one subcommand to the app; its callback stores
// the process exit code in the registry.
#pragma once

#include <CLI/CLI.hpp>

namespace fp4moe::tools {

struct command_registry {
    int result = 0; ///< exit code of the subcommand that ran
};

void register_inspect(CLI::App &app, command_registry &reg);
/// `bench moe`; argv is kept for the command line in reports.
void register_bench(CLI::App &app, command_registry &reg, int argc, char **argv);
void register_make_model(CLI::App &app, command_registry &reg);
void register_quantize(CLI::App &app, command_registry &reg);
/// `generate`: one prompt on the CPU, streamed to stdout.
void register_generate(CLI::App &app, command_registry &reg);

} // namespace fp4moe::tools
