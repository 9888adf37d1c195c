// `fp4moe bench serve`: placeholder until src/loadgen/ lands (issue #6).
#include "commands.h"

#include <fmt/format.h>

namespace fp4moe::tools {

void register_bench_serve(CLI::App &bench, command_registry &reg, int, char **) {
    auto *cmd = bench.add_subcommand("serve", "Serving load generator (not built yet)");
    cmd->callback([&reg] {
        fmt::print(stderr, "fp4moe bench serve: not built yet\n");
        reg.result = 2;
    });
}

} // namespace fp4moe::tools
