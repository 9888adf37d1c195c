// Hugging Face config.json (+ ModelOpt quantization config) for the supported architectures.
#pragma once

#include "fp4moe/moe.h"
#include "fp4moe/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp4moe {

enum class model_arch {
    glm4_moe,    ///< Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6)
    qwen3_moe,   ///< Qwen3MoeForCausalLM
    deepseek_v3, ///< DeepseekV3ForCausalLM (MLA)
    glm_moe_dsa, ///< GlmMoeDsaForCausalLM (GLM-5: MLA + DSA indexer)
};

/// "Glm4MoeForCausalLM" etc.
const char *model_arch_name(model_arch a);
/// True for the architectures whose attention is MLA (not built yet).
bool model_arch_uses_mla(model_arch a);

/// How the checkpoint is quantized, from hf_quant_config.json or config.json's quantization_config.
struct quant_config {
    std::string source;     ///< file it came from; empty for an unquantized checkpoint
    std::string quant_algo; ///< "NVFP4", "W4A16_NVFP4", "MIXED_PRECISION", or empty (bf16)
    int group_size = 16;
    std::vector<std::string> exclude;   ///< exclude_modules / ignore: modules left unquantized (wildcards)
    std::vector<std::string> quantized; ///< MIXED_PRECISION: module prefixes quantized as NVFP4
    std::string kv_cache_quant_algo;    ///< informational; the engine keeps the KV cache in bf16

    bool nvfp4() const { return !quant_algo.empty(); }
    /// Whether the Linear module `module` (e.g. "model.layers.3.mlp.experts.7.up_proj") is expected NVFP4.
    bool module_is_nvfp4(const std::string &module) const;
};

/// `pattern` matches `module` as ModelOpt/vLLM/SGLang exclusion lists do: `*` matches any run of characters
/// (dots included), the match is against the whole name, and a pattern also matches every child module of
/// what it names ("lm_head" matches "lm_head"; "model.layers.*.self_attn*" matches
/// "model.layers.0.self_attn.q_proj").
bool module_pattern_match(const std::string &pattern, const std::string &module);

/// The fields of config.json that the engine uses, with the families' defaults filled in.
struct model_config {
    std::string dir;
    model_arch arch = model_arch::glm4_moe;
    std::string model_type;

    std::int64_t vocab_size = 0;
    std::int64_t hidden_size = 0;
    std::int64_t num_layers = 0;
    std::int64_t num_heads = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0;          ///< attention head width (GQA)
    std::int64_t intermediate_size = 0; ///< dense MLP width
    std::int64_t max_position_embeddings = 0;
    float rms_norm_eps = 1e-6f;
    float rope_theta = 10000.0f;
    float partial_rotary_factor = 1.0f; ///< GLM-4.5: 0.5 (rotary on the first half of each head, NeoX pairs)
    bool attention_bias = false;        ///< q/k/v biases (GLM-4.5)
    bool qk_norm = false;               ///< per-head RMSNorm of q and k before RoPE
    bool tie_word_embeddings = false;

    // MoE
    std::int64_t moe_intermediate_size = 0;
    std::int64_t num_experts = 0;
    std::int64_t num_experts_per_tok = 0;
    std::int64_t n_shared_experts = 0;
    std::int64_t first_k_dense_replace = 0;    ///< layers [0, first_k_dense_replace) are dense
    std::int64_t decoder_sparse_step = 1;      ///< Qwen3: layer i is MoE when (i + 1) % step == 0
    std::vector<std::int64_t> mlp_only_layers; ///< Qwen3: dense layers
    moe_routing routing;

    // MLA (DeepSeek-V3, GLM-5): parsed and shown, not run yet.
    std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;

    std::vector<std::int64_t> eos_token_ids;
    std::optional<std::int64_t> bos_token_id, pad_token_id;

    quant_config quant;

    bool is_moe_layer(std::int64_t layer) const;
    /// The MoE desc of an MoE layer (shared experts as slots when `shared_as_slots`).
    moe_desc moe(moe_weight_format w, bool shared_as_slots) const;
};

/// Reads `dir/config.json` and the quantization config (`dir/hf_quant_config.json` if present, else
/// config.json's `quantization_config`). Errors name the file, the field and what was expected: unknown
/// architecture, missing or mistyped field, inconsistent values (e.g. heads not divisible by kv heads).
result<model_config> load_model_config(const std::string &dir);

} // namespace fp4moe
