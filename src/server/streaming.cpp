#include "server/streaming.h"

#include <fmt/format.h>

#include <random>

namespace fp4moe::server {
namespace {

/// Keeps a response counted in server_state::inflight while it exists (graceful shutdown waits for 0).
struct inflight_guard {
    std::atomic<int> &n;
    explicit inflight_guard(std::atomic<int> &c) : n(c) { ++n; }
    ~inflight_guard() { --n; }
    inflight_guard(const inflight_guard &) = delete;
    inflight_guard &operator=(const inflight_guard &) = delete;
};

struct response_context {
    server_state &state;
    std::unique_ptr<generation> g;
    std::unique_ptr<response_writer> w;
    inflight_guard guard;
    response_context(server_state &s, std::unique_ptr<generation> gen, std::unique_ptr<response_writer> writer)
        : state(s), g(std::move(gen)), w(std::move(writer)), guard(s.inflight) {}
};

} // namespace

void respond(server_state &state, httplib::Response &res, std::unique_ptr<generation> g,
             std::unique_ptr<response_writer> w) {
    const bool stream = w->stream();
    auto ctx = std::make_shared<response_context>(state, std::move(g), std::move(w));
    if (stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no"); // proxies: do not buffer the stream
    }
    res.status = 200;
    res.set_chunked_content_provider(
        stream ? "text/event-stream" : "application/json",
        [ctx](std::size_t, httplib::DataSink &sink) {
            auto write = [&](const std::string &s) { return s.empty() || sink.write(s.data(), s.size()); };
            const auto how =
                ctx->g->drain([&](const output_event &e) { return write(ctx->w->on_event(e)); },
                              [&] { return sink.is_writable(); }, [&] { return ctx->state.stopping.load(); });
            if (how != generation::end::finished) return false; // httplib closes the connection
            if (!write(ctx->w->finish())) return false;
            sink.done();
            return true;
        },
        // Runs when the response is destroyed: also when the provider never ran (the client left before the
        // headers went out), so nothing is left running for nobody.
        [ctx](bool) { ctx->g->cancel(); });
}

void send_error(httplib::Response &res, const api_error &e) {
    res.status = e.status;
    if (e.status == 503) res.set_header("Retry-After", "1");
    if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(error_body(e), "application/json");
}

std::string dump(const nlohmann::json &j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse(const nlohmann::json &j) {
    return "data: " + dump(j) + "\n\n";
}

nlohmann::json matched_stop(const tokenizer &tok, const sampling_params &p, const std::vector<std::int32_t> &ids,
                            std::size_t emitted_bytes) {
    if (!ids.empty()) {
        const std::int32_t last = ids.back();
        for (auto id : p.stop_token_ids)
            if (id == last) return last;
        if (!p.ignore_eos)
            for (auto id : tok.stop_ids())
                if (id == last) return last;
    }
    if (!p.stop.empty()) {
        const std::string text = tok.decode(ids, p.skip_special_tokens);
        for (const auto &s : p.stop)
            if (emitted_bytes <= text.size() && text.compare(emitted_bytes, s.size(), s) == 0) return s;
    }
    return nullptr;
}

std::string random_id(std::string_view prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<std::uint32_t>(rng()));
}

} // namespace fp4moe::server
