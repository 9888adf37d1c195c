#include "server/request_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <limits>

namespace fp4moe::server {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr double kFloatMax = FLT_MAX;

bool present(const json &obj, std::string_view key) {
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null();
}

/// The sampling fields OpenAI (and vLLM's extensions) and SGLang's sampling_params share, with the same
/// names. Semantic ranges are left to `validate` (see check_params) so there is one definition of them.
void read_sampling(const json &o, sampling_params &p, const parse_limits &lim, const std::string &prefix) {
    auto name = [&](const char *k) { return prefix + k; };
    if (auto v = get_float(o, "temperature", -kFloatMax, kFloatMax, name("temperature"))) p.temperature = *v;
    if (auto v = get_float(o, "top_p", -kFloatMax, kFloatMax, name("top_p"))) p.top_p = *v;
    if (auto v = get_int(o, "top_k", std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(),
                         name("top_k")))
        p.top_k = static_cast<std::int32_t>(*v);
    if (auto v = get_float(o, "min_p", -kFloatMax, kFloatMax, name("min_p"))) p.min_p = *v;
    if (auto v = get_float(o, "repetition_penalty", -kFloatMax, kFloatMax, name("repetition_penalty")))
        p.repetition_penalty = *v;
    if (auto v = get_float(o, "presence_penalty", -kFloatMax, kFloatMax, name("presence_penalty")))
        p.presence_penalty = *v;
    if (auto v = get_float(o, "frequency_penalty", -kFloatMax, kFloatMax, name("frequency_penalty")))
        p.frequency_penalty = *v;
    p.stop = get_stop(o, "stop", lim.max_stop, lim.max_stop_bytes, name("stop"));
    if (present(o, "stop_token_ids")) {
        const json &ids = o["stop_token_ids"];
        p.stop_token_ids = get_token_ids(ids, name("stop_token_ids"), lim.vocab, 256);
    }
    if (auto v = get_bool(o, "ignore_eos", name("ignore_eos"))) p.ignore_eos = *v;
    if (auto v = get_bool(o, "skip_special_tokens", name("skip_special_tokens"))) p.skip_special_tokens = *v;
}

/// `validate` names the parameter first in its message; map it to the field the client used.
void check_params(const generation_request &r, const parse_limits &lim) {
    if (auto st = validate(r.params, lim.vocab); !st.ok()) {
        const std::string &m = st.message();
        std::size_t n = 0;
        while (n < m.size() && (std::islower(static_cast<unsigned char>(m[n])) || m[n] == '_')) ++n;
        std::string param = m.substr(0, n);
        if (param == "max_tokens")
            param = r.max_tokens_param;
        else
            param = r.param_prefix + param;
        throw bad_request(m, param);
    }
}

/// Context checks for every prompt, then max_tokens: given -> must fit; not given -> `dflt`, clamped to what
/// fits (never a derived budget below 1: a prompt that fills the context is refused as too long).
void set_max_tokens(generation_request &r, std::optional<std::int64_t> given, std::int64_t dflt,
                    const parse_limits &lim) {
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < r.prompts.size(); ++i) {
        const auto n = static_cast<std::int64_t>(r.prompts[i].size());
        if (n >= lim.max_model_len)
            throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, your {}{} has "
                                          "{} tokens, which leaves no room for a generated token.",
                                          lim.max_model_len, r.prompt_param,
                                          r.prompts.size() > 1 ? fmt::format("[{}]", i) : std::string(), n),
                              r.prompt_param);
        longest = std::max(longest, n);
    }
    // The last sampled token is never fed back: a request needs prompt + max_tokens - 1 KV positions.
    const std::int64_t room = std::min(lim.max_model_len - longest, lim.kv_positions - longest + 1);
    if (given) {
        if (*given > lim.max_model_len - longest)
            throw bad_request(fmt::format("{} is too large: {}. This model's maximum context length is {} tokens and "
                                          "your request has {} prompt tokens ({} > {} - {}).",
                                          r.max_tokens_param, *given, lim.max_model_len, longest, *given,
                                          lim.max_model_len, longest),
                              r.max_tokens_param);
        r.params.max_tokens = *given; // the KV capacity check is the engine's (its message names both numbers)
    } else {
        r.params.max_tokens = std::max<std::int64_t>(1, std::min(dflt, room));
    }
}

std::vector<std::int32_t> encode_text(const tokenizer &tok, const std::string &text, const std::string &param,
                                      bool add_special) {
    if (text.empty()) throw bad_request(fmt::format("{} must not be empty", param), param);
    auto ids = tok.encode(text, true, add_special);
    if (!ids.ok()) throw bad_request(fmt::format("{}: {}", param, ids.get_status().message()), param);
    if (ids.value().empty()) throw bad_request(fmt::format("{} encodes to no tokens", param), param);
    return std::move(ids.value());
}

/// n, stream and stream_options (OpenAI routes).
void read_common(const json &b, generation_request &r, const parse_limits &lim) {
    r.n = static_cast<int>(get_int(b, "n", 1, lim.max_n).value_or(1));
    if (auto bo = get_int(b, "best_of", 1, lim.max_n); bo && *bo != r.n)
        refuse_if(true, "best_of", "only best_of == n is supported (every sample is returned)");
    r.stream = get_bool(b, "stream").value_or(false);
    if (auto so = get_object(b, "stream_options")) {
        if (!r.stream) throw bad_request("stream_options can only be given when stream is true", "stream_options");
        r.include_usage = get_bool(*so, "include_usage", "stream_options.include_usage").value_or(false);
    }
    if (auto v = get_int(b, "seed", kInt64Min, kInt64Max)) r.params.seed = *v;
    if (auto v = get_int(b, "min_tokens", 0, kInt64Max); v && *v > 0)
        refuse_if(true, "min_tokens", "a minimum length is not implemented");
    if (present(b, "logit_bias") && !(b["logit_bias"].is_object() && b["logit_bias"].empty()))
        refuse_if(true, "logit_bias", "logit biases are not implemented");
    if (present(b, "response_format")) {
        const json &rf = b["response_format"];
        if (!(rf.is_object() && rf.value("type", "") == "text"))
            refuse_if(true, "response_format", "only {\"type\": \"text\"} is implemented");
    }
    if (present(b, "guided_json") || present(b, "guided_regex") || present(b, "guided_choice"))
        refuse_if(true, "guided_json", "guided decoding is not implemented");
}

void check_choices(const generation_request &r, const parse_limits &lim) {
    if (r.choices() > lim.max_choices)
        throw bad_request(fmt::format("this request asks for {} completions ({} prompts x n = {}); at most {} are "
                                      "allowed",
                                      r.choices(), r.prompts.size(), r.n, lim.max_choices),
                          "n");
}

} // namespace

void check_model(const json &body, const parse_limits &lim) {
    auto m = get_string(body, "model");
    if (!m) return;
    if (std::find(lim.model_names.begin(), lim.model_names.end(), *m) != lim.model_names.end()) return;
    throw api_error{404, fmt::format("The model `{}` does not exist.", quote_for_message(*m)), "model", {}};
}

generation_request parse_completion(const json &b, const tokenizer &tok, const parse_limits &lim) {
    check_model(b, lim);
    generation_request r;
    read_common(b, r, lim);
    read_sampling(b, r.params, lim, "");
    if (get_bool(b, "echo").value_or(false)) refuse_if(true, "echo", "echoing the prompt is not implemented");
    if (present(b, "suffix")) refuse_if(true, "suffix", "insertion (suffix) is not implemented");
    if (auto lp = get_int(b, "logprobs", 0, kInt64Max)) {
        if (*lp > 0)
            refuse_if(true, "logprobs",
                      fmt::format("top-{} alternatives are not implemented; logprobs=0 reports the chosen tokens' "
                                  "log-probabilities",
                                  *lp));
        r.logprobs = true;
    }

    // prompt: a string, a list of token ids, a list of strings, or a list of token-id lists.
    if (!present(b, "prompt")) throw bad_request("prompt is required", "prompt");
    const json &p = b["prompt"];
    if (p.is_string()) {
        r.prompts.push_back(encode_text(tok, p.get<std::string>(), "prompt", true));
    } else if (p.is_array()) {
        if (p.empty()) throw bad_request("prompt must not be empty", "prompt");
        if (p[0].is_number() || p[0].is_boolean()) {
            r.prompts.push_back(get_token_ids(p, "prompt", lim.vocab, kInt64Max));
        } else {
            if (p.size() > static_cast<std::size_t>(lim.max_choices))
                throw bad_request(
                    fmt::format("prompt has {} entries; at most {} are allowed", p.size(), lim.max_choices), "prompt");
            for (std::size_t i = 0; i < p.size(); ++i) {
                const std::string name = fmt::format("prompt[{}]", i);
                if (p[i].is_string()) {
                    r.prompts.push_back(encode_text(tok, p[i].get<std::string>(), name, true));
                } else if (p[i].is_array()) {
                    if (p[i].empty()) throw bad_request(fmt::format("{} must not be empty", name), "prompt");
                    r.prompts.push_back(get_token_ids(p[i], name, lim.vocab, kInt64Max));
                } else {
                    throw bad_request(
                        fmt::format("{} must be a string or a list of token ids, got {}", name, json_type_name(p[i])),
                        "prompt");
                }
            }
        }
    } else {
        throw bad_request(fmt::format("prompt must be a string or an array, got {}", json_type_name(p)), "prompt");
    }
    check_choices(r, lim);

    auto mt = get_int(b, "max_tokens", 1, kInt64Max);
    set_max_tokens(r, mt, 16, lim); // OpenAI's default for completions
    check_params(r, lim);
    return r;
}

generation_request parse_chat(const json &b, const tokenizer &tok, const parse_limits &lim) {
    check_model(b, lim);
    generation_request r;
    r.chat = true;
    r.prompt_param = "messages";
    read_common(b, r, lim);
    read_sampling(b, r.params, lim, "");
    if (present(b, "tools") && !(b["tools"].is_array() && b["tools"].empty()))
        refuse_if(true, "tools", "tool calling is not implemented");
    if (present(b, "tool_choice") && b["tool_choice"] != "none")
        refuse_if(true, "tool_choice", "tool calling is not implemented");
    if (present(b, "chat_template"))
        refuse_if(true, "chat_template", "templates come from the checkpoint; a request cannot supply one");
    if (get_bool(b, "echo").value_or(false)) refuse_if(true, "echo", "echoing the prompt is not implemented");
    const bool logprobs = get_bool(b, "logprobs").value_or(false);
    if (auto tl = get_int(b, "top_logprobs", 0, 20)) {
        if (!logprobs) throw bad_request("top_logprobs needs logprobs to be true", "top_logprobs");
        if (*tl > 0)
            refuse_if(true, "top_logprobs",
                      "top alternatives are not implemented; logprobs=true with top_logprobs=0 (or absent) reports the "
                      "chosen tokens' log-probabilities");
    }
    r.logprobs = logprobs;
    const bool add_generation_prompt = get_bool(b, "add_generation_prompt").value_or(true);

    if (!present(b, "messages")) throw bad_request("messages is required", "messages");
    const json &ms = b["messages"];
    if (!ms.is_array())
        throw bad_request(fmt::format("messages must be an array, got {}", json_type_name(ms)), "messages");
    if (ms.empty()) throw bad_request("messages must not be empty", "messages");
    std::vector<chat_message> msgs;
    for (std::size_t i = 0; i < ms.size(); ++i) {
        const json &m = ms[i];
        const std::string at = fmt::format("messages[{}]", i);
        if (!m.is_object()) throw bad_request(fmt::format("{} must be an object, got {}", at, json_type_name(m)), at);
        auto role = get_string(m, "role", at + ".role");
        if (!role) throw bad_request(fmt::format("{}.role is required", at), at + ".role");
        if (*role == "developer") *role = "system"; // OpenAI's newer name for the system role
        if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
            throw bad_request(fmt::format("{}.role must be one of system, user, assistant, tool; got \"{}\"", at,
                                          quote_for_message(*role)),
                              at + ".role");
        std::string content;
        if (present(m, "content")) {
            const json &c = m["content"];
            if (c.is_string()) {
                content = c.get<std::string>();
            } else if (c.is_array()) {
                // Content parts: text only.
                for (std::size_t j = 0; j < c.size(); ++j) {
                    const std::string pat = fmt::format("{}.content[{}]", at, j);
                    if (!c[j].is_object()) throw bad_request(fmt::format("{} must be an object", pat), pat);
                    auto type = get_string(c[j], "type", pat + ".type");
                    if (type != "text")
                        throw bad_request(fmt::format("{}.type must be \"text\" (other content parts are not "
                                                      "implemented)",
                                                      pat),
                                          pat + ".type");
                    auto text = get_string(c[j], "text", pat + ".text");
                    if (!text) throw bad_request(fmt::format("{}.text is required", pat), pat + ".text");
                    content += *text;
                }
            } else {
                throw bad_request(fmt::format("{}.content must be a string or an array of content parts, got {}", at,
                                              json_type_name(c)),
                                  at + ".content");
            }
        }
        msgs.push_back({*role, std::move(content)});
    }
    auto text = tok.apply_chat_template(msgs, add_generation_prompt);
    if (!text.ok()) throw bad_request(fmt::format("messages: {}", text.get_status().message()), "messages");
    auto ids = tok.encode(text.value(), true, false); // the template writes its own prefix
    if (!ids.ok()) throw bad_request(fmt::format("messages: {}", ids.get_status().message()), "messages");
    if (ids.value().empty()) throw bad_request("messages render to an empty prompt", "messages");
    r.prompts.push_back(std::move(ids.value()));
    check_choices(r, lim);

    auto mt = get_int(b, "max_completion_tokens", 1, kInt64Max);
    if (mt)
        r.max_tokens_param = "max_completion_tokens";
    else
        mt = get_int(b, "max_tokens", 1, kInt64Max);
    set_max_tokens(r, mt, kInt64Max, lim); // chat: up to the context by default (vLLM, OpenAI)
    check_params(r, lim);
    return r;
}

generation_request parse_generate(const json &b, const tokenizer &tok, const parse_limits &lim) {
    generation_request r;
    r.param_prefix = "sampling_params.";
    r.max_tokens_param = "sampling_params.max_new_tokens";
    r.stream = get_bool(b, "stream").value_or(false);
    r.logprobs = get_bool(b, "return_logprob").value_or(false);
    if (auto n = get_int(b, "top_logprobs_num", 0, kInt64Max); n && *n > 0)
        refuse_if(true, "top_logprobs_num", "top alternatives are not implemented");
    if (present(b, "lora_path")) refuse_if(true, "lora_path", "LoRA adapters are not implemented");
    if (present(b, "image_data")) refuse_if(true, "image_data", "images are not implemented");
    if (auto rid = get_string(b, "rid")) r.rid = quote_for_message(*rid, 128);

    const bool has_text = present(b, "text"), has_ids = present(b, "input_ids");
    if (has_text == has_ids) throw bad_request("exactly one of text and input_ids must be given", "text");
    if (has_text) {
        r.prompt_param = "text";
        const json &t = b["text"];
        if (t.is_array()) refuse_if(true, "text", "batched prompts (a list) are not implemented; send one per request");
        if (!t.is_string()) throw bad_request(fmt::format("text must be a string, got {}", json_type_name(t)), "text");
        r.prompts.push_back(encode_text(tok, t.get<std::string>(), "text", true));
    } else {
        r.prompt_param = "input_ids";
        const json &ids = b["input_ids"];
        if (ids.is_array() && !ids.empty() && ids[0].is_array())
            refuse_if(true, "input_ids", "batched prompts (a list of lists) are not implemented");
        auto v = get_token_ids(ids, "input_ids", lim.vocab, kInt64Max);
        if (v.empty()) throw bad_request("input_ids must not be empty", "input_ids");
        r.prompts.push_back(std::move(v));
    }

    json sp = get_object(b, "sampling_params").value_or(json::object());
    // Known sampling_params that change nothing here are accepted; unknown ones are refused, since SGLang's
    // would change the output (regex, json_schema, ...).
    static const char *const known[] = {"max_new_tokens",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "min_p",
                                        "frequency_penalty",
                                        "presence_penalty",
                                        "repetition_penalty",
                                        "stop",
                                        "stop_token_ids",
                                        "ignore_eos",
                                        "skip_special_tokens",
                                        "n",
                                        "min_new_tokens",
                                        "no_stop_trim",
                                        "spaces_between_special_tokens",
                                        "sampling_seed"};
    for (auto it = sp.begin(); it != sp.end(); ++it)
        if (std::find_if(std::begin(known), std::end(known), [&](const char *k) { return it.key() == k; }) ==
            std::end(known))
            refuse_if(true, "sampling_params." + quote_for_message(it.key()), "not implemented");
    read_sampling(sp, r.params, lim, "sampling_params.");
    if (auto v = get_int(sp, "n", 1, kInt64Max, "sampling_params.n"); v && *v != 1)
        refuse_if(true, "sampling_params.n", "n > 1 on /generate is not implemented (use /v1/completions)");
    if (auto v = get_int(sp, "min_new_tokens", 0, kInt64Max, "sampling_params.min_new_tokens"); v && *v > 0)
        refuse_if(true, "sampling_params.min_new_tokens", "a minimum length is not implemented");
    if (get_bool(sp, "no_stop_trim", "sampling_params.no_stop_trim").value_or(false))
        refuse_if(true, "sampling_params.no_stop_trim", "stop strings are always trimmed");
    if (auto v = get_int(sp, "sampling_seed", kInt64Min, kInt64Max, "sampling_params.sampling_seed"))
        r.params.seed = *v;
    auto mt = get_int(sp, "max_new_tokens", 1, kInt64Max, "sampling_params.max_new_tokens");
    set_max_tokens(r, mt, 128, lim); // SGLang's default
    check_params(r, lim);
    return r;
}

} // namespace fp4moe::server
