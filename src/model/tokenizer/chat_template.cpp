// Chat templates as small renderers, one per family, transcribing the families' Jinja templates without tools
// (Qwen3's tokenizer_config.json, GLM-4.5's chat_template.jinja, DeepSeek-V3's tokenizer_config.json), with
// their Python string operations (strip, split on "</think>") written out.
#include "core/error.h"
#include "model/tokenizer/internal.h"

namespace fp4moe {

namespace {

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
    while (left && !s.empty() && chars.find(s.front()) != std::string_view::npos) s.remove_prefix(1);
    while (right && !s.empty() && chars.find(s.back()) != std::string_view::npos) s.remove_suffix(1);
    return s;
}

// out += a + b + ...; spelled as appends (GCC 12 warns falsely about `"lit" + std::string` under -O3).
template <typename... Parts>
void append(std::string &out, const Parts &...parts) {
    (out.append(std::string_view(parts)), ...);
}

constexpr std::string_view kNl = "\n";
constexpr std::string_view kWs = " \t\n\r\v\f"; // Python str.strip() without arguments (ASCII part)

// The templates' reasoning split: content "<think>r</think>c" -> reasoning "r", content "c" (Jinja:
// content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n'), content.split('</think>')[-1]
// .lstrip('\n')). Returns false when there is no "</think>".
bool split_reasoning(std::string_view content, std::string &reasoning, std::string &rest) {
    const size_t close = content.find("</think>");
    if (close == std::string_view::npos) return false;
    std::string_view before = strip_chars(content.substr(0, close), kNl, false, true);
    const size_t open = before.rfind("<think>");
    if (open != std::string_view::npos) before = before.substr(open + 7);
    reasoning = std::string(strip_chars(before, kNl, true, false));
    rest = std::string(strip_chars(content.substr(content.rfind("</think>") + 8), kNl, true, false));
    return true;
}

void check_roles(std::span<const chat_message> messages, bool allow_tool) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string &r = messages[i].role;
        if (r != "system" && r != "user" && r != "assistant" && !(allow_tool && r == "tool"))
            fail(status_code::invalid_argument, "chat message {}: role \"{}\" is not supported by this template", i, r);
    }
}

std::string render_chatml(std::span<const chat_message> m, bool gen) {
    check_roles(m, true);
    std::string out;
    const size_t n = m.size();
    if (n && m[0].role == "system") append(out, "<|im_start|>system\n", m[0].content, "<|im_end|>\n");
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        const std::string &c = m[k].content;
        const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
        if (m[k].role == "user" && !tool_response) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; ++i) {
        const chat_message &msg = m[i];
        if (msg.role == "user" || (msg.role == "system" && i != 0)) {
            append(out, "<|im_start|>", msg.role, "\n", msg.content, "<|im_end|>\n");
        } else if (msg.role == "assistant") {
            std::string reasoning, content = msg.content;
            split_reasoning(msg.content, reasoning, content);
            if (i > last_query && (i + 1 == n || !reasoning.empty())) {
                append(out, "<|im_start|>assistant\n<think>\n", strip_chars(reasoning, kNl, true, true),
                       "\n</think>\n\n", strip_chars(content, kNl, true, false));
            } else {
                append(out, "<|im_start|>assistant\n", content);
            }
            out += "<|im_end|>\n";
        } else if (msg.role == "tool") {
            if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
            append(out, "\n<tool_response>\n", msg.content, "\n</tool_response>");
            if (i + 1 == n || m[i + 1].role != "tool") out += "<|im_end|>\n";
        }
    }
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

std::string render_glm(std::span<const chat_message> m, bool gen) {
    check_roles(m, false);
    std::string out = "[gMASK]<sop>";
    size_t last_user = SIZE_MAX;
    for (size_t i = 0; i < m.size(); ++i)
        if (m[i].role == "user") last_user = i;
    for (size_t i = 0; i < m.size(); ++i) {
        const chat_message &msg = m[i];
        if (msg.role == "user") {
            append(out, "<|user|>\n", msg.content);
        } else if (msg.role == "system") {
            append(out, "<|system|>\n", msg.content);
        } else {
            std::string reasoning, content = msg.content;
            split_reasoning(msg.content, reasoning, content);
            out += "<|assistant|>";
            const bool after_last_user = last_user == SIZE_MAX || i > last_user;
            if (after_last_user && !reasoning.empty())
                append(out, "\n<think>", strip_chars(reasoning, kWs, true, true), "</think>");
            else
                out += "\n<think></think>";
            const std::string_view body = strip_chars(content, kWs, true, true);
            if (!body.empty()) append(out, "\n", body);
        }
    }
    if (gen) out += "<|assistant|>";
    return out;
}

std::string render_deepseek(std::span<const chat_message> m, bool gen, std::string_view bos) {
    check_roles(m, false);
    std::string system;
    bool first = true;
    for (const chat_message &msg : m) {
        if (msg.role != "system") continue;
        append(system, first ? "" : "\n\n", msg.content);
        first = false;
    }
    std::string out(bos);
    out += system;
    for (const chat_message &msg : m) {
        if (msg.role == "user") append(out, "<｜User｜>", msg.content);
        if (msg.role == "assistant") append(out, "<｜Assistant｜>", msg.content, "<｜end▁of▁sentence｜>");
    }
    if (gen) out += "<｜Assistant｜>";
    return out;
}

} // namespace

const char *chat_format_name(chat_format format) {
    switch (format) {
    case chat_format::chatml:
        return "chatml";
    case chat_format::glm:
        return "glm";
    case chat_format::deepseek:
        return "deepseek";
    case chat_format::none:
        break;
    }
    return "none";
}

chat_format detect_chat_format(std::string_view t) {
    if (t.find("<|im_start|>") != std::string_view::npos) return chat_format::chatml;
    if (t.find("[gMASK]") != std::string_view::npos || t.find("<|assistant|>") != std::string_view::npos)
        return chat_format::glm;
    if (t.find("<｜User｜>") != std::string_view::npos) return chat_format::deepseek;
    return chat_format::none;
}

result<std::string> render_chat(chat_format format, std::span<const chat_message> messages, bool add_generation_prompt,
                                std::string_view bos_token) {
    std::string out;
    const status st = catch_status([&] {
        switch (format) {
        case chat_format::chatml:
            out = render_chatml(messages, add_generation_prompt);
            return;
        case chat_format::glm:
            out = render_glm(messages, add_generation_prompt);
            return;
        case chat_format::deepseek:
            out = render_deepseek(messages, add_generation_prompt, bos_token);
            return;
        case chat_format::none:
            break;
        }
        fail(status_code::unsupported, "no chat template: the checkpoint has none this build recognizes");
    });
    if (!st.ok()) return st;
    return out;
}

} // namespace fp4moe
