// The server under stress and at its edges (tiny model, CPU, loopback): authentication, the body limit,
// overload (503 in the OpenAI envelope, nothing lost or hung), client disconnects (request aborted, KV back to
// 0 as seen in /metrics), a bounded soak of 64 concurrent streams (no error, KV back to 0, RSS flat), and a
// graceful shutdown that finishes the stream in flight.
#include "server_fixture.h"

#include <atomic>
#include <mutex>

using namespace fp4moe;
using namespace fp4moe::test;

namespace {

const std::string kKey = "sk-test-0123456789";

/// Streams `body` to `path` and returns the raw SSE text (empty on a connection error).
std::string stream_all(int port, const std::string &path, const json &body) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) return "no reply: " + httplib::to_string(r.error());
    return r->status == 200 ? r->body : "HTTP " + std::to_string(r->status) + ": " + r->body;
}

} // namespace

TEST_F(ServerTest, ApiKeyOnEveryRouteButHealth) {
    auto so = default_server();
    so.api_key = kKey;
    start(default_engine(), so);
    const std::string body = greedy_completion("hi", 2).dump();
    auto expect_401 = [&](const http_reply &r, const std::string &what) {
        EXPECT_EQ(r.status, 401) << what << " -> " << r.body;
        const json j = r.j();
        ASSERT_TRUE(j.contains("error")) << what;
        EXPECT_EQ(j["error"]["type"], "authentication_error") << what;
        EXPECT_EQ(j["error"]["code"], 401) << what;
        EXPECT_EQ(r.body.find(kKey), std::string::npos) << "the key is never echoed";
    };
    expect_401(post("/v1/completions", body), "no key");
    expect_401(post("/v1/completions", body, {{"Authorization", "Bearer wrong"}}), "wrong key");
    expect_401(post("/v1/completions", body, {{"Authorization", "Bearer SK-TEST-0123456789"}}), "key in upper case");
    expect_401(post("/v1/completions", body, {{"Authorization", "Bearer " + kKey + "x"}}), "key with a suffix");
    expect_401(post("/v1/completions", body, {{"Authorization", kKey}}), "no Bearer scheme");
    expect_401(post("/v1/completions", body, {{"Authorization", "Basic " + kKey}}), "another scheme");
    expect_401(post("/generate", R"({"text":"hi"})"), "/generate");
    expect_401(post("/v1/chat/completions", "{}"), "chat");
    expect_401(get("/v1/models"), "/v1/models");
    expect_401(get("/metrics"), "/metrics");
    expect_401(get("/health/"), "/health/ (only the exact path is public)");
    expect_401(get("/v1/../health"), "/v1/../health");
    expect_401(post("/nonexistent", body), "an unknown route is not a 404 before auth");
    EXPECT_EQ(get("/health").status, 200);
    const auto ok = post("/v1/completions", body, {{"Authorization", "Bearer " + kKey}});
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "bearer " + kKey}}).status, 200)
        << "the scheme is case-insensitive";
    EXPECT_EQ(get("/metrics", {{"Authorization", "Bearer " + kKey}}).status, 200);
}

TEST_F(ServerTest, BodyLimitIs413) {
    auto so = default_server();
    so.max_body_bytes = 4096;
    start(default_engine(), so);
    const std::string big = R"({"prompt":")" + std::string(10000, 'a') + R"(","max_tokens":1})";
    const auto r = post("/v1/completions", big);
    EXPECT_EQ(r.status, 413) << r.body;
    const json j = r.j();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["code"], 413);
    // Under the limit: served.
    std::string ids = "[5";
    for (int i = 0; i < 400; ++i) ids += ",5";
    const auto small = post("/v1/completions", R"({"user":")" + std::string(2000, 'u') + R"(","prompt":)" + ids + "]" +
                                                   R"(,"max_tokens":1})");
    EXPECT_EQ(small.status, 200) << small.body;
    EXPECT_EQ(get("/health").status, 200);
}

TEST_F(ServerTest, OverloadGets503AndNothingIsLost) {
    auto eo = default_engine();
    eo.max_running_requests = 1;
    eo.max_queue = 2;
    gated_model *gate = start_gated(eo);
    ASSERT_NE(gate, nullptr);
    constexpr int kHeld = 3, kBurst = 12, kTokens = 20;
    std::vector<http_reply> held(kHeld), burst(kBurst);
    std::vector<std::thread> ts;
    auto send_held = [&](int i) {
        ts.emplace_back([&, i] {
            held[static_cast<std::size_t>(i)] =
                post("/v1/completions", greedy_completion("held " + std::to_string(i), kTokens, i > 0));
        });
    };
    // The loop runs the first request's prefill, then waits: 1 running; two more fill the queue (max_queue 2).
    gate->hold_after(1);
    send_held(0);
    EXPECT_TRUE(eventually([](const auto &m) { return m.at("vllm:num_requests_running") == 1; }));
    send_held(1);
    send_held(2);
    EXPECT_TRUE(eventually([](const auto &m) { return m.at("vllm:num_requests_waiting") == 2; }));
    // Every further request finds the queue full.
    for (int i = 0; i < kBurst; ++i)
        ts.emplace_back([&, i] {
            burst[static_cast<std::size_t>(i)] =
                post("/v1/completions", greedy_completion("burst " + std::to_string(i), 8, i % 2 == 1));
        });
    for (std::size_t i = kHeld; i < ts.size(); ++i) ts[i].join();
    gate->open();
    for (int i = 0; i < kHeld; ++i) ts[static_cast<std::size_t>(i)].join();
    for (const auto &r : burst) {
        EXPECT_EQ(r.status, 503) << r.body;
        const json j = r.j();
        ASSERT_TRUE(j.contains("error")) << r.body;
        EXPECT_EQ(j["error"]["type"], "unavailable_error");
        EXPECT_EQ(j["error"]["code"], 503);
        EXPECT_TRUE(r.headers.count("Retry-After"));
        EXPECT_NE(r.content_type, "text/event-stream") << "refused before any SSE byte, also for streams";
    }
    // The accepted ones ran to the end, undisturbed.
    for (const auto &r : held) {
        ASSERT_EQ(r.status, 200) << r.body;
        if (r.content_type == "text/event-stream") {
            EXPECT_TRUE(r.body.ends_with("data: [DONE]\n\n"));
            EXPECT_NE(r.body.find("\"finish_reason\":\"length\""), std::string::npos);
        } else {
            EXPECT_EQ(r.j()["usage"]["completion_tokens"], kTokens);
        }
    }
    EXPECT_TRUE(eventually([](const auto &m) {
        return m.at("fp4moe:kv_blocks_used") == 0 &&
               m.at("vllm:request_success_total{finished_reason=\"length\"}") == 3;
    }));
    const auto m = metrics();
    EXPECT_EQ(m.at("vllm:request_success_total{finished_reason=\"abort\"}"), 0);
    EXPECT_EQ(m.at("vllm:generation_tokens_total"), kHeld * kTokens);
    EXPECT_EQ(m.at("fp4moe:http_responses_total{status=\"503\"}"), kBurst);
    // Served again once the load is gone.
    EXPECT_EQ(post("/v1/completions", greedy_completion("after", 2)).status, 200);
}
TEST_F(ServerTest, DisconnectMidStreamAbortsAndFreesKv) {
    start();
    // What a bystander generates alone; it must not change while other clients hang up around it.
    const json bystander = greedy_completion("a bystander", 64);
    const auto alone = post("/v1/completions", bystander);
    ASSERT_EQ(alone.status, 200);
    struct variant {
        const char *what;
        bool chat;
        int n;
    };
    for (const variant v : {variant{"completion", false, 1}, variant{"chat", true, 1}, variant{"n=3", false, 3}}) {
        const auto before = metrics();
        json body = v.chat ? json{{"messages", {{{"role", "user"}, {"content", "talk"}}}}} : json{{"prompt", "talk"}};
        body["max_tokens"] = 900;
        body["ignore_eos"] = true;
        body["stream"] = true;
        body["n"] = v.n;
        http_reply during;
        std::thread other([&] { during = post("/v1/completions", bystander); });
        httplib::Client c("127.0.0.1", srv_->port());
        c.set_read_timeout(30, 0);
        int chunks = 0;
        httplib::Request req;
        req.method = "POST";
        req.path = v.chat ? "/v1/chat/completions" : "/v1/completions";
        req.body = body.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char *, std::size_t, std::uint64_t, std::uint64_t) {
            return ++chunks < 4; // read a few chunks, then hang up
        };
        c.send(req);
        EXPECT_GE(chunks, 4);
        c.stop();
        other.join();
        // Every choice of the request is aborted, its KV freed, within a few steps.
        const double aborted = before.at("vllm:request_success_total{finished_reason=\"abort\"}") + v.n;
        EXPECT_TRUE(eventually([&](const auto &m) {
            return m.at("vllm:request_success_total{finished_reason=\"abort\"}") == aborted &&
                   m.at("fp4moe:kv_blocks_used") == 0 && m.at("vllm:num_requests_running") == 0;
        })) << v.what;
        const auto after = metrics();
        EXPECT_LT(after.at("vllm:generation_tokens_total") - before.at("vllm:generation_tokens_total"), 900 * v.n + 64)
            << v.what << ": the request stopped early";
        ASSERT_EQ(during.status, 200) << v.what;
        EXPECT_EQ(during.j()["choices"][0]["text"], alone.j()["choices"][0]["text"])
            << v.what << ": a cancellation next to it does not change another request's output";
    }
}

TEST_F(ServerTest, DisconnectWhileWaitingNonStreamAborts) {
    auto eo = default_engine();
    eo.max_model_len = 4096;
    start(eo);
    // A client that gives up on a long non-streamed request (read timeout) has it aborted too.
    httplib::Client c("127.0.0.1", srv_->port());
    c.set_read_timeout(0, 200000);
    json body = greedy_completion("wait for me", 4000); // ~1 s of generation on the tiny model
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_FALSE(r) << "the client should have timed out; got HTTP " << r->status << ": " << r->body.substr(0, 200);
    c.stop();
    EXPECT_TRUE(eventually([](const auto &m) {
        return m.at("vllm:request_success_total{finished_reason=\"abort\"}") == 1 && m.at("fp4moe:kv_blocks_used") == 0;
    }));
    EXPECT_EQ(post("/v1/completions", greedy_completion("fresh", 3)).status, 200);
}

TEST_F(ServerTest, Soak64ConcurrentStreams) {
    auto eo = default_engine();
    eo.max_running_requests = 64;
    eo.kv_blocks = 1024;
    start(eo);
    constexpr int kStreams = 64, kRounds = 4;
    long rss_after_first = 0;
    for (int round = 0; round < kRounds; ++round) {
        std::atomic<int> errors{0};
        std::mutex mu;
        std::string first_error;
        std::vector<std::thread> ts;
        for (int i = 0; i < kStreams; ++i)
            ts.emplace_back([&, i] {
                // Mixed routes and lengths; sampled with a seed (temperature 0.8).
                const int n = 8 + (i * 7 + round) % 17;
                json b;
                std::string path;
                if (i % 3 == 0) {
                    path = "/generate";
                    b = {{"text", "soak " + std::to_string(i)},
                         {"sampling_params", {{"max_new_tokens", n}, {"temperature", 0.8}, {"ignore_eos", true}}},
                         {"stream", true}};
                } else {
                    path = i % 3 == 1 ? "/v1/completions" : "/v1/chat/completions";
                    b = {{"max_tokens", n},    {"temperature", 0.8}, {"seed", i},
                         {"ignore_eos", true}, {"stream", true},     {"stream_options", {{"include_usage", true}}}};
                    if (i % 3 == 1)
                        b["prompt"] = "soak " + std::to_string(i);
                    else
                        b["messages"] = {{{"role", "user"}, {"content", "soak " + std::to_string(i)}}};
                }
                const std::string s = stream_all(srv_->port(), path, b);
                bool good = s.size() > 14 && s.ends_with("data: [DONE]\n\n");
                if (good && path != "/generate") {
                    // The usage chunk counts exactly the tokens asked for.
                    const auto usage_at = s.rfind("data: {");
                    const json u = json::parse(s.substr(usage_at + 6, s.size() - usage_at - 6 - 16));
                    good = u["usage"]["completion_tokens"] == n;
                }
                if (!good) {
                    ++errors;
                    std::lock_guard lock(mu);
                    if (first_error.empty()) first_error = path + ": " + s.substr(0, 300);
                }
            });
        // Under this load /health and /metrics still answer promptly (they never wait for the engine loop).
        {
            const auto t0 = std::chrono::steady_clock::now();
            const auto h = get("/health");
            EXPECT_EQ(h.status, 200);
            EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "round " << round;
            EXPECT_EQ(get("/metrics").status, 200);
        }
        for (auto &t : ts) t.join();
        EXPECT_EQ(errors.load(), 0) << "round " << round << ": " << first_error;
        EXPECT_TRUE(eventually([](const auto &m) {
            return m.at("fp4moe:kv_blocks_used") == 0 && m.at("vllm:num_requests_running") == 0 &&
                   m.at("vllm:num_requests_waiting") == 0;
        })) << "round "
            << round;
        if (round == 0) rss_after_first = rss_kib();
    }
    const long growth = rss_kib() - rss_after_first;
    std::printf("soak: %d rounds x %d streams; RSS after round 1: %ld KiB, growth since: %ld KiB\n", kRounds, kStreams,
                rss_after_first, growth);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) // their shadow memory and quarantine grow by design
    EXPECT_LT(growth, 8 * 1024) << "RSS grew by " << growth << " KiB over " << kRounds - 1 << " rounds";
#endif
    const auto m = metrics();
    EXPECT_EQ(m.at("vllm:request_success_total{finished_reason=\"length\"}"), kStreams * kRounds);
    EXPECT_EQ(m.at("vllm:request_success_total{finished_reason=\"abort\"}"), 0);
    EXPECT_EQ(m.at("fp4moe:idle_kv_leaks_total"), 0);
}

TEST_F(ServerTest, GracefulShutdownFinishesTheStreamInFlight) {
    gated_model *gate = start_gated();
    ASSERT_NE(gate, nullptr);
    constexpr int kTokens = 40;
    std::string body;
    std::atomic<int> chunks{0};
    // Three steps run (3 tokens stream out), then the loop waits: the shutdown begins with the stream in flight.
    gate->hold_after(3);
    std::thread client([&] {
        httplib::Client c("127.0.0.1", srv_->port());
        c.set_read_timeout(60, 0);
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = greedy_completion("drain me", kTokens, true).dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char *d, std::size_t n, std::uint64_t, std::uint64_t) {
            body.append(d, n);
            ++chunks;
            return true;
        };
        c.send(req);
    });
    for (int i = 0; i < 10000 && chunks.load() < 3; ++i) std::this_thread::sleep_for(1ms);
    EXPECT_GE(chunks.load(), 3);
    std::thread stopper([&] { srv_->shutdown(true); });
    // While draining: /health is 503 and a new request gets 503 (the listener is still open).
    int health = 0;
    for (int i = 0; i < 5000 && health != 503; ++i) {
        health = get("/health").status;
        if (health != 503) std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(health, 503);
    const auto late = post("/v1/completions", greedy_completion("late", 2));
    EXPECT_EQ(late.status, 503) << late.body;
    gate->open();
    client.join();
    stopper.join();
    ASSERT_TRUE(body.ends_with("data: [DONE]\n\n")) << body.substr(0, 300);
    const auto ev = sse_payloads(body);
    std::string finish;
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "length") << "the stream ran to its end";
    EXPECT_EQ(eng_->stats().finished_length, 1);
    EXPECT_EQ(eng_->stats().generation_tokens, kTokens);
    EXPECT_EQ(eng_->stats().finished_abort, 0);
}
TEST_F(ServerTest, DisconnectWhileQueuedIsNeverScheduled) {
    auto eo = default_engine();
    eo.max_running_requests = 1;
    gated_model *gate = start_gated(eo);
    ASSERT_NE(gate, nullptr);
    constexpr int kTokens = 20;
    // The first request runs its prefill, then the loop waits; the second is queued behind it.
    gate->hold_after(1);
    http_reply first;
    std::thread running([&] { first = post("/v1/completions", greedy_completion("running", kTokens)); });
    EXPECT_TRUE(eventually([](const auto &m) { return m.at("vllm:num_requests_running") == 1; }));
    {
        // Its client gives up before it ever runs.
        httplib::Client c("127.0.0.1", srv_->port());
        c.set_read_timeout(0, 150000);
        auto r = c.Post("/v1/completions", greedy_completion("queued", 50, true).dump(), "application/json");
        EXPECT_FALSE(r && r->body.find("[DONE]") != std::string::npos) << "it cannot have completed";
        c.stop();
    }
    std::this_thread::sleep_for(400ms); // the server notices within its 50 ms poll and cancels
    gate->open();
    running.join();
    ASSERT_EQ(first.status, 200);
    EXPECT_TRUE(eventually([](const auto &m) {
        return m.at("vllm:request_success_total{finished_reason=\"abort\"}") == 1 &&
               m.at("vllm:request_success_total{finished_reason=\"length\"}") == 1 &&
               m.at("fp4moe:kv_blocks_used") == 0;
    }));
    // Exactly the running request's tokens were generated: the queued one never got a step.
    EXPECT_EQ(metrics().at("vllm:generation_tokens_total"), kTokens);
}
