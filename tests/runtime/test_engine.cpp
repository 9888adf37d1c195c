// The engine: the threaded request lifecycle on the fake model (instant), then continuous batching on a real tiny
// model (make-model --preset tiny with its tokenizer) against each request run alone (model::forward + argmax).
#include "fake_model.h"
#include "model/make_model.h"
#include "runtime/cpu_model.h"
#include "runtime/engine.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include <unistd.h>

using namespace fp4moe;
using namespace std::chrono_literals;
using fp4moe::test::fake_model;

namespace {

/// What a request's callback received, accumulated.
struct record {
    std::vector<std::int32_t> tokens;
    std::vector<engine_clock::time_point> times;
    engine_clock::time_point arrival, first_scheduled;
    std::string text;
    finish_reason finish = finish_reason::none;
    std::string error;
    request_usage usage;
    int outputs = 0;
    int finals = 0;
};

class collector {
public:
    output_callback callback() {
        return [this](const request_output &o) {
            std::lock_guard lock(mu_);
            record &r = recs_[o.id];
            r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
            r.times.insert(r.times.end(), o.token_times.begin(), o.token_times.end());
            r.text += o.text;
            r.usage = o.usage;
            r.arrival = o.arrival;
            r.first_scheduled = o.first_scheduled;
            ++r.outputs;
            if (o.finish != finish_reason::none) {
                r.finish = o.finish;
                r.error = o.error;
                ++r.finals;
                ++done_;
                cv_.notify_all();
            }
        };
    }
    /// Waits until `n` requests finished (60 s at most).
    bool wait(int n) {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, 60s, [&] { return done_ >= n; });
    }
    record get(request_id id) {
        std::lock_guard lock(mu_);
        return recs_[id];
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<request_id, record> recs_;
    int done_ = 0;
};

/// Polls `pred` on the engine's stats until true or 10 s passed.
template <typename P>
bool eventually(const engine &e, P pred) {
    for (int i = 0; i < 1000; ++i) {
        if (pred(e.stats())) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

/// Wraps a step_model; forward waits until open() so that a test can queue every request before the first step.
class gated_model final : public step_model {
public:
    explicit gated_model(std::unique_ptr<step_model> inner) : inner_(std::move(inner)) {}
    void open() {
        {
            std::lock_guard lock(mu_);
            open_ = true;
        }
        cv_.notify_all();
    }
    std::int64_t vocab_size() const override { return inner_->vocab_size(); }
    std::int64_t max_batch_tokens() const override { return inner_->max_batch_tokens(); }
    std::int64_t max_positions() const override { return inner_->max_positions(); }
    std::int64_t num_blocks() const override { return inner_->num_blocks(); }
    std::int64_t block_size() const override { return inner_->block_size(); }
    status forward(std::span<const seq_step> batch, std::vector<float> &logits) override {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return open_; });
        }
        return inner_->forward(batch, logits);
    }

private:
    std::unique_ptr<step_model> inner_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
};

constexpr std::int64_t kVocab = 500;

sampling_params greedy(std::int64_t max_tokens) {
    sampling_params p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
}

std::vector<std::int32_t> prompt_of(int id, int len) {
    std::vector<std::int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back((id * 37 + i * 11) % kVocab);
    return p;
}

struct fake_engine {
    fake_engine(engine_options o, std::int64_t blocks, std::int64_t bs = 4) {
        o.block_size = bs;
        auto m = std::make_unique<fake_model>(kVocab, o.max_batch_tokens, blocks, bs);
        model = m.get();
        auto e = engine::create(std::move(m), nullptr, o);
        EXPECT_TRUE(e.ok()) << e.get_status().to_string();
        if (e.ok()) eng = std::move(e.value());
    }
    fake_model *model = nullptr; // owned by eng
    std::unique_ptr<engine> eng;
};

engine_options small_options() {
    engine_options o;
    o.max_running_requests = 4;
    o.max_batch_tokens = 16;
    o.max_queue = 64;
    return o;
}

} // namespace

TEST(EngineFake, ConcurrentSubmittersGetTheirAloneOutputs) {
    fake_engine fe(small_options(), 64);
    collector col;
    std::vector<std::thread> threads;
    std::mutex ids_mu;
    std::map<request_id, std::pair<std::vector<std::int32_t>, std::int64_t>> sent;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 5; ++i) {
                const int n = 1 + (t * 5 + i) % 13, max_tokens = 1 + (t + i * 3) % 9;
                auto prompt = prompt_of(t * 5 + i, n);
                auto r = fe.eng->submit(prompt, greedy(max_tokens), col.callback());
                ASSERT_TRUE(r.ok()) << r.message;
                std::lock_guard lock(ids_mu);
                sent[r.id] = {prompt, max_tokens};
            }
        });
    for (auto &th : threads) th.join();
    ASSERT_TRUE(col.wait(20));
    for (const auto &[id, req] : sent) {
        const record r = col.get(id);
        EXPECT_EQ(r.finish, finish_reason::length);
        EXPECT_EQ(r.finals, 1);
        EXPECT_EQ(r.tokens, fe.model->reference(req.first, req.second)) << "request " << id;
        EXPECT_EQ(r.usage.prompt_tokens, static_cast<std::int64_t>(req.first.size()));
        EXPECT_EQ(r.usage.completion_tokens, req.second);
        ASSERT_EQ(r.times.size(), r.tokens.size());
        EXPECT_LE(r.arrival, r.first_scheduled);
        EXPECT_LE(r.first_scheduled, r.times.front());
        EXPECT_TRUE(std::is_sorted(r.times.begin(), r.times.end()));
    }
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.running == 0 && s.waiting == 0; }));
    const auto s = fe.eng->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.finished_length, 20);
    EXPECT_LE(fe.model->max_step_tokens, 16);
}

TEST(EngineFake, PreemptedStreamsContinueWithoutRepeats) {
    // 12 blocks of 4 = 48 positions, 6 requests of 6 + 12: KV runs out while they decode.
    auto o = small_options();
    fake_engine fe(o, 12);
    std::mutex mu;
    std::condition_variable cv;
    bool all_queued = false;
    fe.model->on_forward = [&] { // the first step waits until every request is queued
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return all_queued; });
    };
    collector col;
    std::map<request_id, std::vector<std::int32_t>> sent;
    for (int i = 0; i < 6; ++i) {
        auto prompt = prompt_of(i, 6);
        auto r = fe.eng->submit(prompt, greedy(12), col.callback());
        ASSERT_TRUE(r.ok()) << r.message;
        sent[r.id] = prompt;
    }
    {
        std::lock_guard lock(mu);
        all_queued = true;
    }
    cv.notify_all();
    ASSERT_TRUE(col.wait(6));
    for (const auto &[id, prompt] : sent) {
        const record r = col.get(id);
        EXPECT_EQ(r.finish, finish_reason::length);
        EXPECT_EQ(r.tokens, fe.model->reference(prompt, 12)) << "request " << id; // each token streamed once
    }
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.running == 0; }));
    const auto s = fe.eng->stats();
    EXPECT_GT(s.preemptions, 0);
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.generation_tokens, 6 * 12);
    EXPECT_EQ(s.prompt_tokens, 6 * 6);
}

TEST(EngineFake, SubmitErrors) {
    auto o = small_options();
    o.max_model_len = 40;
    fake_engine fe(o, 8); // 32 positions
    collector col;
    auto r = fe.eng->submit({}, greedy(4), col.callback());
    EXPECT_EQ(r.error, submit_error::invalid_argument);
    r = fe.eng->submit({1, static_cast<std::int32_t>(kVocab)}, greedy(4), col.callback());
    EXPECT_EQ(r.error, submit_error::invalid_argument);
    EXPECT_NE(r.message.find("vocabulary"), std::string::npos) << r.message;
    r = fe.eng->submit({1, -1}, greedy(4), col.callback());
    EXPECT_EQ(r.error, submit_error::invalid_argument);
    auto bad = greedy(4);
    bad.top_p = 1.5f;
    r = fe.eng->submit({1, 2}, bad, col.callback());
    EXPECT_EQ(r.error, submit_error::invalid_argument);
    EXPECT_NE(r.message.find("top_p"), std::string::npos) << r.message;
    auto with_stop = greedy(4);
    with_stop.stop = {"x"};
    EXPECT_EQ(fe.eng->submit({1, 2}, with_stop, col.callback()).error, submit_error::invalid_argument);
    EXPECT_EQ(fe.eng->submit({1, 2}, greedy(4), nullptr).error, submit_error::invalid_argument);
    r = fe.eng->submit(prompt_of(1, 30), greedy(11), col.callback()); // 41 > max_model_len 40
    EXPECT_EQ(r.error, submit_error::too_long);
    EXPECT_NE(r.message.find("30"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("40"), std::string::npos) << r.message;
    r = fe.eng->submit(prompt_of(1, 30), greedy(4), col.callback()); // 33 positions > 32 in the KV cache
    EXPECT_EQ(r.error, submit_error::too_long);
    EXPECT_NE(r.message.find("KV"), std::string::npos) << r.message;
    r = fe.eng->submit(prompt_of(1, 30), greedy(3), col.callback()); // exactly fits
    EXPECT_TRUE(r.ok()) << r.message;
    ASSERT_TRUE(col.wait(1));
    EXPECT_EQ(col.get(r.id).finish, finish_reason::length);
}

TEST(EngineFake, QueueFullThenServed) {
    auto o = small_options();
    o.max_queue = 2;
    fake_engine fe(o, 64);
    std::mutex gate_mu;
    std::condition_variable gate_cv;
    bool entered = false, open = false;
    fe.model->on_forward = [&] {
        std::unique_lock lock(gate_mu);
        entered = true;
        gate_cv.notify_all();
        gate_cv.wait(lock, [&] { return open; });
    };
    collector col;
    auto a = fe.eng->submit(prompt_of(1, 3), greedy(2), col.callback());
    ASSERT_TRUE(a.ok());
    {
        std::unique_lock lock(gate_mu); // the loop holds `a` inside forward: nothing else is admitted
        gate_cv.wait(lock, [&] { return entered; });
    }
    auto b = fe.eng->submit(prompt_of(2, 3), greedy(2), col.callback());
    auto c = fe.eng->submit(prompt_of(3, 3), greedy(2), col.callback());
    ASSERT_TRUE(b.ok() && c.ok());
    auto d = fe.eng->submit(prompt_of(4, 3), greedy(2), col.callback());
    EXPECT_EQ(d.error, submit_error::queue_full);
    EXPECT_EQ(fe.eng->stats().queued, 2);
    {
        std::lock_guard lock(gate_mu);
        open = true;
    }
    gate_cv.notify_all();
    ASSERT_TRUE(col.wait(3));
    for (auto id : {a.id, b.id, c.id}) EXPECT_EQ(col.get(id).finish, finish_reason::length);
    EXPECT_TRUE(fe.eng->submit(prompt_of(4, 3), greedy(2), col.callback()).ok());
    ASSERT_TRUE(col.wait(4));
}

TEST(EngineFake, CancelFreesBlocksInEveryState) {
    auto o = small_options();
    o.max_running_requests = 1; // the second request stays queued
    fake_engine fe(o, 64);
    std::atomic<int> steps{0};
    fe.model->on_forward = [&] {
        ++steps;
        std::this_thread::sleep_for(2ms); // a's 200 tokens take >= 400 ms: it is still running when cancelled
    };
    collector col;
    auto a = fe.eng->submit(prompt_of(1, 9), greedy(200), col.callback());
    auto b = fe.eng->submit(prompt_of(2, 9), greedy(200), col.callback());
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.running == 1 && s.kv_blocks_used > 0; }));
    EXPECT_TRUE(fe.eng->cancel(b.id)); // queued
    ASSERT_TRUE(col.wait(1));
    EXPECT_EQ(col.get(b.id).finish, finish_reason::abort);
    EXPECT_TRUE(col.get(b.id).tokens.empty());
    EXPECT_TRUE(fe.eng->cancel(a.id)); // decoding
    ASSERT_TRUE(col.wait(2));
    const record ra = col.get(a.id);
    EXPECT_EQ(ra.finish, finish_reason::abort);
    EXPECT_EQ(ra.finals, 1);
    EXPECT_LT(ra.tokens.size(), 200u);
    EXPECT_EQ(ra.tokens, fe.model->reference(prompt_of(1, 9), static_cast<std::int64_t>(ra.tokens.size())));
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.kv_blocks_used == 0 && s.running == 0; }));
    const int steps_after = steps.load();
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(steps.load(), steps_after) << "the engine kept stepping after every request was cancelled";
    EXPECT_EQ(fe.eng->stats().finished_abort, 2);
    EXPECT_FALSE(fe.eng->cancel(a.id)); // already finished
    EXPECT_FALSE(fe.eng->cancel(12345));
}

TEST(EngineFake, CancelDuringChunkedPrefill) {
    fake_engine fe(small_options(), 64); // 16 tokens per step: a 200-token prompt takes 13 steps
    std::mutex mu;
    std::condition_variable cv;
    int steps = 0;
    bool cancelled = false;
    fe.model->on_forward = [&] { // the 5th step waits until the test has cancelled
        std::unique_lock lock(mu);
        if (++steps != 5) return;
        cv.notify_all();
        cv.wait(lock, [&] { return cancelled; });
    };
    collector col;
    auto a = fe.eng->submit(prompt_of(1, 200), greedy(4), col.callback());
    ASSERT_TRUE(a.ok()) << a.message;
    {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return steps >= 5; });
    }
    EXPECT_EQ(fe.eng->stats().kv_blocks_used, 20); // 80 positions computed or in flight, blocks of 4
    EXPECT_TRUE(fe.eng->cancel(a.id));
    {
        std::lock_guard lock(mu);
        cancelled = true;
    }
    cv.notify_all();
    ASSERT_TRUE(col.wait(1));
    const record r = col.get(a.id);
    EXPECT_EQ(r.finish, finish_reason::abort);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.usage.completion_tokens, 0);
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.kv_blocks_used == 0 && s.running == 0; }));
    EXPECT_EQ(fe.model->steps, 5); // no step after the cancel
}

TEST(EngineFake, StepFailureFailsOnlyThatBatch) {
    fake_engine fe(small_options(), 64);
    collector col;
    fe.model->fail_next = true;
    auto a = fe.eng->submit(prompt_of(1, 4), greedy(3), col.callback());
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(col.wait(1));
    EXPECT_EQ(col.get(a.id).finish, finish_reason::error);
    EXPECT_NE(col.get(a.id).error.find("injected"), std::string::npos);
    auto b = fe.eng->submit(prompt_of(2, 4), greedy(3), col.callback());
    ASSERT_TRUE(col.wait(2));
    EXPECT_EQ(col.get(b.id).finish, finish_reason::length);
    EXPECT_EQ(col.get(b.id).tokens, fe.model->reference(prompt_of(2, 4), 3));
    ASSERT_TRUE(eventually(*fe.eng, [](const engine_stats &s) { return s.kv_blocks_used == 0; }));
    EXPECT_EQ(fe.eng->stats().finished_error, 1);
}

TEST(EngineFake, ShutdownDrainsThenRefuses) {
    fake_engine fe(small_options(), 64);
    collector col;
    std::vector<request_id> ids;
    for (int i = 0; i < 6; ++i) {
        auto r = fe.eng->submit(prompt_of(i, 5), greedy(20), col.callback());
        ASSERT_TRUE(r.ok());
        ids.push_back(r.id);
    }
    fe.eng->shutdown(true);
    for (auto id : ids) EXPECT_EQ(col.get(id).finish, finish_reason::length) << id; // all done when it returns
    const auto s = fe.eng->stats();
    EXPECT_FALSE(s.accepting);
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.finished_length, 6);
    EXPECT_EQ(fe.eng->submit(prompt_of(1, 5), greedy(2), col.callback()).error, submit_error::shutting_down);
}

TEST(EngineFake, ShutdownWithoutDrainAborts) {
    fake_engine fe(small_options(), 64);
    fe.model->on_forward = [] { std::this_thread::sleep_for(1ms); }; // 200 tokens take >= 200 ms
    collector col;
    std::vector<request_id> ids;
    for (int i = 0; i < 6; ++i) {
        auto r = fe.eng->submit(prompt_of(i, 5), greedy(200), col.callback());
        ASSERT_TRUE(r.ok()) << r.message;
        ids.push_back(r.id);
    }
    fe.eng->shutdown(false);
    for (auto id : ids) {
        EXPECT_EQ(col.get(id).finish, finish_reason::abort) << id;
        EXPECT_EQ(col.get(id).finals, 1);
    }
    EXPECT_EQ(fe.eng->stats().kv_blocks_used, 0);
    fe.eng.reset(); // the destructor after a shutdown is fine
}

namespace {

/// A tiny GLM-4.5-shaped checkpoint with its tokenizer (make-model --preset tiny), cpu.ref runner.
class EngineTiny : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tiny_.create("test_engine");
        model_ = tiny_.model;
        tok_ = tiny_.tok;
    }
    static void TearDownTestSuite() { tiny_.destroy(); }

    static std::vector<std::vector<std::int32_t>> prompts() {
        std::vector<std::vector<std::int32_t>> out;
        for (const char *text :
             {"hello world", "the quick brown fox jumps over the lazy dog and keeps running far away", "a",
              "continuous batching must not change what a request generates, ever"}) {
            auto ids = tok_->encode(text, true, true);
            EXPECT_TRUE(ids.ok());
            out.push_back(ids.value());
        }
        return out;
    }

    /// An engine on the tiny model whose first step waits for gate->open() (every request queued first).
    static std::pair<std::unique_ptr<engine>, gated_model *> make_engine(const engine_options &o) {
        auto g = std::make_unique<gated_model>(
            make_step_model(model_->get(), o.max_batch_tokens, o.kv_blocks, o.block_size));
        gated_model *gate = g.get();
        auto e = engine::create(std::move(g), tok_, o);
        EXPECT_TRUE(e.ok()) << e.get_status().to_string();
        if (!e.ok()) return {nullptr, nullptr};
        return {std::move(e.value()), gate};
    }

    /// The request run alone: model::forward on one sequence (prompt in one step, then one token per step) and
    /// the argmax of each row.
    static std::vector<std::int32_t> argmax_path(const std::vector<std::int32_t> &prompt, int n) {
        model &m = model_->get();
        const auto vocab = m.config().vocab_size;
        kv_cache kv(m.config(), 8, 16);
        std::vector<std::int32_t> blocks(8);
        std::iota(blocks.begin(), blocks.end(), 0);
        std::vector<float> logits;
        const seq_step s{prompt, 0, blocks, false};
        EXPECT_TRUE(m.forward({&s, 1}, kv, logits).ok());
        std::vector<std::int32_t> out;
        for (int i = 0; i < n; ++i) {
            out.push_back(
                static_cast<std::int32_t>(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin()));
            const seq_step d{{&out.back(), 1}, static_cast<std::int64_t>(prompt.size()) + i, blocks, false};
            EXPECT_TRUE(m.forward({&d, 1}, kv, logits).ok());
        }
        return out;
    }

    /// Runs every prompt concurrently through an engine and checks tokens, text and finish against each prompt
    /// run alone.
    static void check_against_alone(const engine_options &o, bool expect_preemption) {
        const auto ps = prompts();
        std::vector<std::vector<std::int32_t>> alone;
        for (const auto &p : ps) alone.push_back(argmax_path(p, 12)); // before the engine: model is not thread-safe
        auto [e, gate] = make_engine(o);
        ASSERT_TRUE(e);
        engine &eng = *e;
        collector col;
        std::vector<request_id> ids;
        for (const auto &p : ps) {
            auto params = greedy(12);
            params.ignore_eos = true;
            auto r = eng.submit(p, params, col.callback());
            ASSERT_TRUE(r.ok()) << r.message;
            ids.push_back(r.id);
        }
        gate->open();
        ASSERT_TRUE(col.wait(static_cast<int>(ps.size())));
        for (std::size_t i = 0; i < ps.size(); ++i) {
            const record r = col.get(ids[i]);
            EXPECT_EQ(r.tokens, alone[i]) << "prompt " << i;
            EXPECT_EQ(r.text, tok_->decode(alone[i], true)) << "prompt " << i;
            EXPECT_EQ(r.finish, finish_reason::length) << "prompt " << i;
            EXPECT_EQ(r.usage.prompt_tokens, static_cast<std::int64_t>(ps[i].size()));
            EXPECT_EQ(r.usage.completion_tokens, static_cast<std::int64_t>(r.tokens.size()));
        }
        eng.shutdown(true);
        const auto s = eng.stats();
        EXPECT_EQ(s.kv_blocks_used, 0);
        EXPECT_EQ(s.running + s.waiting + s.queued, 0);
        if (expect_preemption) {
            EXPECT_GT(s.preemptions, 0);
        }
    }

    /// Each prompt with a stop string taken from the middle of its own greedy text: the streamed text ends right
    /// before it (nothing of it streamed), finish "stop".
    static void check_stop_strings(const engine_options &o) {
        const auto ps = prompts();
        std::vector<std::string> stops, expected;
        for (const auto &p : ps) { // before the engine exists: the model is not thread-safe
            const std::string text = tok_->decode(argmax_path(p, 12), true);
            auto is_cont = [&](std::size_t i) { return i < text.size() && (text[i] & 0xC0) == 0x80; };
            std::size_t a = text.size() / 2, b = a + 3;
            while (is_cont(a)) ++a;
            b = std::max(b, a + 1);
            while (is_cont(b)) ++b;
            ASSERT_LT(a, text.size());
            stops.push_back(text.substr(a, b - a));
            expected.push_back(text.substr(0, text.find(stops.back())));
        }
        auto [e, gate] = make_engine(o);
        ASSERT_TRUE(e);
        collector col;
        std::vector<request_id> ids;
        for (std::size_t i = 0; i < ps.size(); ++i) {
            auto params = greedy(12);
            params.ignore_eos = true;
            params.stop = {stops[i]};
            auto r = e->submit(ps[i], params, col.callback());
            ASSERT_TRUE(r.ok()) << r.message;
            ids.push_back(r.id);
        }
        gate->open();
        ASSERT_TRUE(col.wait(static_cast<int>(ps.size())));
        for (std::size_t i = 0; i < ps.size(); ++i) {
            const record r = col.get(ids[i]);
            EXPECT_EQ(r.finish, finish_reason::stop) << "prompt " << i;
            EXPECT_EQ(r.text, expected[i]) << "prompt " << i;
        }
        e->shutdown(true);
        EXPECT_EQ(e->stats().kv_blocks_used, 0);
    }

    static inline test::tiny_checkpoint tiny_;
    static inline cpu_model *model_ = nullptr;
    static inline tokenizer *tok_ = nullptr;
};

} // namespace

// Several prompts at once, prefill chunks of at most 16 tokens mixed with decode steps: exactly the tokens of
// each run alone (every op of the forward is row-independent and K/V rounding is per position).
TEST_F(EngineTiny, ContinuousBatchingMatchesRunsAlone) {
    engine_options o;
    o.max_running_requests = 4;
    o.max_batch_tokens = 16;
    o.kv_blocks = 64;
    o.block_size = 4;
    check_against_alone(o, false);
}

// A KV cache too small for all of them: preemption and recompute, still exactly the same tokens and text.
TEST_F(EngineTiny, PreemptionKeepsOutputs) {
    engine_options o;
    o.max_running_requests = 4;
    o.max_batch_tokens = 32;
    o.kv_blocks = 14; // 56 positions: the 40-token prompt + 11 fits alone, not beside the others
    o.block_size = 4;
    check_against_alone(o, true);
}

TEST_F(EngineTiny, StopStringsWithPreemption) {
    engine_options o;
    o.max_running_requests = 4;
    o.max_batch_tokens = 32;
    o.kv_blocks = 14;
    o.block_size = 4;
    check_stop_strings(o);
}

// Many requests under KV pressure with cancels at random moments: every request ends exactly once, completed
// ones have their alone output, cancelled ones a prefix of it, and the KV blocks all come back (no leak).
TEST(EngineFake, RandomCancelsLeakNothing) {
    auto o = small_options();
    o.max_queue = 1000;
    fake_engine fe(o, 24);
    std::mutex mu;
    std::condition_variable cv;
    bool all_queued = false;
    fe.model->on_forward = [&] {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return all_queued; });
        lock.unlock();
        std::this_thread::sleep_for(100us);
    };
    collector col;
    std::mt19937 rng(5);
    std::map<request_id, std::pair<std::vector<std::int32_t>, std::int64_t>> sent;
    for (int i = 0; i < 60; ++i) {
        const int n = 1 + static_cast<int>(rng() % 30), max_tokens = 1 + static_cast<int>(rng() % 40);
        auto p = prompt_of(i, n);
        auto r = fe.eng->submit(p, greedy(max_tokens), col.callback());
        ASSERT_TRUE(r.ok()) << r.message;
        sent[r.id] = {p, max_tokens};
    }
    {
        std::lock_guard lock(mu);
        all_queued = true;
    }
    cv.notify_all();
    std::vector<request_id> cancelled;
    for (int i = 0; i < 20; ++i) { // while they run: queued, prefilling, decoding or already done
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
        const request_id victim = sent.begin()->first + rng() % sent.size();
        if (fe.eng->cancel(victim)) cancelled.push_back(victim);
    }
    ASSERT_TRUE(col.wait(60));
    std::int64_t aborted = 0;
    for (const auto &[id, req] : sent) {
        const record r = col.get(id);
        EXPECT_EQ(r.finals, 1) << id;
        const auto ref = fe.model->reference(req.first, req.second);
        if (r.finish == finish_reason::abort) {
            ++aborted;
            EXPECT_NE(std::find(cancelled.begin(), cancelled.end(), id), cancelled.end()) << id;
            ASSERT_LE(r.tokens.size(), ref.size());
            EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), ref.begin())) << id;
        } else {
            EXPECT_EQ(r.finish, finish_reason::length) << id;
            EXPECT_EQ(r.tokens, ref) << id;
        }
    }
    fe.eng->shutdown(true);
    const auto s = fe.eng->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.finished_abort, aborted);
    EXPECT_EQ(s.finished_abort + s.finished_length, 60);
    EXPECT_EQ(s.idle_kv_leaks, 0);
    EXPECT_GT(s.preemptions, 0);
    EXPECT_GT(aborted, 0);
}

// create(model&): the KV budget in bytes becomes blocks; bad options are refused.
TEST_F(EngineTiny, CreateFromModelWithMemoryBudget) {
    const auto ps = prompts();
    const auto alone = argmax_path(ps[0], 5);
    engine_options o;
    o.max_running_requests = 2;
    o.max_batch_tokens = 32;
    o.block_size = 8;
    o.kv_memory_bytes = 20 * kv_bytes_per_block(model_->get().config(), 8) + 1;
    auto e = engine::create(model_->get(), tok_, o);
    ASSERT_TRUE(e.ok()) << e.get_status().to_string();
    EXPECT_EQ(e.value()->stats().kv_blocks_total, 20);
    EXPECT_EQ(e.value()->max_model_len(), model_->get().config().max_position_embeddings);
    collector col;
    auto params = greedy(5);
    params.ignore_eos = true;
    auto r = e.value()->submit(ps[0], params, col.callback());
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_TRUE(col.wait(1));
    EXPECT_EQ(col.get(r.id).tokens, alone);
    e.value()->shutdown(true);

    auto bad = o;
    bad.kv_memory_bytes = 10; // not one block
    EXPECT_FALSE(engine::create(model_->get(), tok_, bad).ok());
    bad = o;
    bad.max_running_requests = 64; // more than the token budget
    EXPECT_FALSE(engine::create(model_->get(), tok_, bad).ok());
    bad = o;
    bad.max_model_len = model_->get().config().max_position_embeddings + 1;
    EXPECT_FALSE(engine::create(model_->get(), tok_, bad).ok());
    bad = o;
    bad.max_batch_tokens = model_->get().options().max_batch_tokens + 1; // past the model's step buffers
    bad.max_running_requests = 1;
    const auto st = engine::create(model_->get(), tok_, bad);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.get_status().message().find("exceeds the model's buffers"), std::string::npos)
        << st.get_status().message();
}
