// A loaded checkpoint: every tensor checked against the config, then viewed in place (mmapped, zero copy)
// or, for small fp32 parameters (norms, biases, router), converted once.
#pragma once

#include "backend/cpu/ops.h"
#include "fp4moe/moe.h"
#include "fp4moe/safetensors.h"
#include "model/config.h"

#include <memory>
#include <string>
#include <vector>

namespace fp4moe {

/// One SwiGLU MLP run as a set of experts (a dense MLP is one expert with weight 1).
struct expert_set {
    moe_desc desc;
    std::vector<moe_matrix> gate, up, down; ///< desc.total_experts() each
    std::vector<float> router;              ///< [E, H] fp32 (empty for a dense MLP)
    std::vector<float> correction_bias;     ///< [E] (empty when the routing has none)
    moe_weights view() const;
};

struct attention_weights {
    cpu::linear_view q, k, v, o;
    std::vector<float> q_bias, k_bias, v_bias; ///< backing store of the views' biases
    std::vector<float> q_norm, k_norm;         ///< [head_dim] when qk_norm
};

struct layer_weights {
    std::vector<float> input_norm, post_norm;
    attention_weights attn;
    bool moe = false;
    expert_set mlp;                     ///< the MoE (routed + shared slots) or the dense MLP (E = 1, k = 1)
    std::unique_ptr<expert_set> shared; ///< shared experts run apart when their format differs from the routed
};

struct model_weights {
    model_config config;
    checkpoint ckpt;               ///< owns the mappings every view points into
    const bf16_t *embed = nullptr; ///< [vocab, H]
    std::vector<float> final_norm;
    cpu::linear_view lm_head;
    std::vector<layer_weights> layers;
    std::int64_t unused_tensors = 0; ///< tensors of the checkpoint no layer uses (MTP layers, ...)
};

/// Loads `dir`: config, quantization config, every tensor checked (presence, dtype, shape, NVFP4 group
/// consistency, agreement with the exclusion list) before anything runs. Errors name the tensor and what was
/// expected. MLA architectures parse but are refused with a clear message (not supported yet).
result<std::unique_ptr<model_weights>> load_model_weights(const std::string &dir);

} // namespace fp4moe
