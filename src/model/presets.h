// Model presets for `fp4moe make-model`: the real dimensions of the supported model families (models.md
// sections 1-5) and tiny variants for tests. A preset fixes everything config.json needs; make-model may then
// shrink the layer and expert counts.
#pragma once

#include "model/config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

/// Which tokenizer (pre-tokenizer regex, special tokens, chat template) a family uses.
enum class tokenizer_family { glm, qwen, deepseek };

struct model_preset {
    std::string name;        ///< "glm-4.5-air"
    std::string description; ///< one line for --help
    model_arch arch = model_arch::glm4_moe;
    tokenizer_family tokenizer = tokenizer_family::glm;

    std::int64_t vocab_size = 0; ///< 0: the generated tokenizer's size rounded up to a multiple of 64
    std::int64_t hidden_size = 0;
    std::int64_t intermediate_size = 0; ///< dense MLP width
    std::int64_t moe_intermediate_size = 0;
    std::int64_t num_layers = 0; ///< the real model's num_hidden_layers (without MTP)
    std::int64_t default_layers = 2;
    std::int64_t num_heads = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0; ///< GQA head width; for MLA the config's `head_dim` field (GLM-5: the rope width)
    std::int64_t num_experts = 0;
    std::int64_t n_shared_experts = 0;
    std::int64_t top_k = 0;
    std::int64_t first_k_dense_replace = 0;
    std::int64_t n_group = 1, topk_group = 1;
    double routed_scaling_factor = 1.0;
    double rope_theta = 10000.0;
    double partial_rotary_factor = 1.0;
    double rms_norm_eps = 1e-6;
    std::int64_t max_position_embeddings = 4096;
    bool attention_bias = false;
    bool use_qk_norm = false;
    bool yarn = false; ///< DeepSeek-V3's rope_scaling block

    // MLA (DeepSeek-V3, GLM-5); zero for GQA models.
    std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    // GLM-5 DSA indexer; zero when absent.
    std::int64_t index_n_heads = 0, index_head_dim = 0, index_topk = 0;

    bool mla() const { return kv_lora_rank > 0; }
};

/// Every preset, in the order --help lists them.
const std::vector<model_preset> &model_presets();

/// The preset called `name`, or null.
const model_preset *find_model_preset(std::string_view name);

/// "tiny, tiny-qwen3, ..." for error messages and help.
std::string model_preset_names();

} // namespace fp4moe
