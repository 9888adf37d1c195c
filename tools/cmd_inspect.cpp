// `fp4moe inspect PATH`: tensors (name, dtype, shape, bytes), totals, NVFP4 groups and parameter counts.
#include "commands.h"
#include "model/config.h"
#include "model/inspect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace fp4moe::tools {
namespace {

struct inspect_opts {
    std::string path;
    bool no_tensors = false;
    bool json = false;
};

std::string human_bytes(std::uint64_t b) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
    return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(std::int64_t n) {
    if (n >= 1'000'000'000) return fmt::format("{:.2f} B", n / 1e9);
    if (n >= 1'000'000) return fmt::format("{:.2f} M", n / 1e6);
    if (n >= 1'000) return fmt::format("{:.2f} K", n / 1e3);
    return fmt::format("{}", n);
}

// The config of a checkpoint directory, in a few lines; nothing for a bare .safetensors file.
void print_config(const std::string &path) {
    if (!std::filesystem::is_directory(path)) return;
    auto cfg = load_model_config(path);
    if (!cfg.ok()) {
        fmt::print("config: {}\n", cfg.get_status().message());
        return;
    }
    const auto &c = cfg.value();
    fmt::print("config: {} ({}){}\n", model_arch_name(c.arch), c.model_type,
               model_arch_uses_mla(c.arch) ? " - MLA: fp4moe cannot run it yet" : "");
    fmt::print("  layers {}, hidden {}, heads {} / kv {} x {}, vocab {}, max positions {}\n", c.num_layers,
               c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, c.max_position_embeddings);
    if (model_arch_uses_mla(c.arch))
        fmt::print("  MLA: q_lora_rank {}, kv_lora_rank {}, qk nope {} + rope {}, v {}\n", c.q_lora_rank,
                   c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim);
    fmt::print("  MoE: {} experts x {} wide, top-{}, {} shared; dense layers {} (width {})\n", c.num_experts,
               c.moe_intermediate_size, c.num_experts_per_tok, c.n_shared_experts, c.first_k_dense_replace,
               c.intermediate_size);
    const auto &r = c.routing;
    fmt::print("  routing: {}{}, groups {}/{} kept, {}renormalized, scaling {}\n",
               r.scoring == moe_scoring::softmax ? "softmax" : "sigmoid", r.correction_bias ? " + correction bias" : "",
               r.topk_group, r.n_group, r.renormalize ? "" : "not ", r.routed_scaling_factor);
    if (c.quant.nvfp4())
        fmt::print("  quantization: {} from {} (excluded: {})\n", c.quant.quant_algo, c.quant.source,
                   fmt::join(c.quant.exclude, ", "));
    else
        fmt::print("  quantization: none (bf16)\n");
}

void print_text(const checkpoint &ckpt, const checkpoint_summary &sum, const inspect_opts &o) {
    fmt::print("checkpoint: {} ({} file{})\n", ckpt.path(), ckpt.files().size(), ckpt.files().size() == 1 ? "" : "s");
    print_config(ckpt.path());
    if (!o.no_tensors) {
        std::size_t w = 4;
        for (const auto &e : ckpt.tensors()) w = std::max(w, e.info->name.size());
        fmt::print("\n{:<{}}  {:<7}  {:<20}  {:>12}\n", "name", w, "dtype", "shape", "bytes");
        for (const auto &e : ckpt.tensors()) {
            const auto &t = *e.info;
            fmt::print("{:<{}}  {:<7}  {:<20}  {:>12}\n", t.name, w, dtype_name(t.type),
                       fmt::format("[{}]", fmt::join(t.shape, ", ")), t.nbytes());
        }
    }
    fmt::print("\ntensors: {}, {} ({} bytes)\n", sum.tensor_count, human_bytes(sum.total_bytes), sum.total_bytes);
    for (const auto &[type, count] : sum.tensors_by_dtype)
        fmt::print("  {:<8} {:>6} tensors  {:>12}\n", dtype_name(type), count,
                   human_bytes(sum.bytes_by_dtype.at(type)));
    fmt::print("\nNVFP4 groups (weight U8 + weight_scale F8_E4M3 + weight_scale_2 F32 [+ input_scale]): {}\n",
               sum.nvfp4.size());
    std::size_t with_input = 0;
    for (const auto &g : sum.nvfp4) with_input += g.has_input_scale;
    if (!sum.nvfp4.empty()) fmt::print("  with input_scale: {}\n", with_input);
    for (const auto &p : sum.problems) fmt::print("  not NVFP4: {}: {}\n", p.prefix, p.problem);
    fmt::print("\nparameters:\n");
    fmt::print("  NVFP4 (E2M1)  {:>12}  ({} incl. scales)\n", human_count(sum.nvfp4_params),
               human_bytes(sum.nvfp4_bytes));
    fmt::print("  BF16          {:>12}\n", human_count(sum.bf16_params));
    fmt::print("  other         {:>12}\n", human_count(sum.other_params));
}

void print_json(const checkpoint &ckpt, const checkpoint_summary &sum, const inspect_opts &o) {
    nlohmann::ordered_json j;
    j["path"] = ckpt.path();
    j["files"] = nlohmann::json::array();
    for (const auto &f : ckpt.files()) j["files"].push_back(f.path());
    if (!o.no_tensors) {
        auto &arr = j["tensors"] = nlohmann::json::array();
        for (const auto &e : ckpt.tensors())
            arr.push_back({{"name", e.info->name},
                           {"dtype", dtype_name(e.info->type)},
                           {"shape", e.info->shape},
                           {"bytes", e.info->nbytes()}});
    }
    if (std::filesystem::is_directory(ckpt.path())) {
        if (auto cfg = load_model_config(ckpt.path()); cfg.ok()) {
            const auto &c = cfg.value();
            j["config"] = {{"architecture", model_arch_name(c.arch)},
                           {"model_type", c.model_type},
                           {"layers", c.num_layers},
                           {"hidden_size", c.hidden_size},
                           {"experts", c.num_experts},
                           {"top_k", c.num_experts_per_tok},
                           {"moe_intermediate_size", c.moe_intermediate_size},
                           {"shared_experts", c.n_shared_experts},
                           {"mla", model_arch_uses_mla(c.arch)},
                           {"quant_algo", c.quant.quant_algo}};
        } else {
            j["config_error"] = cfg.get_status().message();
        }
    }
    j["tensor_count"] = sum.tensor_count;
    j["total_bytes"] = sum.total_bytes;
    auto &groups = j["nvfp4_groups"] = nlohmann::json::array();
    for (const auto &g : sum.nvfp4)
        groups.push_back(
            {{"prefix", g.prefix}, {"rows", g.rows}, {"cols", g.cols}, {"input_scale", g.has_input_scale}});
    auto &probs = j["nvfp4_problems"] = nlohmann::json::array();
    for (const auto &p : sum.problems) probs.push_back({{"prefix", p.prefix}, {"problem", p.problem}});
    j["params"] = {{"nvfp4", sum.nvfp4_params}, {"bf16", sum.bf16_params}, {"other", sum.other_params}};
    j["nvfp4_bytes"] = sum.nvfp4_bytes;
    fmt::print("{}\n", j.dump(2));
}

} // namespace

void register_inspect(CLI::App &app, command_registry &reg) {
    auto o = std::make_shared<inspect_opts>();
    auto *cmd = app.add_subcommand("inspect", "Show a checkpoint's tensors, NVFP4 groups and parameter counts");
    cmd->add_option("path", o->path, "A .safetensors file or a checkpoint directory")->required();
    cmd->add_flag("--no-tensors", o->no_tensors, "Print only the totals, not one line per tensor");
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    cmd->callback([o, &reg] {
        auto ck = checkpoint::open(o->path);
        if (!ck.ok()) {
            fmt::print(stderr, "fp4moe inspect: {}\n", ck.get_status().message());
            reg.result = 1;
            return;
        }
        const auto sum = summarize_checkpoint(ck.value());
        (o->json ? print_json : print_text)(ck.value(), sum, *o);
    });
}

} // namespace fp4moe::tools
