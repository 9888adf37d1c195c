// A model ready to run on the CPU: the runners, the autotuner that picks among them per layer shape and
// token bucket (FP4MOE_MOE_RUNNER / --moe-runner force one), and the model itself. The one place that wires
// the three together for `generate`, `serve` and `bench latency`.
#pragma once

#include "backend/cpu/registry.h"
#include "model/model.h"
#include "moe/autotune.h"

#include <memory>
#include <mutex>
#include <string>

namespace fp4moe {

struct cpu_model_options {
    model_options model;
    std::string moe_runner;   ///< "auto"/empty: tune; a runner name forces it; overrides FP4MOE_MOE_RUNNER
    bool tune_at_load = true; ///< measure every bucket up to max_batch_tokens while loading (progress shown)
};

class cpu_model {
public:
    /// Loads `dir` and prepares the MoE runner choice. Errors: the loader's, an unknown or unsupporting
    /// forced runner (the message lists the runners).
    static result<std::unique_ptr<cpu_model>> load(const std::string &dir, const cpu_model_options &opts);

    model &get() { return *model_; }
    moe_autotuner &tuner() { return *tuner_; }

private:
    cpu_model() = default;
    std::unique_ptr<cpu::runner_registry> registry_;
    std::unique_ptr<moe_autotuner> tuner_;
    std::unique_ptr<model> model_;
    std::mutex tuner_mutex_; // the tuner is not thread-safe
};

} // namespace fp4moe
