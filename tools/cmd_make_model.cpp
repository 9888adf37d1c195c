// `fp4moe make-model --preset NAME --out DIR`: a synthetic checkpoint with random weights in the real format.
#include "checkpoint_writer_cli.h"
#include "commands.h"
#include "model/make_model.h"
#include "model/presets.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

namespace fp4moe::tools {
namespace {

struct make_model_cli {
    make_model_options o;
    std::string format = "nvfp4";
    std::string shard_size = "2GB";
};

std::string presets_help() {
    std::string s = "Model shape to write; one of:";
    for (const auto &p : model_presets()) s += fmt::format("\n  {:<17} {}", p.name, p.description);
    return s;
}

} // namespace

void register_make_model(CLI::App &app, command_registry &reg) {
    auto c = std::make_shared<make_model_cli>();
    auto *cmd = app.add_subcommand(
        "make-model",
        "Write a synthetic checkpoint (random weights, deterministic from --seed) in the exact Hugging Face + ModelOpt "
        "NVFP4 format: config.json, hf_quant_config.json, sharded safetensors with model.safetensors.index.json, "
        "tokenizer.json, tokenizer_config.json (chat template), generation_config.json. NVFP4 experts are the "
        "ModelOpt recipe applied to random bf16 weights (gate/up share weight_scale_2 and input_scale); attention, "
        "router and lm_head stay bf16.");
    cmd->add_option("--preset", c->o.preset, presets_help())->required();
    cmd->add_option("--out", c->o.out, "Output directory (created; must be empty unless --force)")->required();
    cmd->add_option("--layers", c->o.layers,
                    "Decoder layers (default: 2 for the real-size presets; first_k_dense_replace is clamped to "
                    "layers-1 so that at least one layer is MoE)");
    cmd->add_option("--experts", c->o.experts, "Routed experts per MoE layer (default: the preset's)");
    cmd->add_option("--seed", c->o.seed, "Random seed (same seed and flags -> identical bytes)")->capture_default_str();
    cmd->add_option("--format", c->format, "nvfp4 (ModelOpt NVFP4 MLPs) or bf16 (everything bf16)")
        ->check(CLI::IsMember({"nvfp4", "bf16"}))
        ->capture_default_str();
    cmd->add_option("--shard-size", c->shard_size, "Bytes per safetensors shard, e.g. 2GB, 500MB, 1GiB")
        ->capture_default_str();
    cmd->add_option("--threads", c->o.threads, "Worker threads (0: all cores)")->capture_default_str();
    cmd->add_flag("--force", c->o.force, "Write into a non-empty --out (old model*.safetensors* removed first)");
    cmd->add_flag(
        "--no-progress", [c](std::int64_t) { c->o.progress = false; }, "No progress line on stderr");
    cmd->callback([c, &reg] {
        c->o.nvfp4 = c->format == "nvfp4";
        if (!parse_shard_size_flag("make-model", c->shard_size, c->o.shard_size, reg)) return;
        run_checkpoint_writer(
            "make-model", c->o.out, [&] { return make_model(c->o); }, reg);
    });
}

} // namespace fp4moe::tools
