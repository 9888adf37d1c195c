#include "backend/cpu/moe_timer.h"

#include "backend/cpu/runners.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace fp4moe::cpu {

moe_timer make_moe_timer(std::function<const moe_weights *(const moe_desc &)> weights_for, int threads,
                         double budget_s) {
    return [weights_for = std::move(weights_for), threads, budget_s](const moe_desc &d, const moe_runner &r,
                                                                     const moe_tactic &t, std::int64_t tokens,
                                                                     double best_us) -> result<double> {
        const moe_weights *w = weights_for(d);
        if (!w) return status{status_code::not_found, fmt::format("no weights to time {}", d.to_string())};
        std::mt19937 rng(1234);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<bf16_t> x(tokens * d.hidden), out(tokens * d.hidden);
        for (auto &v : x) v = float_to_bf16(normal(rng));
        moe_plan plan(d, tokens);
        if (w->router) {
            std::vector<float> logits(tokens * d.experts);
            for (auto &v : logits) v = normal(rng);
            if (auto st = moe_route(d, logits, w->correction_bias, tokens, plan); !st.ok()) return st;
        } else {
            plan.tokens = tokens;
            plan.topk_ids.assign(tokens * d.slots(), 0);
            plan.topk_weights.assign(tokens * d.slots(), 1.0f);
            moe_plan_from_ids(d, plan);
        }
        std::vector<std::byte> ws(r.workspace_size(d, tokens));
        moe_args a;
        a.x = x.data();
        a.out = out.data();
        a.w = w;
        a.workspace = ws.data();
        a.workspace_bytes = ws.size();
        const moe_device dev = cpu_device(threads);
        std::vector<double> us;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 12; ++i) {
            const auto s = std::chrono::steady_clock::now();
            if (auto st = r.run(d, a, plan, t, dev); !st.ok()) return st;
            const auto e = std::chrono::steady_clock::now();
            if (i > 0) us.push_back(std::chrono::duration<double, std::micro>(e - s).count()); // run 0 warms up
            const double spent = std::chrono::duration<double>(e - t0).count();
            // Stop once the budget is spent, or early when this candidate is clearly slower than the best.
            if (us.size() >= 3 && (spent > budget_s || us.back() > 2.0 * best_us)) break;
        }
        if (us.empty()) {
            const auto e = std::chrono::steady_clock::now();
            us.push_back(std::chrono::duration<double, std::micro>(e - t0).count());
        }
        std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
        return us[us.size() / 2];
    };
}

} // namespace fp4moe::cpu
