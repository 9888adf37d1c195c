#include "server/api_error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>

namespace fp4moe::server {

const char *type_for_status(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status == 503) return "unavailable_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

std::string error_body(const api_error &e) {
    std::string msg = e.message.size() > 512 ? e.message.substr(0, 509) + "..." : e.message;
    nlohmann::json err = {{"message", msg},
                          {"type", e.type.empty() ? type_for_status(e.status) : e.type},
                          {"param", e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param)},
                          {"code", e.status}};
    // replace: a message cut inside a multi-byte character must not make dump() throw.
    return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

api_error bad_request(std::string message, std::string param) {
    return {400, std::move(message), std::move(param), {}};
}

api_error from_submit(const submit_result &r, std::string_view prompt_param, std::string_view max_tokens_param) {
    switch (r.error) {
    case submit_error::queue_full:
    case submit_error::shutting_down:
        return {503, r.message, {}, {}};
    case submit_error::too_long:
        // The engine's too_long messages are about prompt + max_tokens against the context or the KV capacity.
        return {400, r.message, std::string(max_tokens_param), {}};
    case submit_error::invalid_argument: {
        std::string_view m = r.message;
        if (m.starts_with("prompt") || m.starts_with("the prompt"))
            return {400, r.message, std::string(prompt_param), {}};
        // Sampling errors start with the parameter name ("top_p must be ...", "stop[0] must not ...").
        std::size_t n = 0;
        while (n < m.size() && (std::islower(static_cast<unsigned char>(m[n])) || m[n] == '_')) ++n;
        std::string param(m.substr(0, n));
        if (param == "max_tokens") param = max_tokens_param;
        return {400, r.message, param, {}};
    }
    case submit_error::none:
        break;
    }
    return {500, "internal error: submit failed without a reason", {}, {}};
}

std::string quote_for_message(std::string_view s, std::size_t max) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && out.size() < max; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    if (out.size() >= max && s.size() > max) out += "...";
    return out;
}

} // namespace fp4moe::server
