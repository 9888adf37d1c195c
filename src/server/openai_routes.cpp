#include "server/openai_routes.h"

#include "server/streaming.h"

#include <chrono>

namespace fp4moe::server {
namespace {

/// Per choice, what the response needs at the end.
struct choice_state {
    std::string text;
    std::vector<std::int32_t> ids;
    std::vector<float> logprobs;
    finish_reason finish = finish_reason::none;
    std::string error;
    std::int64_t completion_tokens = 0;
    bool started = false; ///< chat stream: the role chunk went out
};

class openai_writer final : public response_writer {
public:
    openai_writer(const server_state &st, const generation_request &r, std::int64_t prompt_tokens)
        : st_(st), chat_(r.chat), stream_(r.stream), include_usage_(r.include_usage), logprobs_(r.logprobs),
          params_(r.params), prompt_tokens_(prompt_tokens), choices_(static_cast<std::size_t>(r.choices())),
          id_(random_id(r.chat ? "chatcmpl-" : "cmpl-")),
          created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                       .count()) {}

    bool stream() const override { return stream_; }

    std::string on_event(const output_event &e) override {
        choice_state &c = choices_[static_cast<std::size_t>(e.index)];
        const std::size_t emitted_before = c.text.size();
        c.text += e.text;
        c.ids.insert(c.ids.end(), e.tokens.begin(), e.tokens.end());
        c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        c.completion_tokens = e.usage.completion_tokens;
        if (e.finish != finish_reason::none) {
            c.finish = e.finish;
            c.error = e.error;
        }
        if (!stream_) return {};

        std::string out;
        if (e.finish == finish_reason::error) {
            // In a stream an engine failure is an error event (then [DONE] at the end), as vLLM does.
            out += sse({{"error",
                         {{"message", "generation failed: " + e.error},
                          {"type", "server_error"},
                          {"param", nullptr},
                          {"code", 500}}}});
        }
        if (chat_ && !c.started) {
            c.started = true;
            out += sse(chunk(e.index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
        }
        const bool final = e.finish != finish_reason::none;
        if (e.text.empty() && e.tokens.empty() && !final) return out;
        if (e.text.empty() && !final && !logprobs_) return out; // a held-back token: nothing to show yet
        nlohmann::json lp = nullptr;
        if (logprobs_ && !e.tokens.empty())
            lp = logprobs_json(e.tokens, e.logprobs, static_cast<std::int64_t>(emitted_before));
        nlohmann::json delta = chat_ ? nlohmann::json{{"content", e.text}} : nlohmann::json(e.text);
        if (chat_ && e.text.empty() && final) delta = nlohmann::json::object();
        out += sse(chunk(e.index, delta, lp, final ? finish_json(c) : nlohmann::json(nullptr),
                         final ? stop_reason(c) : nlohmann::json(nullptr)));
        return out;
    }

    std::string finish() override {
        if (stream_) {
            std::string out;
            if (include_usage_) {
                nlohmann::json u = base(chat_ ? "chat.completion.chunk" : "text_completion");
                u["choices"] = nlohmann::json::array();
                u["usage"] = usage();
                out += sse(u);
            }
            out += "data: [DONE]\n\n";
            return out;
        }
        nlohmann::json body = base(chat_ ? "chat.completion" : "text_completion");
        nlohmann::json arr = nlohmann::json::array();
        for (std::size_t i = 0; i < choices_.size(); ++i) {
            const choice_state &c = choices_[i];
            nlohmann::json ch = {{"index", i}};
            if (chat_)
                ch["message"] = {{"role", "assistant"}, {"content", c.text}};
            else
                ch["text"] = c.text;
            ch["logprobs"] = logprobs_ ? logprobs_json(c.ids, c.logprobs, 0) : nlohmann::json(nullptr);
            ch["finish_reason"] = finish_json(c);
            ch["stop_reason"] = stop_reason(c);
            if (c.finish == finish_reason::error) ch["error"] = "generation failed: " + c.error;
            arr.push_back(std::move(ch));
        }
        body["choices"] = std::move(arr);
        body["usage"] = usage();
        return dump(body);
    }

private:
    nlohmann::json base(const char *object) const {
        return {{"id", id_}, {"object", object}, {"created", created_}, {"model", st_.served_name}};
    }

    nlohmann::json chunk(int index, nlohmann::json delta, nlohmann::json lp, nlohmann::json finish,
                         nlohmann::json stop = nullptr) const {
        nlohmann::json j = base(chat_ ? "chat.completion.chunk" : "text_completion");
        const bool with_stop = !finish.is_null() || !stop.is_null();
        nlohmann::json ch = {{"index", index}};
        if (chat_)
            ch["delta"] = std::move(delta);
        else
            ch["text"] = std::move(delta);
        ch["logprobs"] = std::move(lp);
        ch["finish_reason"] = std::move(finish);
        if (with_stop) ch["stop_reason"] = std::move(stop);
        j["choices"] = nlohmann::json::array({std::move(ch)});
        if (include_usage_) j["usage"] = nullptr; // OpenAI: every chunk has usage: null, then the usage chunk
        return j;
    }

    static nlohmann::json finish_json(const choice_state &c) {
        const char *n = finish_reason_name(c.finish);
        return n ? nlohmann::json(n) : nlohmann::json(nullptr);
    }

    nlohmann::json stop_reason(const choice_state &c) const {
        if (c.finish != finish_reason::stop) return nullptr;
        return matched_stop(st_.tok, params_, c.ids, c.text.size());
    }

    nlohmann::json usage() const {
        std::int64_t completion = 0;
        for (const auto &c : choices_) completion += c.completion_tokens;
        return {{"prompt_tokens", prompt_tokens_},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens_ + completion}};
    }

    /// The chosen tokens' log-probabilities in the route's shape. `offset`: text offset of the first token.
    nlohmann::json logprobs_json(const std::vector<std::int32_t> &ids, const std::vector<float> &lps,
                                 std::int64_t offset) const {
        if (chat_) {
            nlohmann::json content = nlohmann::json::array();
            for (std::size_t i = 0; i < ids.size(); ++i) {
                const std::string t = st_.tok.decode(std::span(&ids[i], 1));
                std::vector<int> bytes(t.begin(), t.end());
                for (auto &b : bytes) b &= 0xff;
                content.push_back({{"token", t},
                                   {"logprob", i < lps.size() ? lps[i] : 0.0f},
                                   {"bytes", bytes},
                                   {"top_logprobs", nlohmann::json::array()}});
            }
            return {{"content", std::move(content)}};
        }
        nlohmann::json tokens = nlohmann::json::array(), lp = nlohmann::json::array(), top = nlohmann::json::array(),
                       offs = nlohmann::json::array();
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const std::string t = st_.tok.decode(std::span(&ids[i], 1));
            const float v = i < lps.size() ? lps[i] : 0.0f;
            tokens.push_back(t);
            lp.push_back(v);
            top.push_back({{t, v}});
            offs.push_back(offset);
            offset += static_cast<std::int64_t>(t.size());
        }
        return {{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", offs}};
    }

    const server_state &st_;
    bool chat_, stream_, include_usage_, logprobs_;
    sampling_params params_;
    std::int64_t prompt_tokens_;
    std::vector<choice_state> choices_;
    std::string id_;
    std::int64_t created_;
};

void handle_generation(server_state &st, const httplib::Request &req, httplib::Response &res, bool chat) {
    try {
        const json body = parse_body(req.body);
        generation_request r = chat ? parse_chat(body, st.tok, st.limits) : parse_completion(body, st.tok, st.limits);
        auto g = std::make_unique<generation>(st.eng, st.metrics);
        if (auto err = g->submit(r)) return send_error(res, *err);
        auto w = std::make_unique<openai_writer>(st, r, g->prompt_tokens());
        respond(st, res, std::move(g), std::move(w));
    } catch (const api_error &e) {
        send_error(res, e);
    }
}

} // namespace

void add_openai_routes(httplib::Server &svr, server_state &st) {
    svr.Post("/v1/completions",
             [&st](const httplib::Request &req, httplib::Response &res) { handle_generation(st, req, res, false); });
    svr.Post("/v1/chat/completions",
             [&st](const httplib::Request &req, httplib::Response &res) { handle_generation(st, req, res, true); });
    svr.Get("/v1/models", [&st](const httplib::Request &, httplib::Response &res) {
        nlohmann::json m = {{"id", st.served_name},  {"object", "model"},
                            {"created", st.created}, {"owned_by", "fp4moe"},
                            {"root", st.model_path}, {"max_model_len", st.limits.max_model_len}};
        res.set_content(dump({{"object", "list"}, {"data", nlohmann::json::array({m})}}), "application/json");
    });
}

} // namespace fp4moe::server
