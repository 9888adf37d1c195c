// fp4moe: one binary, subcommands (as `vllm serve` / `vllm bench`). Each subcommand lives in its own file
// and only parses flags and calls the library.
#include "commands.h"
#include "core/build_info.h"
#include "core/log.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

namespace {

std::string version_text() {
    const auto &b = fp4moe::get_build_info();
    std::string s = fmt::format("fp4moe {}\ncommit: {}\nbuild: {}\ncuda: {}", b.version, b.commit, b.build_type,
                                b.cuda ? "on" : "off");
    if (b.cuda) s += fmt::format(" (archs: {})", b.cuda_archs);
    if (*b.sanitize) s += fmt::format("\nsanitize: {}", b.sanitize);
    return s;
}

} // namespace

namespace fp4moe::tools {

void register_bench(CLI::App &app, command_registry &reg, int argc, char **argv) {
    auto *bench = app.add_subcommand("bench", "Benchmarks: the MoE block per runner; a serving load generator");
    bench->require_subcommand(1);
    register_bench_moe(*bench, reg, argc, argv);
    register_bench_serve(*bench, reg, argc, argv);
}

} // namespace fp4moe::tools

int main(int argc, char **argv) {
    fp4moe::log_init();
    CLI::App app{"fp4moe: an inference engine and server for Mixture-of-Experts models with NVFP4 experts"};
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);
    fp4moe::tools::command_registry reg;
    fp4moe::tools::register_inspect(app, reg);
    fp4moe::tools::register_bench(app, reg, argc, argv);
    fp4moe::tools::register_make_model(app, reg);
    fp4moe::tools::register_quantize(app, reg);
    fp4moe::tools::register_generate(app, reg);
    fp4moe::tools::register_serve(app, reg);
    CLI11_PARSE(app, argc, argv);
    return reg.result;
}
