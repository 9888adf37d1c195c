#include "core/env.h"

#include <cstdlib>

namespace fp4moe {
namespace {

std::string get_string(const char *name, std::string fallback) {
    const char *v = std::getenv(name);
    return (v && *v) ? std::string(v) : fallback;
}

env_knobs read_env() {
    env_knobs k;
    k.log_level = get_string("FP4MOE_LOG_LEVEL", k.log_level);
    k.moe_runner = get_string("FP4MOE_MOE_RUNNER", k.moe_runner);
    const std::string pc = get_string("FP4MOE_PRINT_CONFIGS", "0");
    k.print_configs = !(pc == "0" || pc == "false" || pc == "off" || pc == "no");
    k.tune_cache = get_string("FP4MOE_TUNE_CACHE", k.tune_cache);
    return k;
}

} // namespace

const env_knobs &env() {
    static const env_knobs knobs = read_env();
    return knobs;
}

} // namespace fp4moe
