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
    return k;
}

} // namespace

const env_knobs &env() {
    static const env_knobs knobs = read_env();
    return knobs;
}

} // namespace fp4moe
