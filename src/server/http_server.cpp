#include "server/http_server.h"

#include "core/log.h"
#include "server/openai_routes.h"
#include "server/sglang_routes.h"
#include "server/streaming.h"

#include <fmt/format.h>
#include <httplib.h>

#include <condition_variable>
#include <csignal>
#include <mutex>

#include <signal.h>
#include <sys/socket.h>

namespace fp4moe::server {
namespace {

/// Compares a presented key with the configured one in time that depends only on the presented key's length,
/// never on the position of the first difference.
bool constant_time_equal(std::string_view given, std::string_view key) {
    unsigned diff = given.size() != key.size() ? 1u : 0u;
    for (std::size_t i = 0; i < given.size(); ++i)
        diff |=
            static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(key.empty() ? 0 : key[i % key.size()]);
    return diff == 0;
}

bool authorized(const httplib::Request &req, const std::string &key) {
    const std::string h = req.get_header_value("Authorization");
    constexpr std::string_view scheme = "Bearer ";
    if (h.size() < scheme.size()) return false;
    // The scheme is case-insensitive (RFC 9110); the key is not.
    for (std::size_t i = 0; i < scheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(h[i])) != std::tolower(static_cast<unsigned char>(scheme[i])))
            return false;
    return constant_time_equal(std::string_view(h).substr(scheme.size()), key);
}

} // namespace

result<std::unique_ptr<http_server>> http_server::create(engine &eng, const tokenizer &tok,
                                                         const server_options &opts) {
    if (opts.http_threads < 1)
        return status{status_code::invalid_argument,
                      fmt::format("http_threads must be >= 1, got {}", opts.http_threads)};
    if (opts.max_body_bytes < 1024)
        return status{status_code::invalid_argument,
                      fmt::format("max_body_bytes must be >= 1024, got {}", opts.max_body_bytes)};
    if (opts.port < 0 || opts.port > 65535)
        return status{status_code::invalid_argument, fmt::format("port must be in [0, 65535], got {}", opts.port)};
    // A write to a socket whose peer has gone raises SIGPIPE, which would end the process; httplib sends
    // without MSG_NOSIGNAL, so ignore it here (the write then fails with EPIPE and the request is cancelled).
    std::signal(SIGPIPE, SIG_IGN);

    std::unique_ptr<http_server> s(new http_server());
    s->opts_ = opts;
    s->svr_ = std::make_unique<httplib::Server>();
    s->state_.reset(new server_state{eng, tok, nullptr, {}, {}, {}, 0});
    server_state &st = *s->state_;
    st.served_name = opts.served_model_name.empty() ? opts.model_path : opts.served_model_name;
    if (st.served_name.empty()) st.served_name = "fp4moe";
    st.model_path = opts.model_path;
    st.metrics = std::make_shared<server_metrics>(st.served_name);
    st.created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const engine_stats es = eng.stats();
    st.limits.model_names = {st.served_name};
    if (!opts.model_path.empty() && opts.model_path != st.served_name) st.limits.model_names.push_back(opts.model_path);
    st.limits.vocab = tok.vocab_size();
    st.limits.max_model_len = eng.max_model_len();
    st.limits.kv_positions = es.kv_blocks_total * es.kv_block_size;
    st.limits.max_n = opts.max_n;
    st.limits.max_choices = opts.max_choices;

    httplib::Server &svr = *s->svr_;
    const int threads = opts.http_threads;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    svr.set_payload_max_length(opts.max_body_bytes);
    svr.set_keep_alive_max_count(1000); // benchmark clients reuse their connections
    svr.set_tcp_nodelay(true);          // one small SSE event per token: do not wait to coalesce
    // httplib (as Debian builds it) listens with a backlog of 5: a burst of connections (a benchmark's 64
    // clients starting at once) overflows it and clients stall for a SYN retransmit or fail. Keep the
    // listening socket's descriptor to listen() again with a real backlog after binding.
    auto listen_fd = std::make_shared<int>(-1);
    svr.set_socket_options([listen_fd](socket_t sock) {
        httplib::default_socket_options(sock);
        *listen_fd = static_cast<int>(sock);
    });

    const std::string key = opts.api_key;
    svr.set_pre_routing_handler([&st, key](const httplib::Request &req, httplib::Response &res) {
        if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
        if (!key.empty() && !authorized(req, key)) {
            send_error(res, {401, "invalid or missing API key (send the header Authorization: Bearer <key>)", {}, {}});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (req.method == "POST") {
            if (st.draining.load()) {
                send_error(res, {503, "the server is shutting down", {}, {}});
                return httplib::Server::HandlerResponse::Handled;
            }
            const std::string ct = req.get_header_value("Content-Type");
            if (!ct.empty() && ct.rfind("application/json", 0) != 0) {
                send_error(res,
                           {415,
                            fmt::format("Content-Type must be application/json, got \"{}\"", quote_for_message(ct)),
                            {},
                            {}});
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // httplib's own errors (unknown route, body too large, unparsable request) get the envelope too; our
    // handlers' errors already have a body and pass through.
    svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg;
        if (res.status == 404)
            msg = fmt::format("no route {} {}", quote_for_message(req.method, 16), quote_for_message(req.path, 128));
        else if (res.status == 413)
            msg = "the request body is larger than the server's limit (--max-body-bytes)";
        else
            msg = fmt::format("the request could not be served (HTTP {})", res.status);
        send_error(res, {res.status, msg, {}, {}});
        return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([](const httplib::Request &req, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception &e) {
            what = e.what();
        } catch (...) {
        }
        FP4MOE_LOG_ERROR("serve: {} {}: internal error: {}", quote_for_message(req.method, 16),
                         quote_for_message(req.path, 128), quote_for_message(what, 256));
        send_error(res, {500, "internal server error", {}, {}}); // never the exception text: it may hold paths
    });
    std::shared_ptr<server_metrics> metrics = st.metrics;
    svr.set_logger([metrics](const httplib::Request &req, const httplib::Response &res) {
        metrics->count_response(res.status);
        FP4MOE_LOG_DEBUG("serve: {} {} -> {}", quote_for_message(req.method, 16), quote_for_message(req.path, 128),
                         res.status);
    });

    svr.Get("/health", [&st](const httplib::Request &, httplib::Response &res) {
        // Reflects the engine, not the HTTP thread: 503 once it stops accepting (shutdown) or we drain.
        if (st.draining.load() || !st.eng.stats().accepting) {
            res.status = 503;
            res.set_content("{\"status\":\"shutting down\"}", "application/json");
            return;
        }
        res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    svr.Get("/metrics", [&st](const httplib::Request &, httplib::Response &res) {
        res.set_content(st.metrics->render(st.eng.stats()), "text/plain; version=0.0.4; charset=utf-8");
    });
    add_openai_routes(svr, st);
    add_sglang_routes(svr, st);

    if (opts.port == 0) {
        s->port_ = svr.bind_to_any_port(opts.host);
        if (s->port_ < 0) return status{status_code::io_error, fmt::format("cannot bind {} (any port)", opts.host)};
    } else {
        if (!svr.bind_to_port(opts.host, opts.port))
            return status{
                status_code::io_error,
                fmt::format("cannot bind {}:{} (in use, or not an address of this machine)", opts.host, opts.port)};
        s->port_ = opts.port;
    }
    if (*listen_fd >= 0) ::listen(*listen_fd, 1024); // Linux updates the backlog of a listening socket
    return s;
}

http_server::~http_server() {
    state_->draining = true;
    state_->stopping = true; // handlers waiting on the engine cancel their requests and return
    svr_->stop();
    if (thread_.joinable()) thread_.join();
}

std::string http_server::url() const {
    const bool v6 = opts_.host.find(':') != std::string::npos;
    return fmt::format("http://{}{}{}:{}", v6 ? "[" : "", opts_.host, v6 ? "]" : "", port_);
}

void http_server::run() {
    svr_->listen_after_bind();
}

void http_server::start() {
    thread_ = std::thread([this] { run(); });
    while (!svr_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void http_server::shutdown(bool drain) {
    state_->draining = true;
    if (drain) {
        // Drain, but never for longer than shutdown_timeout: then abort what is left.
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        std::thread watchdog([&] {
            std::unique_lock lock(mu);
            if (!cv.wait_for(lock, opts_.shutdown_timeout, [&] { return done; })) {
                lock.unlock();
                FP4MOE_LOG_WARN("serve: requests still running after {} s; aborting them",
                                opts_.shutdown_timeout.count());
                state_->eng.shutdown(false);
            }
        });
        state_->eng.shutdown(true);
        {
            std::lock_guard lock(mu);
            done = true;
        }
        cv.notify_all();
        watchdog.join();
    } else {
        state_->eng.shutdown(false);
    }
    // Every request has its final output queued: let the handlers write them out (bounded wait).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (state_->inflight.load() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    state_->stopping = true;
    svr_->stop();
}

namespace {

// Signals received while serving; the handler only bumps this (a lock-free atomic is async-signal-safe).
std::atomic<int> g_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_shutdown_signal(int) {
    g_signals.fetch_add(1);
}

} // namespace

void serve_until_signal(http_server &s) {
    // Installed only now: until the server is up (a long model load), SIGINT/SIGTERM keep their default
    // action and simply end the process.
    struct sigaction sa = {};
    sa.sa_handler = on_shutdown_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    std::atomic<bool> stopped{false};
    std::thread drainer;
    std::thread waiter([&] {
        int handled = 0;
        while (!stopped.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const int n = g_signals.load();
            if (n == handled) continue;
            if (handled == 0) {
                FP4MOE_LOG_INFO("serve: SIGINT/SIGTERM received: finishing the requests in flight (again to abort)");
                drainer = std::thread([&s] { s.shutdown(true); });
            }
            if (n >= 2 && handled < 2) {
                FP4MOE_LOG_WARN("serve: second signal: aborting the requests in flight");
                s.state().eng.shutdown(false);
            }
            handled = n;
        }
    });
    s.run();
    stopped = true;
    waiter.join();
    if (drainer.joinable()) drainer.join();
}

} // namespace fp4moe::server
