// Reads a checkpoint's tokenizer files: tokenizer.json (model, added tokens, normalizer, pre-tokenizer,
// post-processor, decoder) and the optional tokenizer_config.json, chat_template.jinja, config.json and
// generation_config.json. Every error names the file and the JSON field.
#include "core/error.h"
#include "model/tokenizer/internal.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fp4moe::tok {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(status_code::not_found, "{}: cannot open file", p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) fail(status_code::io_error, "{}: read failed", p.string());
    return ss.str();
}

json parse_json(const fs::path &p) {
    const std::string text = read_file(p);
    try {
        return json::parse(text);
    } catch (const json::parse_error &e) {
        fail(status_code::corrupt, "{}: not valid JSON: {}", p.string(), e.what());
    }
}

// Field access with the file name and dotted field path in every error.
struct reader {
    std::string file;

    const json &need(const json &obj, const std::string &path, const char *key) const {
        if (!obj.is_object() || !obj.contains(key)) fail(status_code::corrupt, "{}: field '{}' is missing", file, path);
        return obj.at(key);
    }
    std::string string_of(const json &v, const std::string &path) const {
        if (!v.is_string()) fail(status_code::corrupt, "{}: field '{}' must be a string", file, path);
        return v.get<std::string>();
    }
    bool flag(const json &obj, const char *key, const std::string &path, bool def) const {
        if (!obj.contains(key) || obj.at(key).is_null()) return def;
        if (!obj.at(key).is_boolean()) fail(status_code::corrupt, "{}: field '{}' must be a boolean", file, path);
        return obj.at(key).get<bool>();
    }
    int32_t id_of(const json &v, const std::string &path) const {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
            fail(status_code::corrupt, "{}: field '{}' must be a non-negative 32-bit integer", file, path);
        return static_cast<int32_t>(v.get<int64_t>());
    }
    [[noreturn]] void unsupported(const std::string &path, const std::string &what) const {
        fail(status_code::unsupported, "{}: field '{}': {} is not supported", file, path, what);
    }
};

std::string type_of(const reader &r, const json &v, const std::string &path) {
    return r.string_of(r.need(v, path + ".type", "type"), path + ".type");
}

void load_model(tokenizer_data &d, const reader &r, const json &root) {
    const json &m = r.need(root, "model", "model");
    if (m.contains("type") && type_of(r, m, "model") != "BPE")
        r.unsupported("model.type", fmt::format("\"{}\" (only \"BPE\")", m.at("type").get<std::string>()));
    if (r.flag(m, "byte_fallback", "model.byte_fallback", false))
        r.unsupported("model.byte_fallback", "true (byte-level BPE only)");
    for (const char *k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (m.contains(k) && !m.at(k).is_null() && m.at(k) != "") r.unsupported(fmt::format("model.{}", k), "a value");
    }
    if (m.contains("dropout") && !m.at("dropout").is_null()) r.unsupported("model.dropout", "a value");

    const json &vocab = r.need(m, "model.vocab", "vocab");
    if (!vocab.is_object()) fail(status_code::corrupt, "{}: field 'model.vocab' must be an object", r.file);
    bpe_model &bpe = d.bpe;
    bpe.vocab.reserve(vocab.size());
    for (const auto &[tok, v] : vocab.items()) {
        const int32_t id = r.id_of(v, "model.vocab[\"" + tok + "\"]");
        bpe.vocab.emplace(tok, id);
        if (static_cast<size_t>(id) >= bpe.id_to_token.size()) bpe.id_to_token.resize(static_cast<size_t>(id) + 1);
        bpe.id_to_token[static_cast<size_t>(id)] = tok;
    }
    bpe.ignore_merges = r.flag(m, "ignore_merges", "model.ignore_merges", false);
    bpe.fuse_unk = r.flag(m, "fuse_unk", "model.fuse_unk", false);
    if (m.contains("unk_token") && !m.at("unk_token").is_null()) {
        const std::string unk = r.string_of(m.at("unk_token"), "model.unk_token");
        const auto it = bpe.vocab.find(unk);
        if (it == bpe.vocab.end())
            fail(status_code::corrupt, "{}: field 'model.unk_token' (\"{}\") is not in model.vocab", r.file, unk);
        bpe.unk_id = it->second;
    }

    const json &merges = r.need(m, "model.merges", "merges");
    if (!merges.is_array()) fail(status_code::corrupt, "{}: field 'model.merges' must be an array", r.file);
    int32_t rank = 0;
    for (const json &e : merges) {
        const std::string path = fmt::format("model.merges[{}]", rank);
        if (e.is_string()) { // legacy form "a b"
            const std::string s = e.get<std::string>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                fail(status_code::corrupt, "{}: field '{}' (\"{}\") must be two tokens separated by one space", r.file,
                     path, s);
            bpe.add_merge(s.substr(0, sp), s.substr(sp + 1), rank, r.file);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            bpe.add_merge(e[0].get<std::string>(), e[1].get<std::string>(), rank, r.file);
        } else {
            fail(status_code::corrupt, "{}: field '{}' must be \"a b\" or [\"a\", \"b\"]", r.file, path);
        }
        ++rank;
    }
    bpe.finish();
}

void load_added(tokenizer_data &d, const reader &r, const json &root) {
    if (!root.contains("added_tokens") || root.at("added_tokens").is_null()) return;
    const json &arr = root.at("added_tokens");
    if (!arr.is_array()) fail(status_code::corrupt, "{}: field 'added_tokens' must be an array", r.file);
    for (size_t i = 0; i < arr.size(); ++i) {
        const std::string p = fmt::format("added_tokens[{}]", i);
        const json &e = arr[i];
        added_token t;
        t.id = r.id_of(r.need(e, p + ".id", "id"), p + ".id");
        t.content = r.string_of(r.need(e, p + ".content", "content"), p + ".content");
        if (t.content.empty() || !utf8_valid(t.content))
            fail(status_code::corrupt, "{}: field '{}.content' must be non-empty UTF-8", r.file, p);
        t.special = r.flag(e, "special", p + ".special", false);
        t.lstrip = r.flag(e, "lstrip", p + ".lstrip", false);
        t.rstrip = r.flag(e, "rstrip", p + ".rstrip", false);
        t.single_word = r.flag(e, "single_word", p + ".single_word", false);
        t.normalized = r.flag(e, "normalized", p + ".normalized", !t.special);
        d.added.push_back(std::move(t));
    }
}

void load_normalizer(tokenizer_data &d, const reader &r, const json &n, const std::string &path) {
    if (n.is_null()) return;
    const std::string type = type_of(r, n, path);
    if (type == "NFC") {
        d.nfc = true;
    } else if (type == "Sequence") {
        const json &list = r.need(n, path + ".normalizers", "normalizers");
        if (!list.is_array()) fail(status_code::corrupt, "{}: field '{}.normalizers' must be an array", r.file, path);
        for (size_t i = 0; i < list.size(); ++i)
            load_normalizer(d, r, list[i], fmt::format("{}.normalizers[{}]", path, i));
    } else {
        r.unsupported(path + ".type", fmt::format("\"{}\" (only NFC or Sequence)", type));
    }
}

void load_pre_tokenizer(tokenizer_data &d, const reader &r, const json &root) {
    const json &pt = root.contains("pre_tokenizer") ? root.at("pre_tokenizer") : json();
    if (pt.is_null()) r.unsupported("pre_tokenizer", "null (a ByteLevel step is required)");
    std::vector<std::pair<const json *, std::string>> steps;
    if (type_of(r, pt, "pre_tokenizer") == "Sequence") {
        const json &list = r.need(pt, "pre_tokenizer.pretokenizers", "pretokenizers");
        if (!list.is_array())
            fail(status_code::corrupt, "{}: field 'pre_tokenizer.pretokenizers' must be an array", r.file);
        for (size_t i = 0; i < list.size(); ++i)
            steps.emplace_back(&list[i], fmt::format("pre_tokenizer.pretokenizers[{}]", i));
    } else {
        steps.emplace_back(&pt, "pre_tokenizer");
    }
    bool byte_level = false;
    for (const auto &[s, path] : steps) {
        const std::string type = type_of(r, *s, path);
        if (byte_level) r.unsupported(path, "a step after ByteLevel");
        if (type == "Split") {
            const json &pat = r.need(*s, path + ".pattern", "pattern");
            const std::string behavior = r.string_of(r.need(*s, path + ".behavior", "behavior"), path + ".behavior");
            if (behavior != "Isolated")
                r.unsupported(path + ".behavior", fmt::format("\"{}\" (only Isolated)", behavior));
            if (r.flag(*s, "invert", path + ".invert", false)) r.unsupported(path + ".invert", "true");
            const bool literal = pat.is_object() && pat.contains("String");
            if (!literal && !(pat.is_object() && pat.contains("Regex")))
                fail(status_code::corrupt, "{}: field '{}.pattern' must hold \"Regex\" or \"String\"", r.file, path);
            const std::string text = r.string_of(pat.at(literal ? "String" : "Regex"), path + ".pattern");
            d.pre.splits.emplace_back(text, literal, r.file + ": field '" + path + ".pattern'");
        } else if (type == "ByteLevel") {
            byte_level = true;
            d.pre.add_prefix_space = r.flag(*s, "add_prefix_space", path + ".add_prefix_space", true);
            if (r.flag(*s, "use_regex", path + ".use_regex", true))
                d.pre.byte_level_regex = std::make_unique<regex>(kGpt2Pattern, false, "GPT-2 pattern");
        } else {
            r.unsupported(path + ".type", fmt::format("\"{}\" (only Split and ByteLevel)", type));
        }
    }
    if (!byte_level) r.unsupported("pre_tokenizer", "a pre-tokenizer without ByteLevel");
}

void load_post_processor(tokenizer_data &d, const reader &r, const json &pp, const std::string &path) {
    if (pp.is_null()) return;
    const std::string type = type_of(r, pp, path);
    if (type == "ByteLevel") return; // offsets only
    if (type == "Sequence") {
        const json &list = r.need(pp, path + ".processors", "processors");
        if (!list.is_array()) fail(status_code::corrupt, "{}: field '{}.processors' must be an array", r.file, path);
        for (size_t i = 0; i < list.size(); ++i)
            load_post_processor(d, r, list[i], fmt::format("{}.processors[{}]", path, i));
        return;
    }
    if (type != "TemplateProcessing")
        r.unsupported(path + ".type", fmt::format("\"{}\" (only TemplateProcessing, ByteLevel or Sequence)", type));
    if (!d.post_template.empty()) r.unsupported(path, "a second TemplateProcessing");
    const json &single = r.need(pp, path + ".single", "single");
    const json &specials = pp.contains("special_tokens") ? pp.at("special_tokens") : json::object();
    bool has_seq = false;
    for (size_t i = 0; single.is_array() && i < single.size(); ++i) {
        const json &e = single[i];
        const std::string ep = fmt::format("{}.single[{}]", path, i);
        if (e.contains("Sequence")) {
            d.post_template.push_back(-1);
            has_seq = true;
        } else if (e.contains("SpecialToken")) {
            const std::string name = r.string_of(r.need(e.at("SpecialToken"), ep + ".SpecialToken.id", "id"), ep);
            const std::string sp = path + ".special_tokens[\"" + name + "\"].ids";
            const json &st = r.need(specials, path + ".special_tokens[\"" + name + "\"]", name.c_str());
            const json &ids = r.need(st, sp, "ids");
            if (!ids.is_array()) fail(status_code::corrupt, "{}: field '{}' must be an array", r.file, sp);
            for (const json &id : ids) d.post_template.push_back(r.id_of(id, sp));
        } else {
            fail(status_code::corrupt, "{}: field '{}' must be a Sequence or a SpecialToken", r.file, ep);
        }
    }
    if (!has_seq) fail(status_code::corrupt, "{}: field '{}.single' has no Sequence", r.file, path);
}

// bos_token / eos_token: a string, {"content": "..."}, or null.
std::string special_string(const reader &r, const json &cfg, const char *key) {
    if (!cfg.contains(key) || cfg.at(key).is_null()) return {};
    const json &v = cfg.at(key);
    if (v.is_object()) return r.string_of(r.need(v, std::string(key) + ".content", "content"), key);
    return r.string_of(v, key);
}

void append_ids(std::vector<int32_t> &out, const reader &r, const json &cfg, const char *key) {
    if (!cfg.contains(key) || cfg.at(key).is_null()) return;
    const json &v = cfg.at(key);
    std::vector<int32_t> ids;
    if (v.is_array()) {
        for (const json &e : v) ids.push_back(r.id_of(e, key));
    } else {
        ids.push_back(r.id_of(v, key));
    }
    for (const int32_t id : ids)
        if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
}

void load_config_files(tokenizer_data &d, const fs::path &dir) {
    const auto lookup = [&](const std::string &s) -> int32_t {
        if (s.empty()) return -1;
        const auto a = d.added_ids.find(s);
        if (a != d.added_ids.end()) return a->second;
        const auto v = d.bpe.vocab.find(s);
        return v == d.bpe.vocab.end() ? -1 : v->second;
    };
    std::string chat_template, template_file;
    const fs::path tc = dir / "tokenizer_config.json";
    if (fs::exists(tc)) {
        const reader r{tc.string()};
        const json cfg = parse_json(tc);
        d.bos_token = special_string(r, cfg, "bos_token");
        d.bos = lookup(d.bos_token);
        d.eos = lookup(special_string(r, cfg, "eos_token"));
        if (cfg.contains("chat_template") && !cfg.at("chat_template").is_null()) {
            const json &ct = cfg.at("chat_template");
            template_file = tc.string();
            if (ct.is_string()) {
                chat_template = ct.get<std::string>();
            } else if (ct.is_array()) {
                for (const json &e : ct)
                    if (e.is_object() && e.value("name", "") == "default")
                        chat_template =
                            r.string_of(r.need(e, "chat_template[].template", "template"), "chat_template[].template");
            } else {
                fail(status_code::corrupt, "{}: field 'chat_template' must be a string or a list", tc.string());
            }
        }
    }
    if (d.eos >= 0) d.stop.push_back(d.eos);
    const fs::path jinja = dir / "chat_template.jinja";
    if (chat_template.empty() && fs::exists(jinja)) {
        chat_template = read_file(jinja);
        template_file = jinja.string();
    }
    std::string model_type;
    for (const char *name : {"generation_config.json", "config.json"}) {
        const fs::path p = dir / name;
        if (!fs::exists(p)) continue;
        const reader r{p.string()};
        const json cfg = parse_json(p);
        append_ids(d.stop, r, cfg, "eos_token_id");
        if (std::string(name) == "config.json" && cfg.contains("model_type") && cfg.at("model_type").is_string())
            model_type = cfg.at("model_type").get<std::string>();
    }
    if (!chat_template.empty()) {
        d.format = detect_chat_format(chat_template);
        if (d.format == chat_format::none)
            fail(status_code::unsupported,
                 "{}: field 'chat_template': unrecognized template (no <|im_start|>, [gMASK] or <｜User｜> marker)",
                 template_file);
    } else if (!model_type.empty()) {
        static const std::pair<const char *, chat_format> by_type[] = {
            {"qwen2", chat_format::chatml},
            {"qwen2_moe", chat_format::chatml},
            {"qwen3", chat_format::chatml},
            {"qwen3_moe", chat_format::chatml},
            {"glm4_moe", chat_format::glm},
            {"glm_moe_dsa", chat_format::glm},
            {"glm4", chat_format::glm},
            {"deepseek_v3", chat_format::deepseek},
            {"deepseek_v32", chat_format::deepseek},
            {"deepseek_v2", chat_format::deepseek},
        };
        for (const auto &[t, f] : by_type)
            if (model_type == t) d.format = f;
    }
}

} // namespace

void load_tokenizer_files(tokenizer_data &d, const std::string &path) {
    fs::path file = path, dir;
    if (fs::is_directory(file)) {
        dir = file;
        file /= "tokenizer.json";
    } else {
        dir = file.parent_path();
        if (dir.empty()) dir = ".";
    }
    d.json_path = file.string();
    const reader r{d.json_path};
    const json root = parse_json(file);
    if (!root.is_object()) fail(status_code::corrupt, "{}: the top level must be a JSON object", r.file);

    load_model(d, r, root);
    load_added(d, r, root);
    load_normalizer(d, r, root.contains("normalizer") ? root.at("normalizer") : json(), "normalizer");
    load_pre_tokenizer(d, r, root);
    load_post_processor(d, r, root.contains("post_processor") ? root.at("post_processor") : json(), "post_processor");
    const json &dec = root.contains("decoder") ? root.at("decoder") : json();
    if (dec.is_null() || type_of(r, dec, "decoder") != "ByteLevel")
        r.unsupported("decoder",
                      dec.is_null() ? "null (only ByteLevel)" : fmt::format("{} (only ByteLevel)", dec.dump()));

    // Normalized added tokens are matched in normalized text, so their content is normalized too.
    for (added_token &t : d.added) {
        if (t.normalized && d.nfc) t.content = nfc(t.content);
        d.has_normalized_added |= t.normalized;
        d.added_ids[t.content] = t.id;
    }
    d.matcher.build(d.added);

    int32_t n = static_cast<int32_t>(d.bpe.id_to_token.size());
    for (const added_token &t : d.added) n = std::max(n, t.id + 1);
    d.vocab_size = n;
    d.decoded.assign(static_cast<size_t>(n), {});
    d.special.assign(static_cast<size_t>(n), 0);
    for (size_t id = 0; id < d.bpe.id_to_token.size(); ++id) d.decoded[id] = byte_level_decode(d.bpe.id_to_token[id]);
    for (const added_token &t : d.added) {
        d.decoded[static_cast<size_t>(t.id)] = byte_level_decode(t.content);
        d.special[static_cast<size_t>(t.id)] = t.special;
    }
    load_config_files(d, dir);
}

} // namespace fp4moe::tok
