// The autotuner's timer for CPU runners on a model's own weights: random bf16 activations and random router
// logits (uniform routing) for the bucket's token count, timed as the runner runs in the model (plan built
// outside the timed region), median of a few runs within a time budget.
#pragma once

#include "moe/autotune.h"

#include <functional>

namespace fp4moe::cpu {

/// `weights_for(desc)` returns the weights to time a desc on (null: the timer reports not_found).
/// `budget_s`: rough wall-time limit per candidate measurement.
moe_timer make_moe_timer(std::function<const moe_weights *(const moe_desc &)> weights_for, int threads,
                         double budget_s = 0.5);

} // namespace fp4moe::cpu
