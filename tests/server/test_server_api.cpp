// The HTTP API against a live server on loopback (tiny model, CPU): every validation case of the reliability
// checklist, the response and stream formats of the OpenAI and SGLang routes, streamed == non-streamed greedy
// output, n, stop strings, logprobs, /v1/models, /health, /metrics.
#include "server_fixture.h"

using namespace fp4moe;
using namespace fp4moe::test;

namespace {

struct bad_case {
    const char *path;
    std::string body;
    int status;
    const char *param; ///< nullptr: param must be null
};

/// Checks the OpenAI error envelope: {"error": {"message": non-empty, "type", "param", "code": status}}.
void expect_error(const http_reply &r, int status, const char *param, const std::string &what) {
    EXPECT_EQ(r.status, status) << what << " -> " << r.body;
    const json j = r.j();
    ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_object()) << what << " -> " << r.body;
    const json &e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << what;
    EXPECT_TRUE(e["type"].is_string()) << what;
    EXPECT_EQ(e["code"], status) << what;
    if (param)
        EXPECT_EQ(e["param"], param) << what << " -> " << r.body;
    else
        EXPECT_TRUE(e["param"].is_null()) << what << " -> " << r.body;
    EXPECT_LT(r.body.size(), 2048u) << what << ": error bodies stay small";
    EXPECT_EQ(r.content_type, "application/json") << what;
}

std::string chat_body(const std::string &extra) {
    return R"({"model":"tiny","messages":[{"role":"user","content":"hi"}])" + extra + "}";
}
std::string cmpl_body(const std::string &extra) {
    return R"({"model":"tiny","prompt":"hi")" + extra + "}";
}

} // namespace

TEST_F(ServerTest, ValidationErrorsNameTheParameter) {
    start();
    const std::int64_t vocab = tiny_.tok->vocab_size();
    const std::string long_ids = [] {
        std::string s = "[";
        for (int i = 0; i < 1024; ++i) s += (i ? ",5" : "5");
        return s + "]";
    }();
    std::string many_stops = "[";
    for (int i = 0; i < 17; ++i) many_stops += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
    many_stops += "]";
    const std::vector<bad_case> cases = {
        // 1. malformed bodies
        {"/v1/completions", R"({"model":)", 400, nullptr},
        {"/v1/completions", std::string("\x00\xff", 2), 400, nullptr},
        {"/v1/completions", "[]", 400, nullptr},
        {"/v1/completions", "42", 400, nullptr},
        {"/v1/completions", "null", 400, nullptr},
        {"/v1/completions", "\"s\"", 400, nullptr},
        {"/v1/completions", cmpl_body(R"(,"temperature":NaN)"), 400, nullptr},
        {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"\ud800"}]})", 400, nullptr},
        // 2. wrong types
        {"/v1/completions", cmpl_body(R"(,"max_tokens":"10")"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"temperature":"hot")"), 400, "temperature"},
        {"/v1/completions", cmpl_body(R"(,"stop":5)"), 400, "stop"},
        {"/v1/completions", cmpl_body(R"(,"stream":"yes")"), 400, "stream"},
        {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages"},
        {"/v1/chat/completions", R"({"messages":[123]})", 400, "messages[0]"},
        {"/v1/chat/completions", R"({"messages":[{"role":123}]})", 400, "messages[0].role"},
        {"/v1/chat/completions", R"({"messages":[{"role":"user","content":123}]})", 400, "messages[0].content"},
        {"/v1/chat/completions", R"({"messages":[{"role":"wizard","content":"x"}]})", 400, "messages[0].role"},
        // 3. max_tokens values
        {"/v1/completions", cmpl_body(R"(,"max_tokens":0)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":-1)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":-9223372036854775808)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":9223372036854775808)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":99999999999999999999)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":1e309)"), 400, nullptr},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":1.5)"), 400, "max_tokens"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":true)"), 400, "max_tokens"},
        {"/v1/chat/completions", chat_body(R"(,"max_completion_tokens":0)"), 400, "max_completion_tokens"},
        // 4./5. context limits (max_model_len 1024), also streamed: refused before any SSE byte
        {"/v1/completions", R"({"prompt":)" + long_ids + "}", 400, "prompt"},
        {"/v1/completions", R"({"stream":true,"prompt":)" + long_ids + "}", 400, "prompt"},
        {"/v1/completions", cmpl_body(R"(,"max_tokens":1024)"), 400, "max_tokens"},
        {"/v1/chat/completions", chat_body(R"(,"max_tokens":5000,"stream":true)"), 400, "max_tokens"},
        // 6. unknown model
        {"/v1/completions", R"({"model":"gpt-4","prompt":"hi"})", 404, "model"},
        {"/v1/chat/completions", R"({"model":"gpt-4","messages":[{"role":"user","content":"x"}]})", 404, "model"},
        // 7. sampling ranges
        {"/v1/completions", cmpl_body(R"(,"temperature":-1)"), 400, "temperature"},
        {"/v1/completions", cmpl_body(R"(,"temperature":1e308)"), 400, "temperature"},
        {"/v1/completions", cmpl_body(R"(,"top_p":0)"), 400, "top_p"},
        {"/v1/completions", cmpl_body(R"(,"top_p":1.5)"), 400, "top_p"},
        {"/v1/completions", cmpl_body(R"(,"top_k":-2)"), 400, "top_k"},
        {"/v1/completions", cmpl_body(R"(,"top_k":0.01)"), 400, "top_k"},
        {"/v1/completions", cmpl_body(R"(,"min_p":2)"), 400, "min_p"},
        {"/v1/completions", cmpl_body(R"(,"presence_penalty":3)"), 400, "presence_penalty"},
        {"/v1/completions", cmpl_body(R"(,"frequency_penalty":-2.5)"), 400, "frequency_penalty"},
        {"/v1/completions", cmpl_body(R"(,"repetition_penalty":0)"), 400, "repetition_penalty"},
        {"/v1/completions", cmpl_body(R"(,"seed":-2)"), 400, "seed"},
        {"/v1/completions", cmpl_body(R"(,"seed":18446744073709551615)"), 400, "seed"},
        {"/v1/completions", cmpl_body(R"(,"n":0)"), 400, "n"},
        // 8. caps
        {"/v1/completions", cmpl_body(R"(,"n":17)"), 400, "n"},
        {"/v1/completions", cmpl_body(R"(,"logprobs":5)"), 400, "logprobs"},
        {"/v1/chat/completions", chat_body(R"(,"logprobs":true,"top_logprobs":3)"), 400, "top_logprobs"},
        {"/v1/chat/completions", chat_body(R"(,"logprobs":true,"top_logprobs":21)"), 400, "top_logprobs"},
        {"/v1/completions", cmpl_body(R"(,"stop":)" + many_stops), 400, "stop"},
        {"/v1/completions", cmpl_body(R"(,"stop":[")" + std::string(1025, 'x') + "\"]"), 400, "stop"},
        {"/v1/completions", cmpl_body(R"(,"stop":[""])"), 400, "stop"},
        {"/v1/completions", cmpl_body(R"(,"logit_bias":{"5":1})"), 400, "logit_bias"},
        {"/v1/chat/completions", chat_body(R"(,"tools":[{"type":"function"}])"), 400, "tools"},
        // 9. empty inputs
        {"/v1/completions", R"({"prompt":""})", 400, "prompt"},
        {"/v1/completions", R"({"prompt":[]})", 400, "prompt"},
        {"/v1/completions", R"({"prompt":[[]]})", 400, "prompt"},
        {"/v1/completions", R"({"max_tokens":3})", 400, "prompt"},
        {"/v1/chat/completions", R"({"messages":[]})", 400, "messages"},
        // 10. token ids
        {"/v1/completions", R"({"prompt":[-1]})", 400, "prompt"},
        {"/v1/completions", R"({"prompt":[)" + std::to_string(vocab) + "]}", 400, "prompt"},
        {"/v1/completions", R"({"prompt":[2147483648]})", 400, "prompt"},
        {"/v1/completions", R"({"prompt":[1.5]})", 400, "prompt[0]"},
        {"/v1/completions", cmpl_body(R"(,"stop_token_ids":[)" + std::to_string(vocab) + "]"), 400, "stop_token_ids"},
        // 11. stream_options without stream
        {"/v1/completions", cmpl_body(R"(,"stream_options":{"include_usage":true})"), 400, "stream_options"},
        // SGLang /generate
        {"/generate", R"({})", 400, "text"},
        {"/generate", R"({"text":"hi","input_ids":[1]})", 400, "text"},
        {"/generate", R"({"input_ids":[-1]})", 400, "input_ids"},
        {"/generate", R"({"text":["a","b"]})", 400, "text"},
        {"/generate", R"({"text":"hi","sampling_params":{"max_new_tokens":0}})", 400, "sampling_params.max_new_tokens"},
        {"/generate", R"({"text":"hi","sampling_params":{"temperature":-1}})", 400, "sampling_params.temperature"},
        {"/generate", R"({"text":"hi","sampling_params":{"top_p":2}})", 400, "sampling_params.top_p"},
        {"/generate", R"({"text":"hi","sampling_params":{"regex":"a+"}})", 400, "sampling_params.regex"},
        {"/generate", R"({"text":"hi","sampling_params":"x"})", 400, "sampling_params"},
    };
    for (const auto &c : cases) {
        const auto r = post(c.path, c.body);
        expect_error(r, c.status, c.param, std::string(c.path) + " " + c.body.substr(0, 120));
    }
    // 38. A 1 MiB invalid body: a small error, the input not echoed.
    expect_error(post("/v1/completions", R"({"prompt": ")" + std::string(1 << 20, 'a')), 400, nullptr,
                 "1 MiB, unterminated");
    // 12. Content-Type
    expect_error(post("/v1/completions", cmpl_body(""), {}, "text/plain"), 415, nullptr, "text/plain body");
    // An unknown route is a 404 in the same envelope.
    expect_error(post("/v1/nope", cmpl_body("")), 404, nullptr, "unknown route");

    // Still healthy: /health 200 and a normal request succeeds.
    EXPECT_EQ(get("/health").status, 200);
    const auto ok = post("/v1/completions", greedy_completion("hello", 4));
    ASSERT_EQ(ok.status, 200) << ok.body;
    EXPECT_EQ(ok.j()["usage"]["completion_tokens"], 4);
    // None of the refused requests reached the engine.
    EXPECT_TRUE(eventually([](const auto &m) {
        return m.at("vllm:request_success_total{finished_reason=\"length\"}") == 1 &&
               m.at("vllm:request_success_total{finished_reason=\"abort\"}") == 0 &&
               m.at("vllm:request_success_total{finished_reason=\"stop\"}") == 0;
    }));
}

TEST_F(ServerTest, UnicodeInputsNeverCrash) {
    start();
    // NUL, CJK, emoji, RTL + ZWJ, special-token text: all 200 (well-defined outputs), server stays healthy.
    for (const std::string &text :
         {std::string("a\\u0000b"), std::string("日本語のテキスト"), std::string("👩‍👩‍👧‍👦 emoji"),
          std::string("שלום\\u200dעולם"), std::string("<|user|> [gMASK] <|endoftext|>")}) {
        const auto r = post("/v1/completions", R"({"prompt":")" + text + R"(","max_tokens":3,"temperature":0})");
        EXPECT_EQ(r.status, 200) << text << " -> " << r.body;
    }
    std::string big = R"({"prompt":")";
    for (int i = 0; i < 200; ++i) big += "🙂";
    big += R"(","max_tokens":2})";
    EXPECT_EQ(post("/v1/completions", big).status, 200);
    EXPECT_EQ(get("/health").status, 200);
}

TEST_F(ServerTest, CompletionStreamMatchesNonStream) {
    start();
    const auto plain = post("/v1/completions", greedy_completion("The quick brown fox", 24));
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json p = plain.j();
    EXPECT_EQ(p["object"], "text_completion");
    EXPECT_EQ(p["model"], "tiny");
    ASSERT_EQ(p["choices"].size(), 1u);
    EXPECT_EQ(p["choices"][0]["finish_reason"], "length");
    const auto ids = tiny_.tok->encode("The quick brown fox", true, true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(p["usage"]["prompt_tokens"], ids.value().size());
    EXPECT_EQ(p["usage"]["completion_tokens"], 24);
    EXPECT_EQ(p["usage"]["total_tokens"], ids.value().size() + 24);

    json body = greedy_completion("The quick brown fox", 24, true);
    body["stream_options"] = {{"include_usage", true}};
    const auto st = post("/v1/completions", body);
    ASSERT_EQ(st.status, 200) << st.body;
    EXPECT_EQ(st.content_type, "text/event-stream");
    const auto ev = sse_payloads(st.body);
    ASSERT_GE(ev.size(), 3u);
    EXPECT_EQ(ev.back(), "[DONE]");
    std::string text;
    int finishes = 0;
    std::string id;
    for (std::size_t i = 0; i + 2 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        if (id.empty()) id = c["id"];
        EXPECT_EQ(c["id"], id) << "the id is constant over the stream";
        EXPECT_EQ(c["object"], "text_completion");
        EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
        ASSERT_EQ(c["choices"].size(), 1u);
        text += c["choices"][0]["text"].get<std::string>();
        if (!c["choices"][0]["finish_reason"].is_null()) {
            ++finishes;
            EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
        }
    }
    EXPECT_EQ(finishes, 1);
    EXPECT_EQ(text, p["choices"][0]["text"].get<std::string>());
    const json usage = json::parse(ev[ev.size() - 2]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"], p["usage"]);

    // Without include_usage there is no usage chunk and no usage key.
    const auto st2 = post("/v1/completions", greedy_completion("The quick brown fox", 24, true));
    const auto ev2 = sse_payloads(st2.body);
    for (std::size_t i = 0; i + 1 < ev2.size(); ++i) EXPECT_FALSE(json::parse(ev2[i]).contains("usage"));
}

TEST_F(ServerTest, ChatStreamMatchesNonStream) {
    start();
    json body = {{"model", "tiny"},
                 {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
                 {"max_tokens", 20},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    const auto plain = post("/v1/chat/completions", body);
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json p = plain.j();
    EXPECT_EQ(p["object"], "chat.completion");
    EXPECT_EQ(p["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(p["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(p["usage"]["completion_tokens"], 20);
    // The prompt is the tokenizer's chat template.
    auto rendered =
        tiny_.tok->apply_chat_template(std::vector<chat_message>{{"system", "Be brief."}, {"user", "Hi"}}, true);
    ASSERT_TRUE(rendered.ok());
    EXPECT_EQ(p["usage"]["prompt_tokens"], tiny_.tok->encode(rendered.value()).value().size());

    body["stream"] = true;
    const auto st = post("/v1/chat/completions", body);
    ASSERT_EQ(st.status, 200);
    EXPECT_EQ(st.content_type, "text/event-stream");
    const auto ev = sse_payloads(st.body);
    ASSERT_GE(ev.size(), 3u);
    EXPECT_EQ(ev.back(), "[DONE]");
    const json first = json::parse(ev[0]);
    EXPECT_EQ(first["object"], "chat.completion.chunk");
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    std::string text;
    int finishes = 0;
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        EXPECT_EQ(c["id"], first["id"]);
        const json &d = c["choices"][0]["delta"];
        if (d.contains("content")) text += d["content"].get<std::string>();
        if (i > 0) {
            EXPECT_FALSE(d.contains("role"));
        }
        if (!c["choices"][0]["finish_reason"].is_null()) ++finishes;
    }
    EXPECT_EQ(finishes, 1);
    EXPECT_EQ(text, p["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(ServerTest, GenerateStreamMatchesNonStream) {
    start();
    json body = {{"text", "Once upon a time"},
                 {"sampling_params", {{"max_new_tokens", 16}, {"temperature", 0.0}, {"ignore_eos", true}}},
                 {"stream", false},
                 {"rid", "req-1"},
                 {"lora_path", nullptr},
                 {"return_logprob", false},
                 {"logprob_start_len", -1}}; // what sglang.bench_serving sends
    const auto plain = post("/generate", body);
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json p = plain.j();
    EXPECT_EQ(p["meta_info"]["id"], "req-1");
    EXPECT_EQ(p["meta_info"]["completion_tokens"], 16);
    EXPECT_EQ(p["meta_info"]["finish_reason"], json({{"type", "length"}, {"length", 16}}));
    EXPECT_EQ(p["output_ids"].size(), 16u);
    EXPECT_EQ(p["meta_info"]["prompt_tokens"], tiny_.tok->encode("Once upon a time", true, true).value().size());
    std::vector<std::int32_t> out_ids = p["output_ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(p["text"], tiny_.tok->decode(out_ids, true));

    body["stream"] = true;
    const auto st = post("/generate", body);
    ASSERT_EQ(st.status, 200);
    const auto ev = sse_payloads(st.body);
    ASSERT_EQ(ev.back(), "[DONE]");
    ASSERT_EQ(ev.size(), 17u) << "one chunk per token, then [DONE]";
    std::int64_t last_tokens = 0;
    std::string last_text;
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        const std::string t = c["text"];
        EXPECT_EQ(t.rfind(last_text, 0), 0u) << "the text is cumulative";
        last_text = t;
        EXPECT_EQ(c["meta_info"]["completion_tokens"], last_tokens + 1);
        last_tokens = c["meta_info"]["completion_tokens"];
        EXPECT_EQ(c["output_ids"].size(), static_cast<std::size_t>(last_tokens));
        EXPECT_EQ(c["meta_info"]["finish_reason"].is_null(), i + 2 < ev.size());
    }
    EXPECT_EQ(last_text, p["text"].get<std::string>());
    EXPECT_EQ(json::parse(ev[ev.size() - 2])["output_ids"], p["output_ids"]);

    // input_ids give the same output as the text they encode.
    json by_ids = {{"input_ids", tiny_.tok->encode("Once upon a time", true, true).value()},
                   {"sampling_params", {{"max_new_tokens", 16}, {"temperature", 0.0}, {"ignore_eos", true}}}};
    const auto ri = post("/generate", by_ids);
    ASSERT_EQ(ri.status, 200);
    EXPECT_EQ(ri.j()["output_ids"], p["output_ids"]);
    EXPECT_EQ(get("/server_info").j()["context_length"], 1024);
}

TEST_F(ServerTest, NChoicesAndStopStrings) {
    start();
    json body = greedy_completion("In the beginning", 12);
    body["n"] = 2;
    const auto r = post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.j();
    ASSERT_EQ(j["choices"].size(), 2u);
    EXPECT_EQ(j["choices"][0]["index"], 0);
    EXPECT_EQ(j["choices"][1]["index"], 1);
    EXPECT_EQ(j["choices"][0]["text"], j["choices"][1]["text"]) << "greedy: both choices agree";
    EXPECT_EQ(j["usage"]["completion_tokens"], 24);
    const std::string full = j["choices"][0]["text"];

    // n = 2 streamed: one finish per index.
    body["stream"] = true;
    const auto ev = sse_payloads(post("/v1/completions", body).body);
    std::map<int, int> finishes;
    std::map<int, std::string> texts;
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        const int idx = c["choices"][0]["index"];
        texts[idx] += c["choices"][0]["text"].get<std::string>();
        if (!c["choices"][0]["finish_reason"].is_null()) ++finishes[idx];
    }
    EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
    EXPECT_EQ(texts[0], full);
    EXPECT_EQ(texts[1], full);

    // A stop string taken from the middle of the greedy output cuts it there.
    const auto out_ids = tiny_.tok->encode(full, true, false).value();
    ASSERT_GE(full.size(), 4u);
    std::string stop;
    for (std::size_t k = 3; k < out_ids.size() && stop.empty(); ++k) {
        std::string t = tiny_.tok->decode(std::span(&out_ids[k], 1), true);
        if (t.size() >= 2 && t.find('\xef') == std::string::npos) stop = t;
    }
    ASSERT_FALSE(stop.empty()) << "no usable token in: " << full;
    json sb = greedy_completion("In the beginning", 12);
    sb["stop"] = {stop};
    const auto rs = post("/v1/completions", sb);
    ASSERT_EQ(rs.status, 200) << rs.body;
    const json js = rs.j();
    EXPECT_EQ(js["choices"][0]["text"], full.substr(0, full.find(stop)));
    EXPECT_EQ(js["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(js["choices"][0]["stop_reason"], stop);
}

TEST_F(ServerTest, LogprobsOfTheChosenTokens) {
    start();
    json body = greedy_completion("Numbers:", 6);
    body["logprobs"] = 0;
    const auto r = post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json lp = r.j()["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 6u);
    ASSERT_EQ(lp["token_logprobs"].size(), 6u);
    for (const auto &v : lp["token_logprobs"]) {
        EXPECT_LE(v.get<double>(), 0.0);
        EXPECT_GT(v.get<double>(), -100.0);
    }
    json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"max_tokens", 5},
                 {"temperature", 0},
                 {"ignore_eos", true},
                 {"logprobs", true}};
    const auto rc = post("/v1/chat/completions", chat);
    ASSERT_EQ(rc.status, 200) << rc.body;
    const json content = rc.j()["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 5u);
    for (const auto &c : content) EXPECT_LE(c["logprob"].get<double>(), 0.0);
    // Greedy: each chosen token is the argmax, so its probability is at least 1/vocab.
    for (const auto &c : content) EXPECT_GE(c["logprob"].get<double>(), -std::log(double(tiny_.tok->vocab_size())));
}

TEST_F(ServerTest, ModelsHealthAndMetrics) {
    start();
    const auto models = get("/v1/models");
    ASSERT_EQ(models.status, 200);
    const json m = models.j();
    EXPECT_EQ(m["object"], "list");
    ASSERT_EQ(m["data"].size(), 1u);
    EXPECT_EQ(m["data"][0]["id"], "tiny");
    const auto h = get("/health");
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.j()["status"], "ok");

    const auto before = metrics();
    EXPECT_EQ(before.at("vllm:num_requests_running"), 0);
    EXPECT_EQ(before.at("vllm:kv_cache_usage_perc"), 0);
    EXPECT_EQ(before.at("fp4moe:kv_blocks_total"), 512);
    const auto r = post("/v1/completions", greedy_completion("count me", 7));
    ASSERT_EQ(r.status, 200);
    const int prompt = r.j()["usage"]["prompt_tokens"];
    // The engine publishes its counters after the step that finished the request: the response may be first.
    ASSERT_TRUE(
        eventually([](const auto &m) { return m.at("vllm:request_success_total{finished_reason=\"length\"}") == 1; }));
    const auto after = metrics();
    EXPECT_EQ(after.at("vllm:generation_tokens_total") - before.at("vllm:generation_tokens_total"), 7);
    EXPECT_EQ(after.at("vllm:prompt_tokens_total") - before.at("vllm:prompt_tokens_total"), prompt);
    EXPECT_EQ(after.at("vllm:request_success_total{finished_reason=\"length\"}"), 1);
    EXPECT_EQ(after.at("vllm:time_to_first_token_seconds_count"), 1);
    EXPECT_EQ(after.at("vllm:inter_token_latency_seconds_count"), 6);
    EXPECT_EQ(after.at("vllm:e2e_request_latency_seconds_count"), 1);
    EXPECT_EQ(after.at("vllm:request_queue_time_seconds_count"), 1);
    EXPECT_EQ(after.at("vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 1);
    EXPECT_EQ(after.at("fp4moe:idle_kv_leaks_total"), 0);
    // Responses are counted once written (after the client may have read them): at least /v1/models, /health,
    // the first scrape and the completion.
    EXPECT_GE(after.at("fp4moe:http_responses_total{status=\"200\"}"), 3);
}

TEST_F(ServerTest, KvCapacityLimits) {
    // 8 blocks x 16 = 128 KV positions, a context of 1024: a request that can never fit the KV cache is refused
    // at once (not queued forever); a chat without max_tokens gets what fits.
    auto eo = default_engine();
    eo.kv_blocks = 8;
    start(eo);
    const auto r = post("/v1/completions", greedy_completion("hi", 500));
    expect_error(r, 400, "max_tokens", "max_tokens past the KV capacity");
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("KV cache capacity of 128 positions"),
              std::string::npos)
        << r.body;
    json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"temperature", 0}, {"ignore_eos", true}};
    const auto c = post("/v1/chat/completions", chat);
    ASSERT_EQ(c.status, 200) << c.body;
    const json j = c.j();
    // The default budget is what the KV cache holds: prompt + max_tokens - 1 = 128 positions.
    EXPECT_EQ(j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>(), 129);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}
