// End to end: `run_bench_serve` against a fake server (httplib on an ephemeral loopback port) that streams
// /generate and /v1/completions with controlled delays. Counts must match what was sent, TTFT / ITL / TPOT must come
// out as the fake's timing, the concurrency limit must hold at the server, and failures (HTTP errors, error chunks,
// an unreachable server, a refused key) must be counted or reported, never dropped.
#include "fp4moe/tokenizer.h"
#include "loadgen/bench_serve.h"
#include "loadgen_test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <sys/socket.h>
#include <thread>

namespace fp4moe::loadgen {
namespace {

using namespace std::chrono_literals;

struct fake_server {
    httplib::Server svr;
    std::thread th;
    int port = 0;
    std::chrono::milliseconds ttft{60}, itl{20};
    std::string api_key;    ///< required when not empty
    bool no_models = false; ///< GET /v1/models answers 404 (a bare /generate server)
    int fail_every = 0;     ///< every Nth POST answers 503
    int error_chunk_at = 0; ///< that POST sends an error chunk after its first token
    std::atomic<int> posts{0}, in_flight{0}, max_in_flight{0};
    std::atomic<int> bad_bodies{0};

    fake_server() {
        std::signal(SIGPIPE, SIG_IGN); // as the CLI does: a closed socket fails a request, not the process
        svr.new_task_queue = [] { return new httplib::ThreadPool(64); };
        svr.Get("/v1/models", [this](const httplib::Request &req, httplib::Response &res) {
            if (!authorized(req, res)) return;
            if (no_models) {
                res.status = 404;
                res.set_content("no such route", "text/plain");
                return;
            }
            nlohmann::json j = {{"object", "list"}, {"data", {{{"id", test::tokenizer_dir()}, {"object", "model"}}}}};
            res.set_content(j.dump(), "application/json");
        });
        svr.Post("/generate", [this](const httplib::Request &req, httplib::Response &res) { serve(req, res, true); });
        svr.Post("/v1/completions",
                 [this](const httplib::Request &req, httplib::Response &res) { serve(req, res, false); });
        // httplib (as Debian builds it) listens with a backlog of 5: a burst of 8 connections would see a 1-s SYN
        // retry. Keep the listening socket and listen() again with a real backlog (Linux updates it).
        auto listen_fd = std::make_shared<int>(-1);
        svr.set_socket_options([listen_fd](socket_t sock) {
            int yes = 1;
            ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
            *listen_fd = static_cast<int>(sock);
        });
        port = svr.bind_to_any_port("127.0.0.1");
        if (*listen_fd >= 0) ::listen(*listen_fd, 256);
        th = std::thread([this] { svr.listen_after_bind(); });
        while (!svr.is_running()) std::this_thread::sleep_for(1ms);
    }
    ~fake_server() {
        svr.stop();
        th.join();
    }

    void leave(bool &left) {
        if (!left) --in_flight;
        left = true;
    }

    bool authorized(const httplib::Request &req, httplib::Response &res) {
        if (api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key) return true;
        res.status = 401;
        res.set_content("{\"error\": {\"message\": \"invalid api key\"}}", "application/json");
        return false;
    }

    void serve(const httplib::Request &req, httplib::Response &res, bool sglang) {
        if (!authorized(req, res)) return;
        const int k = ++posts;
        nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
        std::int64_t n = 0;
        if (sglang) {
            const bool has_prompt = body.contains("text") || body.contains("input_ids");
            if (!has_prompt || body["sampling_params"]["ignore_eos"] != true) ++bad_bodies;
            n = body["sampling_params"]["max_new_tokens"].get<std::int64_t>();
        } else {
            if (body["model"] != test::tokenizer_dir() || body["stream_options"]["include_usage"] != true ||
                body["ignore_eos"] != true)
                ++bad_bodies;
            n = body["max_tokens"].get<std::int64_t>();
        }
        if (fail_every && k % fail_every == 0) {
            res.status = 503;
            res.set_content("{\"error\": {\"message\": \"queue full\"}}", "application/json");
            return;
        }
        if (body["stream"] == false) { // the whole answer at once, after the whole generation time
            std::this_thread::sleep_for(ttft + itl * (n - 1));
            const std::string text(static_cast<std::size_t>(n), 'a');
            nlohmann::json j = sglang ? nlohmann::json{{"text", text}, {"meta_info", {{"completion_tokens", n}}}}
                                      : nlohmann::json{{"choices", {{{"index", 0}, {"text", text}}}},
                                                       {"usage", {{"completion_tokens", n}}}};
            res.set_content(j.dump(), "application/json");
            return;
        }
        const int now = ++in_flight;
        for (int m = max_in_flight.load(); now > m && !max_in_flight.compare_exchange_weak(m, now);) {
        }
        auto i = std::make_shared<std::int64_t>(0);
        auto left = std::make_shared<bool>(false); // leave before the last bytes go out: the client may start
                                                   // its next request before httplib runs the releaser
        const bool inject = k == error_chunk_at;
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, i, n, sglang, inject, left](size_t, httplib::DataSink &sink) {
                std::this_thread::sleep_for(*i == 0 ? ttft : itl);
                ++*i;
                std::string chunk;
                if (inject && *i == 2) {
                    chunk = "data: {\"error\": {\"message\": \"injected failure\"}}\n\n";
                    leave(*left);
                    sink.write(chunk.data(), chunk.size());
                    sink.done();
                    return true;
                }
                if (sglang) {
                    nlohmann::json j = {{"text", std::string(static_cast<std::size_t>(*i), 'a')},
                                        {"meta_info", {{"completion_tokens", *i}}}};
                    chunk = "data: " + j.dump() + "\n\n";
                } else {
                    nlohmann::json j = {{"object", "text_completion"},
                                        {"choices", {{{"index", 0}, {"text", "a"}, {"finish_reason", nullptr}}}}};
                    chunk = "data: " + j.dump() + "\n\n";
                }
                if (*i == n) {
                    if (!sglang)
                        chunk += "data: {\"choices\": [], \"usage\": {\"completion_tokens\": " + std::to_string(n) +
                                 "}}\n\n";
                    chunk += "data: [DONE]\n\n";
                }
                if (*i == n) leave(*left);
                sink.write(chunk.data(), chunk.size());
                if (*i == n) sink.done();
                return true;
            },
            [this, left](bool) { leave(*left); });
    }
};

bench_serve_options options(const fake_server &f) {
    bench_serve_options o;
    o.ep.port = f.port;
    o.num_prompts = 8;
    o.random_input_len = 16;
    o.random_output_len = 8;
    o.random_range_ratio = 1.0; // every request exactly 8 tokens
    o.warmup_requests = 1;
    o.warmup_pause_s = 0;
    o.tokenize_prompt = true;
    return o;
}

void expect_timing(const bench_metrics &m, const fake_server &f) {
    const double ttft = f.ttft.count(), itl = f.itl.count();
    EXPECT_GE(m.ttft_ms.median, ttft);
    EXPECT_LT(m.ttft_ms.median, ttft + 60);
    EXPECT_NEAR(m.itl_ms.median, itl, 8);
    EXPECT_NEAR(m.tpot_ms.median, itl, 8);
    EXPECT_GE(m.e2e_ms.median, ttft + 7 * itl);
}

TEST(loadgen_bench_serve, SglangSweepAgainstFakeServer) {
    fake_server f;
    auto o = options(f);
    o.max_concurrency = {2, 8};
    std::string printed;
    auto r = run_bench_serve(o, [&](const std::string &s) { printed += s; });
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    ASSERT_EQ(r.value().passes.size(), 2u);
    EXPECT_EQ(f.bad_bodies.load(), 0);
    EXPECT_EQ(f.posts.load(), 2 * (8 + 1)); // 8 requests + 1 warmup per pass
    EXPECT_LE(f.max_in_flight.load(), 8);
    for (const auto &p : r.value().passes) {
        const auto &m = p.metrics;
        EXPECT_EQ(m.completed, 8);
        EXPECT_EQ(m.failed, 0);
        EXPECT_EQ(m.total_input, 8 * 16);
        EXPECT_EQ(m.total_output, 8 * 8);
        expect_timing(m, f);
        // sglang's per-second count is coarse: every request overlaps the first second here.
        EXPECT_EQ(m.max_concurrent_requests, 8);
    }
    // Concurrency 2: four waves of ~200 ms; concurrency 8: one wave.
    const auto &c2 = r.value().passes[0].metrics, &c8 = r.value().passes[1].metrics;
    EXPECT_GE(c2.duration_s, 4 * 0.2);
    EXPECT_LT(c8.duration_s, c2.duration_s * 0.6);
    EXPECT_NEAR(c2.concurrency, 2, 0.3);
    EXPECT_NE(printed.find("Max request concurrency:                 2"), std::string::npos);
    EXPECT_NE(printed.find("Max request concurrency:                 8"), std::string::npos);
    EXPECT_EQ(r.value().meta.tokenizer, test::tokenizer_dir()); // found through /v1/models
}

TEST(loadgen_bench_serve, OpenaiBackendWithTextPrompts) {
    fake_server f;
    f.itl = 15ms;
    auto o = options(f);
    o.backend = backend_kind::openai;
    o.tokenize_prompt = false;
    o.max_concurrency = {4};
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(f.bad_bodies.load(), 0);
    const auto &m = r.value().passes[0].metrics;
    EXPECT_EQ(m.completed, 8);
    EXPECT_EQ(m.total_output, 64); // from usage
    auto tok = tokenizer::load(test::tokenizer_dir());
    ASSERT_TRUE(tok.ok());
    EXPECT_EQ(m.total_output_retokenized, 8 * static_cast<std::int64_t>(tok.value().encode("aaaaaaaa").value().size()));
    expect_timing(m, f);
}

TEST(loadgen_bench_serve, DisableStreamTtftIsTheLatency) {
    fake_server f;
    auto o = options(f);
    o.disable_stream = true;
    o.num_prompts = 4;
    o.max_concurrency = {4};
    for (auto b : {backend_kind::sglang, backend_kind::openai}) {
        o.backend = b;
        auto r = run_bench_serve(o, [](const std::string &) {});
        ASSERT_TRUE(r.ok()) << r.get_status().to_string();
        const auto &m = r.value().passes[0].metrics;
        EXPECT_EQ(m.completed, 4);
        EXPECT_EQ(m.total_output, 32);
        EXPECT_DOUBLE_EQ(m.ttft_ms.mean, m.e2e_ms.mean);
        EXPECT_GE(m.e2e_ms.median, 60 + 7 * 20);
        EXPECT_EQ(m.itl_ms.max, 0);
    }
}

TEST(loadgen_bench_serve, FailuresAreCountedWithTheirErrors) {
    fake_server f;
    f.fail_every = 4;     // POSTs 4 and 8 (the warmup is POST 1)
    f.error_chunk_at = 6; // POST 6 streams one token, then an error chunk
    auto o = options(f);
    o.max_concurrency = {1};
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const auto &m = r.value().passes[0].metrics;
    EXPECT_EQ(f.max_in_flight.load(), 1); // the limit holds at the server
    EXPECT_EQ(m.completed, 5);
    EXPECT_EQ(m.failed, 3);
    EXPECT_EQ(m.total_output, 5 * 8);
    std::string all;
    for (const auto &e : m.errors) all += e + "\n";
    EXPECT_NE(all.find("2 x POST http://127.0.0.1:" + std::to_string(f.port) + "/generate: HTTP 503"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("queue full"), std::string::npos);
    EXPECT_NE(all.find("1 x POST"), std::string::npos);
    EXPECT_NE(all.find("injected failure"), std::string::npos);
}

TEST(loadgen_bench_serve, WarmupFailureStopsWithTheError) {
    fake_server f;
    f.fail_every = 1;
    auto o = options(f);
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("warmup failed"), std::string::npos);
    EXPECT_NE(r.get_status().message().find("HTTP 503"), std::string::npos);
}

TEST(loadgen_bench_serve, UnreachableServerAndRefusedKeyNameTheUrl) {
    int closed_port = 0;
    {
        fake_server f;
        closed_port = f.port;
    }
    bench_serve_options o;
    o.ep.port = closed_port;
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("http://127.0.0.1:" + std::to_string(closed_port) + "/v1/models"),
              std::string::npos)
        << r.get_status().message();

    fake_server f;
    f.api_key = "secret";
    auto o2 = options(f);
    auto r2 = run_bench_serve(o2, [](const std::string &) {});
    ASSERT_FALSE(r2.ok());
    EXPECT_NE(r2.get_status().message().find("HTTP 401"), std::string::npos) << r2.get_status().message();
    EXPECT_NE(r2.get_status().message().find("invalid api key"), std::string::npos);
    o2.api_key = "secret";
    o2.num_prompts = 2;
    auto r3 = run_bench_serve(o2, [](const std::string &) {});
    ASSERT_TRUE(r3.ok()) << r3.get_status().to_string();
    EXPECT_EQ(r3.value().passes[0].metrics.completed, 2);
}

TEST(loadgen_bench_serve, ServerWithoutModelsRouteNeedsTokenizer) {
    fake_server f;
    f.no_models = true;
    auto o = options(f);
    o.num_prompts = 2;
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("HTTP 404 no such route"), std::string::npos) << r.get_status().message();
    o.tokenizer = test::tokenizer_dir();
    std::string printed;
    auto r2 = run_bench_serve(o, [&](const std::string &s) { printed += s; });
    ASSERT_TRUE(r2.ok()) << r2.get_status().to_string();
    EXPECT_EQ(r2.value().passes[0].metrics.completed, 2);
    EXPECT_NE(printed.find("going on with --tokenizer"), std::string::npos);
}

TEST(loadgen_bench_serve, PoissonArrivalsSpreadTheRequests) {
    fake_server f;
    f.ttft = 5ms;
    f.itl = 1ms;
    auto o = options(f);
    o.num_prompts = 20;
    o.request_rate = 40;     // mean gap 25 ms: about 0.5 s for 20 arrivals
    o.output_details = true; // keep the per-request results
    auto r = run_bench_serve(o, [](const std::string &) {});
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const auto &p = r.value().passes[0];
    EXPECT_EQ(p.metrics.completed, 20);
    // The gaps are numpy's exponential(1/40) drawn after the dataset (fixed lengths draw nothing; then the 20
    // token offsets); with no concurrency limit each request starts at its arrival.
    auto vocab = hf_base_vocab_size(test::tokenizer_dir());
    ASSERT_TRUE(vocab.ok());
    numpy_legacy_rng rng(1);
    rng.randint(0, vocab.value(), 20);
    double arrival = 0;
    for (std::size_t i = 0; i < 20; ++i) {
        EXPECT_GE(p.outputs[i].start_time, arrival - 1e-3) << i;
        EXPECT_LT(p.outputs[i].start_time, arrival + 0.1) << i;
        arrival += rng.exponential(1.0 / 40);
    }
}

} // namespace
} // namespace fp4moe::loadgen
