#include "moe/shapes.h"

#include <fmt/format.h>

#include <array>

namespace fp4moe {
namespace {

moe_desc make(std::int64_t h, std::int64_t i, std::int64_t e, std::int64_t k, std::int64_t s) {
    moe_desc d;
    d.hidden = h;
    d.intermediate = i;
    d.experts = e;
    d.top_k = k;
    d.shared = s;
    return d;
}

moe_desc sigmoid_bias(moe_desc d, int n_group, int topk_group, float scale) {
    d.routing.scoring = moe_scoring::sigmoid;
    d.routing.renormalize = true;
    d.routing.correction_bias = true;
    d.routing.n_group = n_group;
    d.routing.topk_group = topk_group;
    d.routing.routed_scaling_factor = scale;
    return d;
}

const std::array<moe_shape_preset, 5> kPresets = {{
    {"qwen3-30b-a3b", make(2048, 768, 128, 8, 0)}, // softmax, norm_topk_prob
    {"glm-4.5-air", sigmoid_bias(make(4096, 1408, 128, 8, 1), 1, 1, 1.0f)},
    {"glm-4.5", sigmoid_bias(make(5120, 1536, 160, 8, 1), 1, 1, 2.5f)},
    {"deepseek-v3", sigmoid_bias(make(7168, 2048, 256, 8, 1), 8, 4, 2.5f)},
    {"glm-5", sigmoid_bias(make(6144, 2048, 256, 8, 1), 1, 1, 2.5f)},
}};

} // namespace

std::span<const moe_shape_preset> moe_shape_presets() {
    return kPresets;
}

result<moe_desc> moe_shape_by_name(std::string_view name) {
    std::string known;
    for (const auto &p : kPresets) {
        if (p.name == name) return p.desc;
        known += known.empty() ? "" : ", ";
        known += p.name;
    }
    return status{status_code::not_found, fmt::format("unknown shape '{}' (known: {})", name, known)};
}

result<moe_desc> moe_shape_custom(std::int64_t hidden, std::int64_t intermediate, std::int64_t experts,
                                  std::int64_t top_k, std::int64_t shared) {
    moe_desc d = make(hidden, intermediate, experts, top_k, shared);
    if (shared > 0) d = sigmoid_bias(d, 1, 1, 1.0f);
    if (auto st = d.validate(); !st.ok()) return st;
    return d;
}

} // namespace fp4moe
