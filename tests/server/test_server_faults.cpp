// A step that fails mid-generation (checklist: fault injected after k tokens): a stream gets an error event,
// a finish_reason "error" and `data: [DONE]`, then a clean end; a non-streamed response reports
// finish_reason "error"; the server keeps serving.
#include "runtime/step_model.h"
#include "server_fixture.h"

#include <atomic>

using namespace fp4moe;
using namespace fp4moe::test;

namespace {

/// The tiny model, whose forward call number `fail_at` (counted from 1) fails.
class failing_model final : public step_model {
public:
    explicit failing_model(std::unique_ptr<step_model> inner) : inner_(std::move(inner)) {}
    std::int64_t vocab_size() const override { return inner_->vocab_size(); }
    std::int64_t max_batch_tokens() const override { return inner_->max_batch_tokens(); }
    std::int64_t max_positions() const override { return inner_->max_positions(); }
    std::int64_t num_blocks() const override { return inner_->num_blocks(); }
    std::int64_t block_size() const override { return inner_->block_size(); }
    status forward(std::span<const seq_step> batch, std::vector<float> &logits) override {
        if (++calls == fail_at.load()) return {status_code::internal, "injected failure"};
        return inner_->forward(batch, logits);
    }
    std::atomic<int> calls{0}, fail_at{-1};

private:
    std::unique_ptr<step_model> inner_;
};

} // namespace

TEST_F(ServerTest, StepFailureIsAnErrorEventThenDone) {
    auto eo = default_engine();
    auto inner = make_step_model(tiny_.model->get(), eo.max_batch_tokens, eo.kv_blocks, eo.block_size);
    auto fm = std::make_unique<failing_model>(std::move(inner));
    failing_model *f = fm.get();
    auto e = engine::create(std::move(fm), tiny_.tok, eo);
    ASSERT_TRUE(e.ok()) << e.get_status().to_string();
    serve(std::move(e.value()));

    // Streamed: the 6th forward (prefill + 4 decode steps, then the failure) fails.
    f->fail_at = f->calls.load() + 6;
    const auto st = post("/v1/completions", greedy_completion("fail later", 50, true));
    ASSERT_EQ(st.status, 200);
    const auto ev = sse_payloads(st.body);
    ASSERT_GE(ev.size(), 3u);
    EXPECT_EQ(ev.back(), "[DONE]");
    int errors = 0, finishes = 0;
    std::string text;
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        if (c.contains("error")) {
            ++errors;
            EXPECT_EQ(c["error"]["code"], 500);
            EXPECT_NE(c["error"]["message"].get<std::string>().find("injected failure"), std::string::npos);
            continue;
        }
        text += c["choices"][0]["text"].get<std::string>();
        if (!c["choices"][0]["finish_reason"].is_null()) {
            ++finishes;
            EXPECT_EQ(c["choices"][0]["finish_reason"], "error");
        }
    }
    EXPECT_EQ(errors, 1);
    EXPECT_EQ(finishes, 1);

    // Non-streamed: 200 (the status went out first), finish_reason "error" and the reason.
    f->fail_at = f->calls.load() + 3;
    const auto ns = post("/v1/completions", greedy_completion("fail later", 50));
    ASSERT_EQ(ns.status, 200) << ns.body;
    const json j = ns.j();
    EXPECT_EQ(j["choices"][0]["finish_reason"], "error");
    EXPECT_NE(j["choices"][0]["error"].get<std::string>().find("injected failure"), std::string::npos);
    EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 50);

    // /generate reports it as SGLang does: an abort with the message.
    f->fail_at = f->calls.load() + 2;
    const auto g = post("/generate", json{{"text", "x"}, {"sampling_params", {{"max_new_tokens", 20}}}});
    ASSERT_EQ(g.status, 200);
    EXPECT_EQ(g.j()["meta_info"]["finish_reason"]["type"], "abort");

    // The server keeps serving.
    EXPECT_EQ(get("/health").status, 200);
    const auto ok = post("/v1/completions", greedy_completion("after", 5));
    ASSERT_EQ(ok.status, 200);
    EXPECT_EQ(ok.j()["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(eventually([](const auto &m) {
        return m.at("vllm:request_success_total{finished_reason=\"error\"}") == 3 && m.at("fp4moe:kv_blocks_used") == 0;
    }));
}
