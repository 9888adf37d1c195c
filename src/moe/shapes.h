// Named MoE layer shapes of the supported families (shared/reference/models.md section 1), for benchmarks,
// tuning and synthetic checkpoints.
#pragma once

#include "fp4moe/moe.h"

#include <span>
#include <string>
#include <string_view>

namespace fp4moe {

/// One named shape: the MoE layer of a model family, as its config.json describes it.
struct moe_shape_preset {
    std::string_view name; ///< "glm-4.5-air", ...
    moe_desc desc;         ///< nvfp4, permuted; routing as the family's config
};

/// Every preset, in a stable order: qwen3-30b-a3b, glm-4.5-air, glm-4.5, deepseek-v3, glm-5.
std::span<const moe_shape_preset> moe_shape_presets();

/// The preset called `name`; not_found (listing the known names) otherwise.
result<moe_desc> moe_shape_by_name(std::string_view name);

/// A custom shape with the GLM/DeepSeek routing rule when `shared` > 0 (sigmoid + bias, n_group 1, scale 1)
/// and the Qwen3 rule otherwise (softmax, renormalized). Validated: invalid_argument names the field.
result<moe_desc> moe_shape_custom(std::int64_t hidden, std::int64_t intermediate, std::int64_t experts,
                                  std::int64_t top_k, std::int64_t shared);

} // namespace fp4moe
