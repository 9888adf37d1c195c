#include "loadgen/stream_parse.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fp4moe::loadgen {

void line_splitter::feed(std::string_view bytes, const std::function<void(std::string_view)> &on_line) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const auto nl = bytes.find('\n', pos);
        if (nl == std::string_view::npos) {
            partial_.append(bytes.substr(pos));
            return;
        }
        if (partial_.empty()) {
            on_line(bytes.substr(pos, nl - pos));
        } else {
            partial_.append(bytes.substr(pos, nl - pos));
            const std::string line = std::move(partial_);
            partial_.clear();
            on_line(line);
        }
        pos = nl + 1;
    }
}

void line_splitter::finish(const std::function<void(std::string_view)> &on_line) {
    if (partial_.empty()) return;
    const std::string line = std::move(partial_);
    partial_.clear();
    on_line(line);
}

namespace {

std::string_view strip(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The message of an error chunk, or "" when the chunk is not one.
std::string error_message(const nlohmann::json &d) {
    if (d.contains("error")) {
        const auto &e = d["error"];
        if (e.is_string()) return e.get<std::string>();
        if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
        return e.dump();
    }
    if (d.value("object", "") == "error") return d.value("message", d.dump());
    return {};
}

} // namespace

void stream_accumulator::token_event(double t, std::int64_t new_tokens) {
    if (!first_token_) {
        first_token_ = true;
        out_.ttft = t;
    } else {
        const double gap = (t - last_token_time_) / static_cast<double>(new_tokens);
        out_.itl.insert(out_.itl.end(), static_cast<std::size_t>(new_tokens), gap);
    }
    out_.chunk_times.push_back(t);
    last_token_time_ = t;
}

status stream_accumulator::on_data(std::string_view payload, double t) {
    nlohmann::json d;
    try {
        d = nlohmann::json::parse(payload);
    } catch (const std::exception &e) {
        return {status_code::corrupt, fmt::format("malformed stream chunk ({}): {}", e.what(), payload.substr(0, 200))};
    }
    if (!d.is_object()) return {status_code::corrupt, fmt::format("stream chunk is not an object: {}", payload)};
    if (auto msg = error_message(d); !msg.empty()) return {status_code::internal, "error chunk: " + msg};
    try {
        if (backend_ == backend_kind::sglang) {
            const auto it = d.find("text");
            if (it == d.end() || !it->is_string() || it->get_ref<const std::string &>().empty()) return {};
            out_.generated_text = it->get<std::string>(); // cumulative
            const auto n = d.at("meta_info").at("completion_tokens").get<std::int64_t>();
            if (!first_token_) {
                token_event(t, 1);
            } else {
                const auto new_tokens = n - last_output_len_;
                if (new_tokens < 0)
                    return {status_code::corrupt,
                            fmt::format("meta_info.completion_tokens went back from {} to {}", last_output_len_, n)};
                if (new_tokens == 0) return {}; // sglang skips it without moving the last token time
                token_event(t, new_tokens);
            }
            out_.output_len = n;
            last_output_len_ = n;
        } else {
            if (d.contains("usage") && d["usage"].is_object() && d["usage"].contains("completion_tokens"))
                out_.output_len = d["usage"]["completion_tokens"].get<std::int64_t>();
            const auto ch = d.find("choices");
            if (ch == d.end() || !ch->is_array() || ch->empty()) return {}; // the include_usage chunk
            const auto &c0 = (*ch)[0];
            const auto tx = c0.find("text");
            if (tx == c0.end() || !tx->is_string() || tx->get_ref<const std::string &>().empty()) return {};
            token_event(t, 1);
            out_.generated_text += tx->get<std::string>();
        }
    } catch (const std::exception &e) {
        return {status_code::corrupt,
                fmt::format("unexpected stream chunk ({}): {}", e.what(), payload.substr(0, 200))};
    }
    return {};
}

status stream_accumulator::on_line(std::string_view raw, double t) {
    auto line = strip(raw);
    if (line.empty()) return {};
    if (line.front() == ':' || line.starts_with("event:") || line.starts_with("id:") || line.starts_with("retry:"))
        return {};
    if (line.starts_with("data:")) line = strip(line.substr(5));
    out_.latency = t; // sglang: every non-empty line, the [DONE] included
    if (line == "[DONE]") return {};
    return on_data(line, t);
}

status stream_accumulator::on_bytes(std::string_view bytes, double t) {
    status st;
    lines_.feed(bytes, [&](std::string_view l) {
        if (st.ok()) st = on_line(l, t);
    });
    return st;
}

status stream_accumulator::finish(double t) {
    status st;
    lines_.finish([&](std::string_view l) { st = on_line(l, t); });
    if (!st.ok()) return st;
    if (!first_token_) return {status_code::internal, "the stream ended without any token"};
    return {};
}

} // namespace fp4moe::loadgen
