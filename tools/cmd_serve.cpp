// `fp4moe serve`: placeholder until src/server/ lands (issue #6).
#include "commands.h"

#include <fmt/format.h>

namespace fp4moe::tools {

void register_serve(CLI::App &app, command_registry &reg) {
    auto *cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (not built yet)");
    cmd->callback([&reg] {
        fmt::print(stderr, "fp4moe serve: not built yet\n");
        reg.result = 2;
    });
}

} // namespace fp4moe::tools
