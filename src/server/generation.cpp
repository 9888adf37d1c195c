#include "server/generation.h"

namespace fp4moe::server {

void output_queue::push(output_event e) {
    {
        std::lock_guard lock(mu_);
        q_.push_back(std::move(e));
    }
    cv_.notify_one();
}

bool output_queue::pop_all(std::vector<output_event> &out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (q_.empty() && !cv_.wait_for(lock, timeout, [&] { return !q_.empty(); })) return false;
    while (!q_.empty()) {
        out.push_back(std::move(q_.front()));
        q_.pop_front();
    }
    return true;
}

generation::generation(engine &eng, std::shared_ptr<server_metrics> metrics)
    : eng_(eng), metrics_(std::move(metrics)), queue_(std::make_shared<output_queue>()) {}

generation::~generation() {
    cancel();
}

std::optional<api_error> generation::submit(const generation_request &r) {
    const int n = r.n;
    for (std::size_t p = 0; p < r.prompts.size(); ++p) {
        prompt_tokens_ += static_cast<std::int64_t>(r.prompts[p].size());
        for (int i = 0; i < n; ++i) {
            const int index = static_cast<int>(p) * n + i;
            sampling_params sp = r.params;
            sp.logprobs = r.logprobs;
            if (sp.seed >= 0) sp.seed += index; // distinct, reproducible samples per choice
            // The callback may run before submit returns: it captures only what it owns.
            auto cb = [q = queue_, m = metrics_, index, timing = request_timing{}](const request_output &o) mutable {
                m->observe(o, timing);
                output_event e;
                e.index = index;
                e.tokens.assign(o.tokens.begin(), o.tokens.end());
                e.logprobs.assign(o.logprobs.begin(), o.logprobs.end());
                e.text.assign(o.text);
                e.finish = o.finish;
                e.error.assign(o.error);
                e.usage = o.usage;
                q->push(std::move(e));
            };
            auto res = eng_.submit(r.prompts[p], sp, std::move(cb));
            if (!res.ok()) {
                cancel();
                return from_submit(res, r.prompt_param, r.max_tokens_param);
            }
            ids_.push_back(res.id);
            finished_.push_back(false);
            ++remaining_;
        }
    }
    return std::nullopt;
}

void generation::cancel() {
    for (std::size_t i = 0; i < ids_.size(); ++i)
        if (!finished_[i]) {
            eng_.cancel(ids_[i]); // false when it finished meanwhile: harmless
            finished_[i] = true;
        }
    remaining_ = 0;
}

generation::end generation::drain(const std::function<bool(const output_event &)> &on_event,
                                  const std::function<bool()> &alive, const std::function<bool()> &stopping,
                                  std::chrono::milliseconds poll) {
    std::vector<output_event> events;
    auto last_check = std::chrono::steady_clock::now();
    while (remaining_ > 0) {
        events.clear();
        const bool got = queue_->pop_all(events, poll);
        for (const auto &e : events) {
            if (e.finish != finish_reason::none && !finished_[static_cast<std::size_t>(e.index)]) {
                finished_[static_cast<std::size_t>(e.index)] = true;
                --remaining_;
            }
            if (!on_event(e)) {
                cancel();
                return end::write_failed;
            }
        }
        // Is anyone still listening? Checked on every idle wake-up and at least every `poll` while tokens flow
        // (a non-streamed response writes nothing until the end, so a write failure would come too late).
        const auto now = std::chrono::steady_clock::now();
        if (remaining_ > 0 && (!got || now - last_check >= poll)) {
            last_check = now;
            if (stopping()) {
                cancel();
                return end::stopping;
            }
            if (!alive()) {
                cancel();
                return end::disconnected;
            }
        }
    }
    return end::finished;
}

} // namespace fp4moe::server
