// The CPU runners as the autotuner and `fp4moe bench moe` see them: owned instances, which of them are
// tuning candidates, and the identity of this CPU for the tuning cache.
#pragma once

#include "fp4moe/moe.h"
#include "moe/autotune.h"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe::cpu {

/// Owns one instance of every CPU runner: cpu.ref (the oracle: forced by name only, never tuned, unless it
/// is the only runner supporting a shape) and cpu.fast (tuned). The one place that lists them.
class runner_registry {
public:
    /// Runners sized for `threads` worker threads (0: all hardware threads).
    explicit runner_registry(int threads = 0);

    /// Candidates in a fixed order (cpu.ref, cpu.fast), for moe_autotuner.
    std::span<const moe_candidate> candidates() const { return candidates_; }
    /// The runner called `name`, or null.
    const moe_runner *find(std::string_view name) const;
    /// "cpu.ref, cpu.fast".
    std::string names() const;

private:
    std::vector<std::unique_ptr<moe_runner>> owned_;
    std::vector<moe_candidate> candidates_;
};

/// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7763 64-Core Processor"), "unknown" when unreadable.
std::string cpu_model_name();

/// Tuning target of this CPU with `threads` threads: device "cpu <model> (<n> threads)", driver "none".
moe_tune_target cpu_tune_target(int threads = 0);

} // namespace fp4moe::cpu
