// Every FP4MOE_* environment knob, read in one place (env.cpp) and documented in docs/env.md.
#pragma once

#include <string>

namespace fp4moe {

struct env_knobs {
    std::string log_level = "info"; ///< FP4MOE_LOG_LEVEL: trace|debug|info|warn|error|off
};

/// The knobs, read from the environment on first use (thread-safe), then fixed for the process.
const env_knobs &env();

} // namespace fp4moe
