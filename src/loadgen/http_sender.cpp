#include "loadgen/http_sender.h"

#include "core/error.h"
#include "loadgen/stream_parse.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace fp4moe::loadgen {

std::string endpoint::url() const {
    return fmt::format("http://{}:{}{}", host, port, prefix);
}

result<endpoint> parse_endpoint(const std::string &url) {
    auto bad = [&](const std::string &why) {
        return status(status_code::invalid_argument, fmt::format("--url '{}': {}", url, why));
    };
    std::string_view s = url;
    if (s.starts_with("https://")) return bad("https is not supported; use http://");
    if (!s.starts_with("http://")) return bad("expected http://host[:port][/prefix]");
    s.remove_prefix(7);
    endpoint ep;
    const auto slash = s.find('/');
    std::string_view hostport = s.substr(0, slash);
    if (slash != std::string_view::npos) {
        std::string_view prefix = s.substr(slash);
        while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
        ep.prefix = std::string(prefix);
    }
    ep.port = 80;
    const auto colon = hostport.rfind(':');
    if (colon != std::string_view::npos && hostport.find(']') == std::string_view::npos) {
        const auto port = hostport.substr(colon + 1);
        int v = 0;
        if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
            (v = std::stoi(std::string(port))) < 1 || v > 65535)
            return bad(fmt::format("bad port '{}'", port));
        ep.port = v;
        hostport = hostport.substr(0, colon);
    }
    if (hostport.empty()) return bad("no host");
    ep.host = std::string(hostport);
    return ep;
}

std::string request_body(const sender_options &o, const bench_prompt &p, std::int64_t output_len) {
    nlohmann::ordered_json j;
    if (o.backend == backend_kind::sglang) {
        if (p.use_ids)
            j["input_ids"] = p.ids;
        else
            j["text"] = p.text;
        j["sampling_params"] = {{"temperature", 0.0}, {"max_new_tokens", output_len}, {"ignore_eos", o.ignore_eos}};
        j["stream"] = o.stream;
        j["logprob_start_len"] = -1;
    } else {
        j["model"] = o.model;
        if (p.use_ids)
            j["prompt"] = p.ids;
        else
            j["prompt"] = p.text;
        j["temperature"] = 0.0;
        j["best_of"] = 1;
        j["max_tokens"] = output_len;
        j["stream"] = o.stream;
        if (o.stream) j["stream_options"] = {{"include_usage", true}};
        j["ignore_eos"] = o.ignore_eos;
    }
    return j.dump();
}

namespace {

// httplib's error names are terse ("Connection"): say what happened.
std::string describe(httplib::Error e) {
    switch (e) {
    case httplib::Error::Connection:
        return "could not connect (connection refused or host unreachable)";
    case httplib::Error::Read:
        return "read failed or timed out (see --read-timeout)";
    case httplib::Error::Write:
        return "write failed";
    case httplib::Error::ConnectionTimeout:
        return "connection timed out";
    default:
        return httplib::to_string(e);
    }
}

void set_timeouts(httplib::Client &cli, double read_timeout_s) {
    const auto us = static_cast<long long>(read_timeout_s * 1e6);
    cli.set_connection_timeout(10, 0);
    cli.set_read_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
    cli.set_write_timeout(60, 0);
}

// A non-streamed response body: the same fields as the stream's chunks, all at once.
status parse_whole_body(backend_kind b, const std::string &body, request_result &r) {
    nlohmann::json d;
    try {
        d = nlohmann::json::parse(body);
        if (b == backend_kind::sglang) {
            if (d.is_array()) d = d.at(0);
            r.generated_text = d.at("text").get<std::string>();
            r.output_len = d.at("meta_info").at("completion_tokens").get<std::int64_t>();
        } else {
            r.generated_text = d.at("choices").at(0).at("text").get<std::string>();
            if (d.contains("usage")) r.output_len = d["usage"].at("completion_tokens").get<std::int64_t>();
        }
    } catch (const std::exception &e) {
        return {status_code::corrupt, fmt::format("unexpected response ({}): {}", e.what(), body.substr(0, 200))};
    }
    return {};
}

} // namespace

request_result send_request(const endpoint &ep, const sender_options &o, const bench_prompt &p, std::int64_t output_len,
                            std::chrono::steady_clock::time_point run_start) {
    using clock = std::chrono::steady_clock;
    request_result r;
    r.prompt_len = p.prompt_len;
    r.output_len = output_len;
    const std::string path = ep.prefix + (o.backend == backend_kind::sglang ? "/generate" : "/v1/completions");
    const std::string where = fmt::format("POST http://{}:{}{}", ep.host, ep.port, path);
    try {
        httplib::Client cli(ep.host, ep.port);
        set_timeouts(cli, o.read_timeout_s);
        httplib::Request req;
        req.method = "POST";
        req.path = path;
        req.body = request_body(o, p, output_len);
        req.headers.emplace("Content-Type", "application/json");
        req.headers.emplace("Accept", o.stream ? "text/event-stream" : "application/json");
        if (!o.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + o.api_key);

        const auto st = clock::now();
        r.start_time = std::chrono::duration<double>(st - run_start).count();
        auto since = [&] { return std::chrono::duration<double>(clock::now() - st).count(); };

        stream_accumulator acc(o.backend, r);
        int http_status = 0;
        std::string body; // error bodies and non-streamed answers
        status parse_st;
        req.response_handler = [&](const httplib::Response &res) {
            http_status = res.status;
            return true;
        };
        req.content_receiver = [&](const char *data, size_t n, uint64_t, uint64_t) {
            if (http_status != 200 || !o.stream) {
                if (body.size() < (1u << 20)) body.append(data, n);
                return true;
            }
            parse_st = acc.on_bytes(std::string_view(data, n), since());
            return parse_st.ok(); // stop reading after a malformed or error chunk
        };
        httplib::Response res;
        httplib::Error err = httplib::Error::Success;
        const bool sent = cli.send(req, res, err);
        if (!parse_st.ok()) {
            r.error = fmt::format("{}: {}", where, parse_st.message());
            return r;
        }
        if (!sent) {
            r.error = fmt::format("{}: {}", where, describe(err));
            return r;
        }
        if (res.status != 200) {
            r.error = fmt::format("{}: HTTP {} {}", where, res.status, body.empty() ? res.body : body);
            return r;
        }
        if (o.stream) {
            parse_st = acc.finish(since());
        } else {
            r.latency = since();
            r.ttft = r.latency; // sglang: no stream, TTFT = latency
            parse_st = parse_whole_body(o.backend, body, r);
        }
        if (!parse_st.ok()) {
            r.error = fmt::format("{}: {}", where, parse_st.message());
            return r;
        }
        r.success = true;
    } catch (const std::exception &e) {
        r.error = fmt::format("{}: {}", where, e.what());
    }
    return r;
}

result<std::string> http_get(const endpoint &ep, const std::string &path, const std::string &api_key, double timeout_s,
                             int *http_status) {
    if (http_status) *http_status = 0;
    const std::string url = fmt::format("http://{}:{}{}{}", ep.host, ep.port, ep.prefix, path);
    try {
        httplib::Client cli(ep.host, ep.port);
        set_timeouts(cli, timeout_s);
        httplib::Headers h;
        if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
        auto res = cli.Get(ep.prefix + path, h);
        if (!res)
            return status(
                status_code::unsupported,
                fmt::format("GET {}: {} (is the server running? --url / --host / --port)", url, describe(res.error())));
        if (http_status) *http_status = res->status;
        if (res->status != 200)
            return status(status_code::invalid_argument,
                          fmt::format("GET {}: HTTP {} {}", url, res->status, res->body));
        return res->body;
    } catch (const std::exception &e) {
        return status(status_code::internal, fmt::format("GET {}: {}", url, e.what()));
    }
}

} // namespace fp4moe::loadgen
