#include "fp4moe/moe.h"

#include <fmt/format.h>

namespace fp4moe {

status moe_desc::validate() const {
    auto bad = [](std::string msg) { return status{status_code::invalid_argument, "moe_desc: " + std::move(msg)}; };
    if (hidden <= 0) return bad(fmt::format("hidden must be positive, got {}", hidden));
    if (intermediate <= 0) return bad(fmt::format("intermediate must be positive, got {}", intermediate));
    if (experts <= 0) return bad(fmt::format("experts must be positive, got {}", experts));
    if (top_k <= 0 || top_k > experts)
        return bad(fmt::format("top_k must be in [1, experts={}], got {}", experts, top_k));
    if (shared < 0) return bad(fmt::format("shared must be >= 0, got {}", shared));
    if (weights == moe_weight_format::nvfp4 && (hidden % nvfp4::kBlock || intermediate % nvfp4::kBlock))
        return bad(
            fmt::format("NVFP4 needs hidden ({}) and intermediate ({}) to be multiples of 16", hidden, intermediate));
    const auto &r = routing;
    if (r.n_group <= 0 || experts % r.n_group)
        return bad(fmt::format("n_group ({}) must divide experts ({})", r.n_group, experts));
    if (r.topk_group <= 0 || r.topk_group > r.n_group)
        return bad(fmt::format("topk_group must be in [1, n_group={}], got {}", r.n_group, r.topk_group));
    if (top_k > r.topk_group * (experts / r.n_group))
        return bad(fmt::format("top_k ({}) exceeds the experts in the kept groups ({} groups x {})", top_k,
                               r.topk_group, experts / r.n_group));
    if (r.n_group > 1 && experts / r.n_group < 2)
        return bad(fmt::format("group-limited routing needs >= 2 experts per group (group score = top-2 sum)"));
    if (r.correction_bias && r.scoring != moe_scoring::sigmoid)
        return bad("correction_bias is only defined for sigmoid scoring");
    return status::success();
}

std::string moe_desc::to_string() const {
    return fmt::format(
        "H={} I={} E={} k={} S={} {} {} {}{}/g{}/{}/x{}", hidden, intermediate, experts, top_k, shared,
        weights == moe_weight_format::nvfp4 ? "nvfp4" : "bf16", layout == moe_layout::permuted ? "permuted" : "masked",
        routing.scoring == moe_scoring::softmax ? "softmax" : "sigmoid", routing.correction_bias ? "+bias" : "",
        routing.n_group, routing.topk_group, routing.routed_scaling_factor, routing.renormalize ? "" : " norenorm");
}

std::uint64_t hash(const moe_desc &d) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : d.to_string()) h = (h ^ c) * 1099511628211ull;
    return h;
}

} // namespace fp4moe
