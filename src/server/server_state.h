// What every route handler shares: the engine, the tokenizer, the metrics, the parse limits and the server's
// lifecycle flags. Owned by http_server; routes hold a reference for the server's lifetime.
#pragma once

#include "fp4moe/tokenizer.h"
#include "runtime/engine.h"
#include "server/metrics.h"
#include "server/request_parse.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace fp4moe::server {

struct server_state {
    engine &eng;
    const tokenizer &tok;
    std::shared_ptr<server_metrics> metrics;
    parse_limits limits;
    std::string served_name;  ///< the model name routes report and accept
    std::string model_path;   ///< the checkpoint directory (/v1/models "root", /server_info)
    std::int64_t created = 0; ///< unix seconds at start (/v1/models "created")

    std::atomic<bool> draining{false}; ///< graceful shutdown began: new requests get 503
    std::atomic<bool> stopping{false}; ///< the server is going away: generations in flight are cancelled
    std::atomic<int> inflight{0};      ///< generations whose response is still being written
};

} // namespace fp4moe::server
