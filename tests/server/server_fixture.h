// Shared by the server tests: the tiny checkpoint (make-model --preset tiny, cpu.ref), an engine and an
// http_server on an ephemeral loopback port, and small HTTP helpers on httplib::Client. Every call has a
// timeout, so a hung server fails the test instead of hanging it.
#pragma once

#include "../runtime/tiny_checkpoint.h"
#include "runtime/engine.h"
#include "runtime/step_model.h"
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fp4moe::test {

using json = nlohmann::json;
using namespace std::chrono_literals;

/// The tiny model behind a gate: after hold_after(k), the next k forward calls run and the one after waits
/// until open(). Lets a test hold the engine loop (requests stay running / queued for as long as it needs)
/// without depending on the model's speed. The engine publishes its stats after each step, so the state after
/// the k-th step is what /metrics shows while the loop waits.
class gated_model final : public step_model {
public:
    explicit gated_model(std::unique_ptr<step_model> inner) : inner_(std::move(inner)) {}
    void hold_after(int k) {
        std::lock_guard lock(mu_);
        pass_ = calls_ + k;
    }
    void open() {
        {
            std::lock_guard lock(mu_);
            pass_ = std::numeric_limits<int>::max();
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
            const int n = ++calls_;
            cv_.wait(lock, [&] { return n <= pass_; });
        }
        return inner_->forward(batch, logits);
    }

private:
    std::unique_ptr<step_model> inner_;
    std::mutex mu_;
    std::condition_variable cv_;
    int calls_ = 0;
    int pass_ = std::numeric_limits<int>::max();
};

struct http_reply {
    int status = 0; ///< 0: no reply (connection error or timeout)
    std::string body;
    std::string content_type;
    httplib::Headers headers;
    json j() const { return json::parse(body, nullptr, false); }
};

class ServerTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { tiny_.create("test_server"); }
    static void TearDownTestSuite() { tiny_.destroy(); }
    void TearDown() override {
        if (gate_) gate_->open(); // never leave the loop waiting (a failed test may not have opened it)
        gate_ = nullptr;
        srv_.reset();
        if (eng_) eng_->shutdown(false);
        eng_.reset();
    }

    static engine_options default_engine() {
        engine_options o;
        o.max_running_requests = 16;
        o.max_batch_tokens = 64; // the tiny fixture's model buffers
        o.max_queue = 256;
        o.kv_blocks = 512;
        o.max_model_len = 1024;
        return o;
    }
    static server::server_options default_server() {
        server::server_options o;
        o.port = 0;
        o.served_model_name = "tiny";
        o.http_threads = 80;
        return o;
    }

    void start(engine_options eo = default_engine(), server::server_options so = default_server()) {
        auto e = engine::create(tiny_.model->get(), tiny_.tok, eo);
        ASSERT_TRUE(e.ok()) << e.get_status().to_string();
        serve(std::move(e.value()), so);
    }
    /// Serves an engine on the tiny model behind a gate (see gated_model); returns the gate.
    gated_model *start_gated(engine_options eo = default_engine(), server::server_options so = default_server()) {
        auto g = std::make_unique<gated_model>(
            make_step_model(tiny_.model->get(), eo.max_batch_tokens, eo.kv_blocks, eo.block_size));
        gated_model *gate = g.get();
        auto e = engine::create(std::move(g), tiny_.tok, eo);
        EXPECT_TRUE(e.ok()) << e.get_status().to_string();
        if (!e.ok()) return nullptr;
        serve(std::move(e.value()), so);
        gate_ = gate;
        return gate;
    }
    /// Serves an engine the test built itself (e.g. on a wrapped step_model).
    void serve(std::unique_ptr<engine> e, server::server_options so = default_server()) {
        eng_ = std::move(e);
        so.model_path = tiny_.dir;
        auto s = server::http_server::create(*eng_, *tiny_.tok, so);
        ASSERT_TRUE(s.ok()) << s.get_status().to_string();
        srv_ = std::move(s.value());
        srv_->start();
    }

    httplib::Client client(std::chrono::milliseconds read_timeout = 60s) const {
        httplib::Client c("127.0.0.1", srv_->port());
        c.set_connection_timeout(5, 0);
        c.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(read_timeout).count(),
                           static_cast<time_t>((read_timeout.count() % 1000) * 1000));
        c.set_write_timeout(10, 0);
        return c;
    }

    static http_reply to_reply(const httplib::Result &r) {
        http_reply out;
        if (!r) {
            out.body = "no reply: " + httplib::to_string(r.error());
            return out;
        }
        out.status = r->status;
        out.body = r->body;
        out.content_type = r->get_header_value("Content-Type");
        out.headers = r->headers;
        return out;
    }

    http_reply post(const std::string &path, const std::string &body, httplib::Headers h = {},
                    const std::string &content_type = "application/json") const {
        auto c = client();
        return to_reply(c.Post(path.c_str(), h, body, content_type.c_str()));
    }
    http_reply post(const std::string &path, const json &body, httplib::Headers h = {}) const {
        return post(path, body.dump(), std::move(h));
    }
    http_reply post(const std::string &path, const char *body, httplib::Headers h = {}) const {
        return post(path, std::string(body), std::move(h));
    }
    http_reply get(const std::string &path, httplib::Headers h = {}) const {
        auto c = client();
        return to_reply(c.Get(path.c_str(), h));
    }

    /// The `data: ` payloads of an SSE body, in order; fails the test on bad framing.
    static std::vector<std::string> sse_payloads(const std::string &body) {
        std::vector<std::string> out;
        std::size_t pos = 0;
        while (pos < body.size()) {
            const auto end = body.find("\n\n", pos);
            EXPECT_NE(end, std::string::npos) << "an event is not terminated by a blank line";
            if (end == std::string::npos) break;
            const std::string ev = body.substr(pos, end - pos);
            EXPECT_EQ(ev.rfind("data: ", 0), 0u) << "event without the data: prefix: " << ev;
            out.push_back(ev.substr(6));
            pos = end + 2;
        }
        return out;
    }

    /// Parses the Prometheus exposition into "name{labels}" -> value.
    std::map<std::string, double> metrics() const {
        std::map<std::string, double> m;
        const auto r = get("/metrics");
        EXPECT_EQ(r.status, 200);
        std::size_t pos = 0;
        while (pos < r.body.size()) {
            auto end = r.body.find('\n', pos);
            if (end == std::string::npos) end = r.body.size();
            const std::string line = r.body.substr(pos, end - pos);
            pos = end + 1;
            if (line.empty() || line[0] == '#') continue;
            const auto sp = line.rfind(' ');
            EXPECT_NE(sp, std::string::npos) << line;
            if (sp == std::string::npos) continue;
            std::string key = line.substr(0, sp);
            // Drop the model_name label so that tests can name series briefly.
            const std::string ml = "model_name=\"tiny\"";
            if (auto p = key.find(ml); p != std::string::npos) {
                key.erase(p, ml.size());
                if (p < key.size() && key[p] == ',') key.erase(p, 1);
                if (key.ends_with("{}")) key.resize(key.size() - 2);
            }
            m[key] = std::stod(line.substr(sp + 1));
        }
        return m;
    }

    /// Polls `pred(metrics())` until true or 10 s passed.
    template <typename P>
    bool eventually(P pred) const {
        for (int i = 0; i < 200; ++i) {
            if (pred(metrics())) return true;
            std::this_thread::sleep_for(50ms);
        }
        return false;
    }

    static long rss_kib() {
        std::ifstream f("/proc/self/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
        return -1;
    }

    static inline tiny_checkpoint tiny_;
    std::unique_ptr<engine> eng_;
    std::unique_ptr<server::http_server> srv_;
    gated_model *gate_ = nullptr; ///< owned by eng_
};

/// A greedy request body for /v1/completions.
inline json greedy_completion(const std::string &prompt, int max_tokens, bool stream = false) {
    return {{"model", "tiny"},  {"prompt", prompt},   {"max_tokens", max_tokens},
            {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

} // namespace fp4moe::test
