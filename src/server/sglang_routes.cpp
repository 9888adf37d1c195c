#include "server/sglang_routes.h"

#include "server/streaming.h"

#include <chrono>

namespace fp4moe::server {
namespace {

class generate_writer final : public response_writer {
public:
    generate_writer(const server_state &st, const generation_request &r, std::int64_t prompt_tokens)
        : st_(st), stream_(r.stream), logprobs_(r.logprobs), params_(r.params), prompt_tokens_(prompt_tokens),
          rid_(r.rid.empty() ? random_id("") : r.rid), start_(std::chrono::steady_clock::now()) {}

    bool stream() const override { return stream_; }

    std::string on_event(const output_event &e) override {
        text_ += e.text;
        ids_.insert(ids_.end(), e.tokens.begin(), e.tokens.end());
        lps_.insert(lps_.end(), e.logprobs.begin(), e.logprobs.end());
        completion_tokens_ = e.usage.completion_tokens;
        if (e.finish != finish_reason::none) {
            finish_ = e.finish;
            error_ = e.error;
        }
        if (!stream_ || (e.tokens.empty() && e.finish == finish_reason::none)) return {};
        return sse(body());
    }

    std::string finish() override { return stream_ ? std::string("data: [DONE]\n\n") : dump(body()); }

private:
    nlohmann::json body() const {
        nlohmann::json meta = {{"id", rid_},
                               {"finish_reason", finish_json()},
                               {"prompt_tokens", prompt_tokens_},
                               {"completion_tokens", completion_tokens_},
                               {"cached_tokens", 0}};
        if (finish_ != finish_reason::none)
            meta["e2e_latency"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        if (logprobs_) {
            nlohmann::json lp = nlohmann::json::array();
            for (std::size_t i = 0; i < ids_.size(); ++i)
                lp.push_back({i < lps_.size() ? lps_[i] : 0.0f, ids_[i], nullptr});
            meta["output_token_logprobs"] = std::move(lp);
        }
        return {{"text", text_}, {"output_ids", ids_}, {"meta_info", std::move(meta)}};
    }

    nlohmann::json finish_json() const {
        switch (finish_) {
        case finish_reason::none:
            return nullptr;
        case finish_reason::length:
            return {{"type", "length"}, {"length", params_.max_tokens}};
        case finish_reason::stop:
            return {{"type", "stop"}, {"matched", matched_stop(st_.tok, params_, ids_, text_.size())}};
        case finish_reason::abort:
            return {{"type", "abort"}, {"message", "the request was cancelled"}};
        case finish_reason::error:
            return {{"type", "abort"}, {"message", "generation failed: " + error_}};
        }
        return nullptr;
    }

    const server_state &st_;
    bool stream_, logprobs_;
    sampling_params params_;
    std::int64_t prompt_tokens_;
    std::string rid_;
    std::chrono::steady_clock::time_point start_;
    std::string text_, error_;
    std::vector<std::int32_t> ids_;
    std::vector<float> lps_;
    std::int64_t completion_tokens_ = 0;
    finish_reason finish_ = finish_reason::none;
};

} // namespace

void add_sglang_routes(httplib::Server &svr, server_state &st) {
    svr.Post("/generate", [&st](const httplib::Request &req, httplib::Response &res) {
        try {
            const json body = parse_body(req.body);
            generation_request r = parse_generate(body, st.tok, st.limits);
            auto g = std::make_unique<generation>(st.eng, st.metrics);
            if (auto err = g->submit(r)) return send_error(res, *err);
            auto w = std::make_unique<generate_writer>(st, r, g->prompt_tokens());
            respond(st, res, std::move(g), std::move(w));
        } catch (const api_error &e) {
            send_error(res, e);
        }
    });
    auto info = [&st](const httplib::Request &, httplib::Response &res) {
        const auto &o = st.eng.options();
        const auto s = st.eng.stats();
        nlohmann::json j = {{"model_path", st.model_path},
                            {"served_model_name", st.served_name},
                            {"context_length", st.limits.max_model_len},
                            {"max_running_requests", o.max_running_requests},
                            {"max_queued_requests", o.max_queue},
                            {"chunked_prefill_size", o.max_batch_tokens},
                            {"kv_blocks", s.kv_blocks_total},
                            {"kv_block_size", s.kv_block_size},
                            {"max_total_num_tokens", s.kv_blocks_total * s.kv_block_size},
                            {"version", "fp4moe"},
                            {"internal_states", nlohmann::json::array({nlohmann::json::object()})}};
        res.set_content(dump(j), "application/json");
    };
    svr.Get("/server_info", info);
    svr.Get("/get_server_info", info);
    svr.Post("/flush_cache", [](const httplib::Request &, httplib::Response &res) {
        res.set_content("no prefix cache to flush\n", "text/plain");
    });
}

} // namespace fp4moe::server
