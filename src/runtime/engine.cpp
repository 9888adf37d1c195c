#include "runtime/engine.h"

#include "core/error.h"
#include "core/log.h"
#include "runtime/stop.h"

#include <fmt/format.h>

#include <algorithm>

namespace fp4moe {

const char *finish_reason_name(finish_reason r) {
    switch (r) {
    case finish_reason::stop:
        return "stop";
    case finish_reason::length:
        return "length";
    case finish_reason::abort:
        return "abort";
    case finish_reason::error:
        return "error";
    case finish_reason::none:
        break;
    }
    return nullptr;
}

const char *submit_error_name(submit_error e) {
    switch (e) {
    case submit_error::none:
        return "none";
    case submit_error::invalid_argument:
        return "invalid_argument";
    case submit_error::too_long:
        return "too_long";
    case submit_error::queue_full:
        return "queue_full";
    case submit_error::shutting_down:
        return "shutting_down";
    }
    return "none";
}

/// A request owned by the loop: the scheduler's sequence plus sampling, stopping and streaming state.
struct engine::request_state : sequence {
    request_state(const sampling_params &p, std::span<const std::int32_t> prompt, std::vector<std::int32_t> stop_ids,
                  const tokenizer *tok)
        : params(p), smp(p, prompt), stops(p.stop, std::move(stop_ids)) {
        if (tok) dec.emplace(*tok, p.skip_special_tokens);
    }
    sampling_params params;
    sampler smp;
    stop_checker stops;
    std::optional<tokenizer::stream_decoder> dec;
    output_callback cb;
    engine_clock::time_point arrival;
    engine_clock::time_point first_scheduled{};
    // The output being built (reused, so steady state does not allocate).
    std::vector<std::int32_t> out_tokens;
    std::vector<engine_clock::time_point> out_times;
    std::vector<float> out_logprobs;
    std::string out_text;
};

namespace {

submit_result refuse(submit_error e, std::string message) {
    return {0, e, std::move(message)};
}

} // namespace

result<std::unique_ptr<engine>> engine::create(std::unique_ptr<step_model> m, const tokenizer *tok,
                                               const engine_options &opts, std::vector<std::int32_t> default_stop_ids) {
    auto bad = [](std::string s) { return status{status_code::invalid_argument, std::move(s)}; };
    if (!m) return bad("engine: no model");
    if (opts.max_running_requests < 1)
        return bad(fmt::format("max_running_requests must be >= 1, got {}", opts.max_running_requests));
    if (opts.max_batch_tokens < opts.max_running_requests)
        return bad(fmt::format("max_batch_tokens ({}) must be >= max_running_requests ({}): every running request "
                               "decodes one token per step",
                               opts.max_batch_tokens, opts.max_running_requests));
    if (opts.max_batch_tokens > m->max_batch_tokens())
        return bad(fmt::format("max_batch_tokens ({}) exceeds the model's max_batch_tokens ({})", opts.max_batch_tokens,
                               m->max_batch_tokens()));
    if (opts.kv_blocks != 0 && opts.kv_blocks != m->num_blocks())
        return bad(fmt::format("kv_blocks ({}) differs from the model's KV storage ({} blocks)", opts.kv_blocks,
                               m->num_blocks()));
    if (opts.block_size != m->block_size())
        return bad(
            fmt::format("block_size ({}) differs from the model's KV storage ({})", opts.block_size, m->block_size()));
    if (opts.max_queue < 0) return bad(fmt::format("max_queue must be >= 0, got {}", opts.max_queue));
    if (opts.max_model_len < 0 || (m->max_positions() > 0 && opts.max_model_len > m->max_positions()))
        return bad(fmt::format("max_model_len ({}) must be in [0, {}] (the model's max positions)", opts.max_model_len,
                               m->max_positions()));
    if (m->num_blocks() < 1) return bad("the KV cache has no blocks");
    return std::unique_ptr<engine>(new engine(std::move(m), tok, opts, std::move(default_stop_ids)));
}

result<std::unique_ptr<engine>> engine::create(model &m, const tokenizer *tok, const engine_options &opts) {
    if (opts.block_size < 1)
        return status{status_code::invalid_argument, fmt::format("block_size must be >= 1, got {}", opts.block_size)};
    if (opts.max_batch_tokens > m.options().max_batch_tokens)
        return status{status_code::invalid_argument,
                      fmt::format("engine max_batch_tokens ({}) exceeds the model's buffers ({})",
                                  opts.max_batch_tokens, m.options().max_batch_tokens)};
    std::int64_t blocks = opts.kv_blocks;
    if (blocks == 0) blocks = opts.kv_memory_bytes / kv_bytes_per_block(m.config(), opts.block_size);
    if (blocks < 1)
        return status{status_code::invalid_argument,
                      fmt::format("the KV budget ({} bytes) holds no block of {} positions ({} bytes)",
                                  opts.kv_memory_bytes, opts.block_size,
                                  kv_bytes_per_block(m.config(), opts.block_size))};
    std::vector<std::int32_t> eos;
    if (!tok)
        for (auto id : m.config().eos_token_ids) eos.push_back(static_cast<std::int32_t>(id));
    return create(make_step_model(m, opts.max_batch_tokens, blocks, opts.block_size), tok, opts, std::move(eos));
}

engine::engine(std::unique_ptr<step_model> m, const tokenizer *tok, const engine_options &opts,
               std::vector<std::int32_t> default_stop_ids)
    : model_(std::move(m)), tok_(tok), opts_(opts), default_stop_ids_(std::move(default_stop_ids)),
      blocks_(model_->num_blocks(), model_->block_size()),
      sched_({opts.max_running_requests, opts.max_batch_tokens}, blocks_) {
    vocab_ = model_->vocab_size();
    max_model_len_ = opts.max_model_len > 0 ? opts.max_model_len : model_->max_positions();
    if (tok_) default_stop_ids_.assign(tok_->stop_ids().begin(), tok_->stop_ids().end());
    counters_.kv_blocks_total = blocks_.num_blocks();
    counters_.kv_block_size = blocks_.block_size();
    stats_ = counters_;
    logits_.reserve(static_cast<std::size_t>(opts.max_running_requests * vocab_));
    incoming_.reserve(64);
    cancelling_.reserve(64);
    thread_ = std::thread([this] { loop(); });
}

engine::~engine() {
    shutdown(false);
}

submit_result engine::submit(std::vector<std::int32_t> prompt, const sampling_params &params, output_callback cb) {
    if (!cb) return refuse(submit_error::invalid_argument, "no output callback");
    if (prompt.empty()) return refuse(submit_error::invalid_argument, "the prompt is empty");
    for (std::size_t i = 0; i < prompt.size(); ++i)
        if (prompt[i] < 0 || prompt[i] >= vocab_)
            return refuse(
                submit_error::invalid_argument,
                fmt::format("prompt token {} (id {}) is outside the vocabulary [0, {})", i, prompt[i], vocab_));
    if (auto st = validate(params, vocab_); !st.ok()) return refuse(submit_error::invalid_argument, st.message());
    if (!tok_ && !params.stop.empty())
        return refuse(submit_error::invalid_argument, "stop strings need a tokenizer (this engine has none)");
    const auto n_prompt = static_cast<std::int64_t>(prompt.size());
    if (max_model_len_ > 0 && n_prompt + params.max_tokens > max_model_len_)
        return refuse(submit_error::too_long,
                      fmt::format("the prompt has {} tokens and max_tokens is {}: {} exceeds the maximum context "
                                  "length of {} tokens",
                                  n_prompt, params.max_tokens, n_prompt + params.max_tokens, max_model_len_));
    // The last sampled token is never fed back: a request needs prompt + max_tokens - 1 positions.
    const std::int64_t positions = n_prompt + params.max_tokens - 1;
    const std::int64_t kv_positions = blocks_.num_blocks() * blocks_.block_size();
    if (positions > kv_positions)
        return refuse(submit_error::too_long,
                      fmt::format("the prompt has {} tokens and max_tokens is {}: {} positions exceed the KV cache "
                                  "capacity of {} positions",
                                  n_prompt, params.max_tokens, positions, kv_positions));

    std::vector<std::int32_t> stop_ids(params.stop_token_ids);
    if (!params.ignore_eos) stop_ids.insert(stop_ids.end(), default_stop_ids_.begin(), default_stop_ids_.end());
    auto r = std::make_unique<request_state>(params, prompt, std::move(stop_ids), tok_);
    r->cb = std::move(cb);
    r->prompt_len = n_prompt;
    r->max_len = n_prompt + params.max_tokens;
    r->tokens = std::move(prompt);
    r->tokens.reserve(static_cast<std::size_t>(r->max_len));
    r->blocks.reserve(static_cast<std::size_t>(blocks_.blocks_for(positions)));
    r->out_tokens.reserve(1);
    r->out_times.reserve(1);

    std::lock_guard lock(mu_);
    if (stop_ != stop_mode::none) return refuse(submit_error::shutting_down, "the server is shutting down");
    if (stats_.queued + static_cast<std::int64_t>(inbox_.size()) >= opts_.max_queue)
        return refuse(submit_error::queue_full,
                      fmt::format("the request queue is full ({} requests waiting)", opts_.max_queue));
    r->id = next_id_++;
    r->arrival = engine_clock::now();
    const request_id id = r->id;
    live_.insert(id);
    inbox_.push_back(std::move(r));
    cv_.notify_one();
    return {id, submit_error::none, {}};
}

bool engine::cancel(request_id id) {
    std::lock_guard lock(mu_);
    if (!live_.contains(id)) return false;
    cancels_.push_back(id);
    cv_.notify_one();
    return true;
}

engine_stats engine::stats() const {
    std::lock_guard lock(mu_);
    engine_stats s = stats_;
    s.queued += static_cast<std::int64_t>(inbox_.size());
    return s;
}

void engine::shutdown(bool drain) {
    {
        std::lock_guard lock(mu_);
        if (!drain || stop_ == stop_mode::none) stop_ = drain ? stop_mode::drain : stop_mode::abort;
        stats_.accepting = false;
        cv_.notify_one();
    }
    std::lock_guard join(join_mu_);
    FP4MOE_ASSERT(std::this_thread::get_id() != thread_.get_id());
    if (thread_.joinable()) thread_.join();
}

void engine::publish_stats() {
    counters_.waiting = sched_.num_waiting();
    counters_.running = sched_.num_running();
    counters_.queued = sched_.num_waiting();
    counters_.kv_blocks_used = blocks_.used_blocks();
    counters_.kv_blocks_peak = blocks_.peak_used_blocks();
    counters_.preemptions = sched_.preemptions();
    counters_.accepting = stats_.accepting;
    stats_ = counters_;
}

void engine::emit(request_state &r, finish_reason why, std::string_view error) {
    request_output o;
    o.id = r.id;
    o.tokens = r.out_tokens;
    o.token_times = r.out_times;
    o.logprobs = r.out_logprobs;
    o.text = r.out_text;
    o.finish = why;
    o.error = error;
    o.usage = {r.prompt_len, r.generated()};
    o.arrival = r.arrival;
    o.first_scheduled = r.first_scheduled;
    try {
        r.cb(o);
    } catch (const std::exception &e) {
        FP4MOE_LOG_WARN("engine: the output callback of request {} threw: {}", r.id, e.what());
    } catch (...) {
        FP4MOE_LOG_WARN("engine: the output callback of request {} threw", r.id);
    }
    r.out_tokens.clear();
    r.out_times.clear();
    r.out_logprobs.clear();
    r.out_text.clear();
}

void engine::finish(request_state &r, finish_reason why, std::string_view error) {
    sched_.remove(r); // frees its blocks (false when it never reached the scheduler)
    emit(r, why, error);
    switch (why) {
    case finish_reason::stop:
        ++counters_.finished_stop;
        break;
    case finish_reason::length:
        ++counters_.finished_length;
        break;
    case finish_reason::abort:
        ++counters_.finished_abort;
        break;
    case finish_reason::error:
        ++counters_.finished_error;
        break;
    case finish_reason::none:
        FP4MOE_ASSERT(false);
    }
    {
        std::lock_guard lock(mu_);
        live_.erase(r.id);
    }
    requests_.erase(r.id); // destroys r
}

void engine::step() {
    const step_plan &plan = sched_.schedule();
    // Work but nothing schedulable would spin: submit's capacity checks make it impossible.
    FP4MOE_ASSERT(!plan.empty());
    {
        std::lock_guard lock(mu_); // the state of this step is what stats() shows while the forward runs
        publish_stats();
    }
    const auto started = engine_clock::now();
    for (const step_entry &e : plan.entries) {
        auto &r = *static_cast<request_state *>(e.seq);
        if (r.first_scheduled == engine_clock::time_point{}) r.first_scheduled = started;
    }
    const status st = model_->forward(plan.batch, logits_);
    ++counters_.steps;
    if (!st.ok()) {
        // Only the requests of this batch fail; the engine keeps serving.
        FP4MOE_LOG_WARN("engine: step failed: {}", st.to_string());
        std::vector<request_state *> failed;
        for (const step_entry &e : plan.entries) failed.push_back(static_cast<request_state *>(e.seq));
        for (request_state *r : failed) finish(*r, finish_reason::error, st.message());
        return;
    }
    sched_.commit();
    const auto now = engine_clock::now();
    const auto vocab = static_cast<std::size_t>(vocab_);
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const step_entry &e = plan.entries[i];
        if (!e.sample) continue;
        auto &r = *static_cast<request_state *>(e.seq);
        const auto ch = r.smp.sample(std::span<float>(logits_).subspan(i * vocab, vocab));
        r.tokens.push_back(ch.token);
        ++counters_.generation_tokens;
        r.out_tokens.push_back(ch.token);
        r.out_times.push_back(now);
        if (r.params.logprobs) r.out_logprobs.push_back(ch.logprob);
        finish_reason why = finish_reason::none;
        if (r.stops.is_stop_token(ch.token)) {
            why = finish_reason::stop;
        } else {
            if (r.dec) r.out_text += r.stops.push(r.dec->push(ch.token));
            if (r.stops.stopped())
                why = finish_reason::stop;
            else if (r.generated() >= r.params.max_tokens)
                why = finish_reason::length;
        }
        if (why == finish_reason::none) {
            emit(r, why, {});
            continue;
        }
        if (r.dec && !r.stops.stopped()) {
            r.out_text += r.stops.push(r.dec->flush());
            if (r.stops.stopped()) why = finish_reason::stop;
            r.out_text += r.stops.flush();
        }
        finish(r, why);
    }
}

void engine::loop() {
    for (;;) {
        if (requests_.empty() && !idle_checked_) { // just went idle: every block must be free again
            idle_checked_ = true;
            if (blocks_.used_blocks() != 0 || !blocks_.check()) {
                ++counters_.idle_kv_leaks;
                FP4MOE_LOG_ERROR("engine: idle with {} KV blocks still allocated (free list consistent: {})",
                                 blocks_.used_blocks(), blocks_.check());
            }
        }
        stop_mode stop;
        {
            std::unique_lock lock(mu_);
            publish_stats();
            const bool busy = sched_.num_running() + sched_.num_waiting() > 0;
            cv_.wait(lock, [&] { return busy || !inbox_.empty() || !cancels_.empty() || stop_ != stop_mode::none; });
            incoming_.swap(inbox_);
            cancelling_.swap(cancels_);
            stop = stop_;
            stats_.queued += static_cast<std::int64_t>(incoming_.size()); // visible as queued until admitted
        }
        for (auto &r : incoming_) {
            counters_.prompt_tokens += r->prompt_len;
            request_state &ref = *r;
            requests_.emplace(r->id, std::move(r));
            sched_.add(ref);
        }
        incoming_.clear();
        for (request_id id : cancelling_)
            if (auto it = requests_.find(id); it != requests_.end()) finish(*it->second, finish_reason::abort);
        cancelling_.clear();
        if (stop == stop_mode::abort) {
            while (!requests_.empty()) finish(*requests_.begin()->second, finish_reason::abort);
            break;
        }
        if (requests_.empty()) {
            if (stop == stop_mode::drain) break;
            continue;
        }
        idle_checked_ = false;
        step();
    }
    std::lock_guard lock(mu_);
    publish_stats();
}

} // namespace fp4moe
