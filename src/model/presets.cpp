// Preset dimensions, copied from shared/reference/models.md (sections 1-5; source tags there).
#include "model/presets.h"

namespace fp4moe {
namespace {

model_preset glm45() {
    model_preset p;
    p.name = "glm-4.5";
    p.description = "GLM-4.5 (355B-A32B) dims: Glm4MoeForCausalLM, hidden 5120, 160 experts x 1536, 92 layers";
    p.arch = model_arch::glm4_moe;
    p.tokenizer = tokenizer_family::glm;
    p.vocab_size = 151552;
    p.hidden_size = 5120;
    p.intermediate_size = 12288;
    p.moe_intermediate_size = 1536;
    p.num_layers = 92;
    p.num_heads = 96;
    p.num_kv_heads = 8;
    p.head_dim = 128;
    p.num_experts = 160;
    p.n_shared_experts = 1;
    p.top_k = 8;
    p.first_k_dense_replace = 3;
    p.routed_scaling_factor = 2.5;
    p.rope_theta = 1e6;
    p.partial_rotary_factor = 0.5;
    p.rms_norm_eps = 1e-5;
    p.max_position_embeddings = 131072;
    p.attention_bias = true;
    p.use_qk_norm = true;
    return p;
}

model_preset glm45_air() {
    model_preset p = glm45();
    p.name = "glm-4.5-air";
    p.description = "GLM-4.5-Air (106B-A12B) dims: Glm4MoeForCausalLM, hidden 4096, 128 experts x 1408, 46 layers";
    p.hidden_size = 4096;
    p.intermediate_size = 10944;
    p.moe_intermediate_size = 1408;
    p.num_layers = 46;
    p.num_experts = 128;
    p.first_k_dense_replace = 1;
    p.routed_scaling_factor = 1.0;
    p.use_qk_norm = false;
    return p;
}

model_preset glm46() {
    model_preset p = glm45();
    p.name = "glm-4.6";
    p.description = "GLM-4.6 dims: as GLM-4.5 with max_position_embeddings 202752";
    p.max_position_embeddings = 202752;
    return p;
}

model_preset glm5() {
    model_preset p;
    p.name = "glm-5";
    p.description = "GLM-5 (744B-A40B) dims: GlmMoeDsaForCausalLM (MLA + DSA indexer), hidden 6144, 256 experts x 2048";
    p.arch = model_arch::glm_moe_dsa;
    p.tokenizer = tokenizer_family::glm;
    p.vocab_size = 154880;
    p.hidden_size = 6144;
    p.intermediate_size = 12288;
    p.moe_intermediate_size = 2048;
    p.num_layers = 78;
    p.num_heads = 64;
    p.num_kv_heads = 64;
    p.head_dim = 64;
    p.num_experts = 256;
    p.n_shared_experts = 1;
    p.top_k = 8;
    p.first_k_dense_replace = 3;
    p.routed_scaling_factor = 2.5;
    p.rope_theta = 1e6;
    p.rms_norm_eps = 1e-5;
    p.max_position_embeddings = 202752;
    p.q_lora_rank = 2048;
    p.kv_lora_rank = 512;
    p.qk_nope_head_dim = 192;
    p.qk_rope_head_dim = 64;
    p.v_head_dim = 256;
    p.index_n_heads = 32;
    p.index_head_dim = 128;
    p.index_topk = 2048;
    return p;
}

model_preset deepseek_v3() {
    model_preset p;
    p.name = "deepseek-v3";
    p.description = "DeepSeek-V3 (671B-A37B) dims: DeepseekV3ForCausalLM (MLA), hidden 7168, 256 experts x 2048";
    p.arch = model_arch::deepseek_v3;
    p.tokenizer = tokenizer_family::deepseek;
    p.vocab_size = 129280;
    p.hidden_size = 7168;
    p.intermediate_size = 18432;
    p.moe_intermediate_size = 2048;
    p.num_layers = 61;
    p.num_heads = 128;
    p.num_kv_heads = 128;
    p.num_experts = 256;
    p.n_shared_experts = 1;
    p.top_k = 8;
    p.first_k_dense_replace = 3;
    p.n_group = 8;
    p.topk_group = 4;
    p.routed_scaling_factor = 2.5;
    p.rope_theta = 10000;
    p.rms_norm_eps = 1e-6;
    p.max_position_embeddings = 163840;
    p.yarn = true;
    p.q_lora_rank = 1536;
    p.kv_lora_rank = 512;
    p.qk_nope_head_dim = 128;
    p.qk_rope_head_dim = 64;
    p.v_head_dim = 128;
    return p;
}

model_preset qwen3_30b() {
    model_preset p;
    p.name = "qwen3-30b-a3b";
    p.description = "Qwen3-30B-A3B dims: Qwen3MoeForCausalLM, hidden 2048, 128 experts x 768, 48 layers";
    p.arch = model_arch::qwen3_moe;
    p.tokenizer = tokenizer_family::qwen;
    p.vocab_size = 151936;
    p.hidden_size = 2048;
    p.intermediate_size = 6144;
    p.moe_intermediate_size = 768;
    p.num_layers = 48;
    p.num_heads = 32;
    p.num_kv_heads = 4;
    p.head_dim = 128;
    p.num_experts = 128;
    p.top_k = 8;
    p.rope_theta = 1e6;
    p.rms_norm_eps = 1e-6;
    p.max_position_embeddings = 40960;
    p.use_qk_norm = true;
    return p;
}

// Tiny variants: every width a multiple of 16 (NVFP4 blocks), a few MB in all. The dims all of them share:
void shrink_to_tiny(model_preset &p) {
    p.vocab_size = 0; // sized from the generated tokenizer
    p.hidden_size = 128;
    p.intermediate_size = 256;
    p.moe_intermediate_size = 64;
    p.num_layers = 2;
    p.num_heads = 4;
    p.num_experts = 8;
    p.top_k = 2;
    p.max_position_embeddings = 4096;
}

model_preset tiny() {
    model_preset p = glm45();
    p.name = "tiny";
    p.description = "tiny Glm4MoeForCausalLM for tests: hidden 128, 4x32 heads (2 kv), 2 layers (1 dense), 8 experts";
    shrink_to_tiny(p);
    p.num_kv_heads = 2;
    p.head_dim = 32;
    p.first_k_dense_replace = 1;
    return p;
}

model_preset tiny_qwen3() {
    model_preset p = qwen3_30b();
    p.name = "tiny-qwen3";
    p.description = "tiny Qwen3MoeForCausalLM for tests: hidden 128, 4x32 heads (2 kv), 2 MoE layers, 8 experts";
    shrink_to_tiny(p);
    p.num_kv_heads = 2;
    p.head_dim = 32;
    return p;
}

model_preset tiny_deepseek_v3() {
    model_preset p = deepseek_v3();
    p.name = "tiny-deepseek-v3";
    p.description = "tiny DeepseekV3ForCausalLM (MLA, grouped routing 4/2) for tests: hidden 128, 8 experts";
    shrink_to_tiny(p);
    p.num_kv_heads = 4;
    p.first_k_dense_replace = 1;
    p.n_group = 4;
    p.topk_group = 2;
    p.q_lora_rank = 64;
    p.kv_lora_rank = 32;
    p.qk_nope_head_dim = 32;
    p.qk_rope_head_dim = 16;
    p.v_head_dim = 32;
    return p;
}

model_preset tiny_glm5() {
    model_preset p = glm5();
    p.name = "tiny-glm-5";
    p.description = "tiny GlmMoeDsaForCausalLM (MLA + DSA indexer) for tests: hidden 128, 8 experts";
    shrink_to_tiny(p);
    p.num_kv_heads = 4;
    p.head_dim = 16;
    p.first_k_dense_replace = 1;
    p.q_lora_rank = 64;
    p.kv_lora_rank = 32;
    p.qk_nope_head_dim = 32;
    p.qk_rope_head_dim = 16;
    p.v_head_dim = 32;
    p.index_n_heads = 4;
    p.index_head_dim = 32;
    p.index_topk = 64;
    return p;
}

} // namespace

const std::vector<model_preset> &model_presets() {
    static const std::vector<model_preset> presets = {
        tiny(),  tiny_qwen3(), tiny_deepseek_v3(), tiny_glm5(), glm45_air(), glm45(),
        glm46(), glm5(),       deepseek_v3(),      qwen3_30b()};
    return presets;
}

const model_preset *find_model_preset(std::string_view name) {
    for (const auto &p : model_presets())
        if (p.name == name) return &p;
    return nullptr;
}

std::string model_preset_names() {
    std::string s;
    for (const auto &p : model_presets()) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

} // namespace fp4moe
