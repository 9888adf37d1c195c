// `fp4moe quantize`: ModelOpt-style weight-only NVFP4 quantization of a bf16 (or fp16/fp32) Hugging Face
// checkpoint of a supported architecture.
//
// What becomes NVFP4 (defaults mirror nvidia's MoE exports): routed experts and shared experts of every
// decoder layer; the dense MLP of the first_k_dense_replace layers only with `dense_mlp`. Attention, routers,
// embeddings, norms, lm_head and MTP layers (index >= num_hidden_layers) stay as they are, byte for byte.
// gate_proj/up_proj of one MLP share one amax (the max of both), hence one weight_scale_2. Weights follow the
// ModelOpt recipe exactly (nvfp4::quantize). There is no calibration, so no input_scale is written and the
// checkpoint says quant_algo "W4A16_NVFP4" (weight-only; vLLM and our loader accept it).
#pragma once

#include "fp4moe/status.h"
#include "model/make_model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe {

struct quantize_options {
    std::string in;                   ///< checkpoint directory (config.json + safetensors)
    std::string out;                  ///< output directory
    std::vector<std::string> exclude; ///< extra modules to keep bf16 (ModelOpt wildcards, e.g. "*shared_experts*")
    bool dense_mlp = false;           ///< also quantize the dense MLP layers
    std::uint64_t shard_size = 2'000'000'000;
    bool force = false;
    int threads = 0;
    bool progress = true;
};

/// Quantizes `in` into `out`: config.json (+ quantization_config), hf_quant_config.json (exclude_modules =
/// a wildcard summary of the Linear modules left unquantized), sharded safetensors + index, and every other
/// regular file of `in` (tokenizer files, generation_config.json, chat_template.jinja, ...) copied. The
/// result is re-opened and checked: the exclusion list must classify every Linear module as written.
/// Errors: `in` not a checkpoint or not a supported architecture (load_model_config's message), already
/// quantized, a quantized matrix whose K is not a multiple of 16, nothing to quantize, `out` == `in`, `out`
/// non-empty without `force`, I/O failures.
result<checkpoint_write_report> quantize_checkpoint(const quantize_options &opts);

/// ModelOpt-like wildcard summary of the `bf16` modules, such that every pattern matches no module of
/// `quantized` (module_pattern_match): layer and expert indices become '*', and a whole subtree that is
/// all bf16 becomes one "prefix*" pattern ("model.layers.*.self_attn*"). Layers >= `num_layers` (MTP) keep
/// their index. Sorted.
std::vector<std::string> summarize_exclusions(const std::vector<std::string> &bf16,
                                              const std::vector<std::string> &quantized, std::int64_t num_layers);

} // namespace fp4moe
