// The HTTP server: cpp-httplib set up with the routes (OpenAI, SGLang, /health, /metrics), an API key, a
// request-body limit, a thread pool, and a graceful shutdown.
//
// Request path, before any route runs (httplib's pre-routing hook, so a refused request's body is never
// read): the API key (every path but exactly "/health" needs `Authorization: Bearer <key>` when a key is set;
// compared in constant time), then, during a graceful shutdown, 503 for every POST; then a Content-Type other
// than application/json on a POST -> 415. Bodies larger than max_body_bytes -> 413 (httplib checks
// Content-Length before reading). Every error body is the OpenAI envelope (server/api_error.h), also for
// httplib's own 404/413/400.
//
// Threads: httplib accepts on the thread that calls run() and serves each connection on a pool thread
// (http_threads of them); a streaming response holds its thread until it ends, so http_threads bounds the
// number of concurrent streams (connections past it wait for a free thread). Handlers never touch the model:
// they submit to the engine and wait on a per-request queue (server/generation.h).
//
// Shutdown (shutdown(true), e.g. on SIGTERM): new POSTs get 503 and /health 503, the engine finishes every
// accepted request (aborting them after shutdown_timeout), the responses in flight are written to the end,
// then the listener closes and run() returns.
#pragma once

#include "fp4moe/tokenizer.h"
#include "runtime/engine.h"
#include "server/server_state.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace fp4moe::server {

struct server_options {
    std::string host = "127.0.0.1";
    int port = 30000;              ///< 0: an ephemeral port (see http_server::port)
    std::string api_key;           ///< empty: no authentication
    std::string served_model_name; ///< the name /v1/models lists and `model` must match
    std::string model_path;        ///< the checkpoint directory (also accepted as `model`)
    std::size_t max_body_bytes = 8u << 20;
    int http_threads = 256;                    ///< connections served at once (each stream holds one)
    std::chrono::seconds shutdown_timeout{60}; ///< graceful drain: abort what is still running after this
    int max_n = 16;                            ///< cap on `n`
    int max_choices = 64;                      ///< cap on prompts x n per request
};

class http_server {
public:
    /// Binds host:port (the socket listens from here on; connections wait until run()). `eng` and `tok` must
    /// outlive the server. Errors: bad options, the port cannot be bound. Ignores SIGPIPE process-wide (a
    /// client that disconnects mid-write must not kill the process).
    static result<std::unique_ptr<http_server>> create(engine &eng, const tokenizer &tok, const server_options &opts);

    /// Stops the listener and cancels the generations in flight (no drain); joins the background thread.
    ~http_server();
    http_server(const http_server &) = delete;
    http_server &operator=(const http_server &) = delete;

    /// The bound port.
    int port() const { return port_; }
    /// "http://host:port".
    std::string url() const;

    /// Serves on the calling thread until shutdown() or the destructor stops it.
    void run();
    /// run() on a background thread; returns once the server accepts connections.
    void start();

    /// Graceful (drain) or immediate shutdown; see the file comment. Any thread but a handler's; blocks until
    /// the engine stopped and every response in flight was written (or the timeout passed). A second call
    /// with drain=false while a drain is under way turns it into an abort.
    void shutdown(bool drain);

    server_state &state() { return *state_; }

private:
    http_server() = default;

    std::unique_ptr<httplib::Server> svr_;
    std::unique_ptr<server_state> state_;
    server_options opts_;
    int port_ = 0;
    std::thread thread_;
};

/// Runs `s` until SIGINT or SIGTERM: the first starts a graceful shutdown (drain), a second aborts what is
/// still running. Returns when the server has stopped (exit code 0 for the caller). Installs process-wide
/// handlers for both signals (they only count; a thread polls the count and acts).
void serve_until_signal(http_server &s);

} // namespace fp4moe::server
