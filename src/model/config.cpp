// config.json and the ModelOpt quantization config. Errors name the file and the field.
#include "model/config.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fp4moe {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

json read_json(const std::string &path) {
    std::ifstream in(path);
    if (!in) fail(status_code::not_found, "{}: cannot open", path);
    try {
        return json::parse(in);
    } catch (const json::exception &e) {
        fail(status_code::corrupt, "{}: not valid JSON: {}", path, e.what());
    }
}

// Typed field access with errors that name the file and the field.
struct fields {
    const json &j;
    const std::string &file;

    const json *find(const char *name) const {
        auto it = j.find(name);
        return (it == j.end() || it->is_null()) ? nullptr : &*it;
    }
    std::int64_t integer(const char *name) const {
        const json *v = find(name);
        if (!v) fail(status_code::invalid_argument, "{}: missing field '{}'", file, name);
        return as_int(*v, name);
    }
    std::int64_t integer(const char *name, std::int64_t fallback) const {
        const json *v = find(name);
        return v ? as_int(*v, name) : fallback;
    }
    double number(const char *name, double fallback) const {
        const json *v = find(name);
        if (!v) return fallback;
        if (!v->is_number())
            fail(status_code::invalid_argument, "{}: field '{}' must be a number, got {}", file, name, v->dump());
        return v->get<double>();
    }
    bool boolean(const char *name, bool fallback) const {
        const json *v = find(name);
        if (!v) return fallback;
        if (!v->is_boolean())
            fail(status_code::invalid_argument, "{}: field '{}' must be true or false, got {}", file, name, v->dump());
        return v->get<bool>();
    }
    std::string string(const char *name, const std::string &fallback) const {
        const json *v = find(name);
        if (!v) return fallback;
        if (!v->is_string())
            fail(status_code::invalid_argument, "{}: field '{}' must be a string, got {}", file, name, v->dump());
        return v->get<std::string>();
    }
    std::vector<std::int64_t> int_list(const char *name) const { // an int or a list of ints
        const json *v = find(name);
        if (!v) return {};
        if (v->is_number_integer()) return {v->get<std::int64_t>()};
        std::vector<std::int64_t> out;
        if (!v->is_array())
            fail(status_code::invalid_argument, "{}: field '{}' must be an integer or a list of integers", file, name);
        for (const auto &x : *v) out.push_back(as_int(x, name));
        return out;
    }
    std::int64_t as_int(const json &v, const char *name) const {
        if (!v.is_number_integer())
            fail(status_code::invalid_argument, "{}: field '{}' must be an integer, got {}", file, name, v.dump());
        return v.get<std::int64_t>();
    }
};

void require(bool ok, const std::string &file, const std::string &what) {
    if (!ok) fail(status_code::invalid_argument, "{}: {}", file, what);
}

std::vector<std::string> string_list(const json &j, const char *name, const std::string &file) {
    std::vector<std::string> out;
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return out;
    if (!it->is_array()) fail(status_code::invalid_argument, "{}: '{}' must be a list of strings", file, name);
    for (const auto &s : *it) {
        if (!s.is_string()) fail(status_code::invalid_argument, "{}: '{}' must be a list of strings", file, name);
        out.push_back(s.get<std::string>());
    }
    return out;
}

quant_config parse_quant(const json &q, const std::string &file, bool legacy_file) {
    quant_config qc;
    qc.source = file;
    // hf_quant_config.json nests everything under "quantization"; config.json's block is flat.
    const json &body = legacy_file ? (q.contains("quantization") ? q["quantization"] : q) : q;
    fields f{body, file};
    if (!legacy_file) {
        const std::string method = f.string("quant_method", "");
        if (method != "modelopt")
            fail(status_code::unsupported,
                 "{}: quantization_config.quant_method '{}' is not supported (only ModelOpt "
                 "NVFP4 checkpoints, quant_method \"modelopt\")",
                 file, method);
    }
    qc.quant_algo = f.string("quant_algo", "");
    if (qc.quant_algo != "NVFP4" && qc.quant_algo != "W4A16_NVFP4" && qc.quant_algo != "MIXED_PRECISION")
        fail(status_code::unsupported, "{}: quant_algo '{}' is not supported (NVFP4, W4A16_NVFP4, MIXED_PRECISION)",
             file, qc.quant_algo);
    qc.group_size = static_cast<int>(f.integer("group_size", 16));
    require(qc.group_size == 16, file, fmt::format("group_size {} is not NVFP4's 16", qc.group_size));
    qc.kv_cache_quant_algo = f.string("kv_cache_quant_algo", "");
    qc.exclude = string_list(body, legacy_file ? "exclude_modules" : "ignore", file);
    if (qc.quant_algo == "MIXED_PRECISION") {
        auto it = body.find("quantized_layers");
        require(it != body.end() && it->is_object(), file, "MIXED_PRECISION needs a 'quantized_layers' object");
        for (auto &[name, layer] : it->items()) {
            const std::string algo = layer.is_object() ? layer.value("quant_algo", "") : "";
            if (algo == "NVFP4")
                qc.quantized.push_back(name);
            else
                fail(status_code::unsupported, "{}: quantized_layers['{}'] uses '{}'; only NVFP4 layers are supported",
                     file, name, algo);
        }
    }
    return qc;
}

} // namespace

const char *model_arch_name(model_arch a) {
    switch (a) {
    case model_arch::glm4_moe:
        return "Glm4MoeForCausalLM";
    case model_arch::qwen3_moe:
        return "Qwen3MoeForCausalLM";
    case model_arch::deepseek_v3:
        return "DeepseekV3ForCausalLM";
    case model_arch::glm_moe_dsa:
        return "GlmMoeDsaForCausalLM";
    }
    return "?";
}

bool model_arch_uses_mla(model_arch a) {
    return a == model_arch::deepseek_v3 || a == model_arch::glm_moe_dsa;
}

bool module_pattern_match(const std::string &pattern, const std::string &module) {
    // Iterative glob with '*' only; then "pattern names a parent of module".
    auto glob = [](std::string_view p, std::string_view s) {
        std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
        while (si < s.size()) {
            if (pi < p.size() && p[pi] == '*') {
                star = pi++;
                mark = si;
            } else if (pi < p.size() && p[pi] == s[si]) {
                ++pi, ++si;
            } else if (star != std::string_view::npos) {
                pi = star + 1;
                si = ++mark;
            } else {
                return false;
            }
        }
        while (pi < p.size() && p[pi] == '*') ++pi;
        return pi == p.size();
    };
    if (glob(pattern, module)) return true;
    for (std::size_t dot = module.find('.'); dot != std::string::npos; dot = module.find('.', dot + 1))
        if (glob(pattern, std::string_view(module).substr(0, dot))) return true;
    return false;
}

bool quant_config::module_is_nvfp4(const std::string &module) const {
    if (!nvfp4()) return false;
    if (quant_algo == "MIXED_PRECISION") {
        for (const auto &q : quantized)
            if (module_pattern_match(q, module)) return true;
        return false;
    }
    for (const auto &e : exclude)
        if (module_pattern_match(e, module)) return false;
    return true;
}

bool model_config::is_moe_layer(std::int64_t layer) const {
    if (num_experts == 0) return false;
    if (arch == model_arch::qwen3_moe) {
        for (auto l : mlp_only_layers)
            if (l == layer) return false;
        return (layer + 1) % decoder_sparse_step == 0;
    }
    return layer >= first_k_dense_replace;
}

moe_desc model_config::moe(moe_weight_format w, bool shared_as_slots) const {
    moe_desc d;
    d.hidden = hidden_size;
    d.intermediate = moe_intermediate_size;
    d.experts = num_experts;
    d.top_k = num_experts_per_tok;
    d.shared = shared_as_slots ? n_shared_experts : 0;
    d.weights = w;
    d.routing = routing;
    return d;
}

result<model_config> load_model_config(const std::string &dir) {
    model_config c;
    auto st = catch_status([&] {
        const std::string file = (fs::path(dir) / "config.json").string();
        if (!fs::exists(file))
            fail(status_code::not_found, "{}: no config.json (is '{}' a Hugging Face checkpoint directory?)", file,
                 dir);
        const json j = read_json(file);
        require(j.is_object(), file, "top level must be a JSON object");
        fields f{j, file};
        c.dir = dir;
        std::string arch;
        if (auto *a = f.find("architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
            arch = (*a)[0].get<std::string>();
        c.model_type = f.string("model_type", "");
        if (arch == "Glm4MoeForCausalLM" || (arch.empty() && c.model_type == "glm4_moe"))
            c.arch = model_arch::glm4_moe;
        else if (arch == "Qwen3MoeForCausalLM" || (arch.empty() && c.model_type == "qwen3_moe"))
            c.arch = model_arch::qwen3_moe;
        else if (arch == "DeepseekV3ForCausalLM" || (arch.empty() && c.model_type == "deepseek_v3"))
            c.arch = model_arch::deepseek_v3;
        else if (arch == "GlmMoeDsaForCausalLM" || (arch.empty() && c.model_type == "glm_moe_dsa"))
            c.arch = model_arch::glm_moe_dsa;
        else
            fail(status_code::unsupported,
                 "{}: architecture '{}' (model_type '{}') is not supported; supported: Glm4MoeForCausalLM, "
                 "Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GlmMoeDsaForCausalLM",
                 file, arch, c.model_type);

        c.vocab_size = f.integer("vocab_size");
        c.hidden_size = f.integer("hidden_size");
        c.num_layers = f.integer("num_hidden_layers");
        c.num_heads = f.integer("num_attention_heads");
        c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
        c.intermediate_size = f.integer("intermediate_size", 0);
        c.max_position_embeddings = f.integer("max_position_embeddings", 4096);
        c.rms_norm_eps = static_cast<float>(f.number("rms_norm_eps", 1e-6));
        c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
        c.attention_bias = f.boolean("attention_bias", false);
        // transformers >= 5 moves rope settings into rope_parameters; older configs keep them at the top.
        c.rope_theta = static_cast<float>(f.number("rope_theta", 10000.0));
        double partial = f.number("partial_rotary_factor", c.arch == model_arch::glm4_moe ? 0.5 : 1.0);
        if (auto *rp = f.find("rope_parameters"); rp && rp->is_object()) {
            fields r{*rp, file};
            c.rope_theta = static_cast<float>(r.number("rope_theta", c.rope_theta));
            partial = r.number("partial_rotary_factor", partial);
            const std::string type = r.string("rope_type", "default");
            if (type != "default" && !model_arch_uses_mla(c.arch))
                fail(status_code::unsupported, "{}: rope_parameters.rope_type '{}' is not supported", file, type);
        }
        if (auto *rs = f.find("rope_scaling"); rs && !model_arch_uses_mla(c.arch))
            fail(status_code::unsupported, "{}: rope_scaling {} is not supported for {}", file, rs->dump(),
                 model_arch_name(c.arch));
        c.partial_rotary_factor = static_cast<float>(partial);
        c.eos_token_ids = f.int_list("eos_token_id");
        if (f.find("bos_token_id")) c.bos_token_id = f.integer("bos_token_id");
        if (f.find("pad_token_id")) c.pad_token_id = f.integer("pad_token_id");

        // MoE fields differ by family: Qwen3 says num_experts, the others n_routed_experts.
        c.moe_intermediate_size = f.integer("moe_intermediate_size");
        c.num_experts_per_tok = f.integer("num_experts_per_tok");
        auto &r = c.routing;
        if (c.arch == model_arch::qwen3_moe) {
            // transformers >= 5 writes num_local_experts; released Qwen3 checkpoints say num_experts.
            c.num_experts = f.find("num_experts") ? f.integer("num_experts") : f.integer("num_local_experts");
            c.head_dim = f.integer("head_dim", c.hidden_size / c.num_heads);
            c.qk_norm = true;
            c.decoder_sparse_step = f.integer("decoder_sparse_step", 1);
            c.mlp_only_layers = f.int_list("mlp_only_layers");
            r.scoring = moe_scoring::softmax;
            r.renormalize = f.boolean("norm_topk_prob", false);
            require(c.decoder_sparse_step >= 1, file, "decoder_sparse_step must be >= 1");
        } else {
            c.num_experts = f.integer("n_routed_experts");
            c.n_shared_experts = f.integer("n_shared_experts", 0);
            c.first_k_dense_replace = f.integer("first_k_dense_replace", 0);
            const std::string scoring = f.string("scoring_func", "sigmoid");
            require(scoring == "sigmoid", file, fmt::format("scoring_func '{}' is not supported (sigmoid)", scoring));
            const std::string method = f.string("topk_method", "noaux_tc");
            require(method == "noaux_tc", file, fmt::format("topk_method '{}' is not supported (noaux_tc)", method));
            r.scoring = moe_scoring::sigmoid;
            r.correction_bias = true;
            r.renormalize = f.boolean("norm_topk_prob", true);
            r.n_group = static_cast<int>(f.integer("n_group", 1));
            r.topk_group = static_cast<int>(f.integer("topk_group", 1));
            r.routed_scaling_factor = static_cast<float>(f.number("routed_scaling_factor", 1.0));
            if (model_arch_uses_mla(c.arch)) {
                c.q_lora_rank = f.integer("q_lora_rank", 0);
                c.kv_lora_rank = f.integer("kv_lora_rank");
                c.qk_nope_head_dim = f.integer("qk_nope_head_dim");
                c.qk_rope_head_dim = f.integer("qk_rope_head_dim");
                c.v_head_dim = f.integer("v_head_dim");
                c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
            } else {
                c.head_dim = f.integer("head_dim", c.hidden_size / c.num_heads);
                c.qk_norm = f.boolean("use_qk_norm", false);
            }
        }

        require(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0, file,
                "vocab_size, hidden_size and num_hidden_layers must be positive");
        require(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, file,
                fmt::format("num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
                            c.num_heads, c.num_kv_heads));
        require(c.head_dim > 0 && c.head_dim % 2 == 0, file,
                fmt::format("head_dim ({}) must be positive and even", c.head_dim));
        const auto rot = static_cast<std::int64_t>(c.head_dim * c.partial_rotary_factor);
        require(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1 && rot % 2 == 0, file,
                fmt::format("partial_rotary_factor {} gives an odd or empty rotary width for head_dim {}",
                            c.partial_rotary_factor, c.head_dim));
        require(c.first_k_dense_replace == 0 || c.intermediate_size > 0, file,
                "intermediate_size must be set when there are dense layers (first_k_dense_replace > 0)");
        require(c.first_k_dense_replace <= c.num_layers, file,
                fmt::format("first_k_dense_replace ({}) exceeds num_hidden_layers ({})", c.first_k_dense_replace,
                            c.num_layers));
        if (auto st = c.moe(moe_weight_format::bf16, true).validate(); !st.ok())
            fail(status_code::invalid_argument, "{}: MoE fields inconsistent: {}", file, st.message());

        // Quantization: hf_quant_config.json first (ModelOpt's legacy file), else config.json's block.
        const std::string hq = (fs::path(dir) / "hf_quant_config.json").string();
        if (fs::exists(hq))
            c.quant = parse_quant(read_json(hq), hq, true);
        else if (auto *q = f.find("quantization_config"))
            c.quant = parse_quant(*q, file + " (quantization_config)", false);
    });
    if (!st.ok()) return st;
    return c;
}

} // namespace fp4moe
