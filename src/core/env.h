// Every FP4MOE_* environment knob, read in one place (env.cpp) and documented in docs/env.md.
#pragma once

#include <string>

namespace fp4moe {

struct env_knobs {
    std::string log_level = "info";  ///< FP4MOE_LOG_LEVEL: trace|debug|info|warn|error|off
    std::string moe_runner = "auto"; ///< FP4MOE_MOE_RUNNER: "auto" (autotune) or a runner name to force
    bool print_configs = false;      ///< FP4MOE_PRINT_CONFIGS: 1 prints each MoE runner choice once
    std::string tune_cache;          ///< FP4MOE_TUNE_CACHE: path of the autotuner's JSON cache (empty: none)
};

/// The knobs, read from the environment on first use (thread-safe), then fixed for the process.
const env_knobs &env();

} // namespace fp4moe
