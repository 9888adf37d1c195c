#include "runtime/cpu_model.h"

#include "backend/cpu/moe_timer.h"
#include "core/error.h"

namespace fp4moe {

result<std::unique_ptr<cpu_model>> cpu_model::load(const std::string &dir, const cpu_model_options &opts) {
    std::unique_ptr<cpu_model> cm(new cpu_model());
    const int threads = opts.model.threads;
    cm->registry_ = std::make_unique<cpu::runner_registry>(threads);
    auto topts = moe_autotune_options_from_env();
    if (!opts.moe_runner.empty()) topts.runner = opts.moe_runner;
    cpu_model *self = cm.get();
    // The timer measures a candidate on the model's own weights of that shape.
    auto timer = cpu::make_moe_timer(
        [self](const moe_desc &d) -> const moe_weights * {
            thread_local moe_weights w;
            for (const auto &[desc, set] : self->model_->expert_shapes())
                if (desc == d) {
                    w = set->view();
                    return &w;
                }
            return nullptr;
        },
        threads);
    cm->tuner_ = std::make_unique<moe_autotuner>(
        std::vector<moe_candidate>(cm->registry_->candidates().begin(), cm->registry_->candidates().end()),
        cpu::cpu_tune_target(threads), std::move(timer), topts);

    auto m = model::load(dir, opts.model, [self](const moe_desc &d, std::int64_t tokens) {
        std::lock_guard lock(self->tuner_mutex_);
        auto c = self->tuner_->choose(d, tokens);
        FP4MOE_ASSERT(c.ok()); // every shape was checked at load
        return c.value();
    });
    if (!m.ok()) return m.get_status();
    cm->model_ = std::move(m.value());
    for (const auto &[desc, set] : cm->model_->expert_shapes()) {
        if (auto st = cm->tuner_->check(desc); !st.ok()) return st;
        if (opts.tune_at_load)
            if (auto st = cm->tuner_->tune(desc, opts.model.max_batch_tokens); !st.ok()) return st;
    }
    return cm;
}

} // namespace fp4moe
