#include "model/inspect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string_view>

namespace fp4moe {
namespace {

constexpr std::string_view kScaleSuffix = ".weight_scale";

bool is_scalar(const tensor_info &t) {
    return t.numel() == 1 && t.shape.size() <= 1;
}

std::string shape_str(const std::vector<std::int64_t> &s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
}

// Checks the siblings of `<prefix>.weight_scale`; returns the group or an explanation.
std::variant<nvfp4_group, std::string> check_group(const checkpoint &ckpt, const std::string &prefix) {
    const auto w = ckpt.find(prefix + ".weight").info;
    const auto s = ckpt.find(prefix + ".weight_scale").info;
    const auto s2 = ckpt.find(prefix + ".weight_scale_2").info;
    const auto in = ckpt.find(prefix + ".input_scale").info;
    if (!w) return std::string("weight_scale without a weight");
    if (!s2) return std::string("weight_scale without weight_scale_2");
    if (w->type != dtype::u8) return fmt::format("weight is {}, NVFP4 packs it as U8", dtype_name(w->type));
    if (s->type != dtype::f8_e4m3) return fmt::format("weight_scale is {}, NVFP4 needs F8_E4M3", dtype_name(s->type));
    if (s2->type != dtype::f32 || !is_scalar(*s2))
        return fmt::format("weight_scale_2 is {} {}, NVFP4 needs an F32 scalar", dtype_name(s2->type),
                           shape_str(s2->shape));
    if (w->shape.size() != 2) return fmt::format("weight has shape {}, expected 2 dimensions", shape_str(w->shape));
    const std::int64_t n = w->shape[0], k = w->shape[1] * 2;
    if (k % 16 != 0) return fmt::format("weight [{}, {}] packs K = {}, not a multiple of 16", n, k / 2, k);
    if (s->shape != std::vector<std::int64_t>{n, k / 16})
        return fmt::format("weight_scale shape {} but weight {} needs [{}, {}]", shape_str(s->shape),
                           shape_str(w->shape), n, k / 16);
    if (in && (in->type != dtype::f32 || !is_scalar(*in)))
        return fmt::format("input_scale is {} {}, expected an F32 scalar", dtype_name(in->type), shape_str(in->shape));
    return nvfp4_group{prefix, n, k, in != nullptr};
}

} // namespace

checkpoint_summary summarize_checkpoint(const checkpoint &ckpt) {
    checkpoint_summary sum;
    std::set<std::string> grouped; // tensor names that belong to a valid NVFP4 group
    for (const auto &e : ckpt.tensors()) {
        const std::string &name = e.info->name;
        if (name.size() <= kScaleSuffix.size() || !name.ends_with(kScaleSuffix)) continue;
        const std::string prefix = name.substr(0, name.size() - kScaleSuffix.size());
        auto g = check_group(ckpt, prefix);
        if (auto *err = std::get_if<std::string>(&g)) {
            sum.problems.push_back({prefix, *err});
            continue;
        }
        auto &grp = std::get<nvfp4_group>(g);
        for (const char *suffix : {".weight", ".weight_scale", ".weight_scale_2", ".input_scale"}) {
            const auto t = ckpt.find(prefix + suffix).info;
            if (!t) continue;
            grouped.insert(t->name);
            sum.nvfp4_bytes += t->nbytes();
        }
        sum.nvfp4_params += grp.rows * grp.cols;
        sum.nvfp4.push_back(std::move(grp));
    }
    for (const auto &e : ckpt.tensors()) {
        const tensor_info &t = *e.info;
        ++sum.tensor_count;
        sum.total_bytes += t.nbytes();
        ++sum.tensors_by_dtype[t.type];
        sum.bytes_by_dtype[t.type] += t.nbytes();
        if (grouped.contains(t.name)) continue;
        (t.type == dtype::bf16 ? sum.bf16_params : sum.other_params) += t.numel();
    }
    return sum;
}

} // namespace fp4moe
