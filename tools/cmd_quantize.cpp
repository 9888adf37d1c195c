// `fp4moe quantize --in BF16_DIR --out DIR`: weight-only NVFP4 (ModelOpt recipe) of the MoE expert weights.
#include "checkpoint_writer_cli.h"
#include "commands.h"
#include "model/quantize_checkpoint.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

namespace fp4moe::tools {
namespace {

struct quantize_cli {
    quantize_options o;
    std::string shard_size = "2GB";
};

} // namespace

void register_quantize(CLI::App &app, command_registry &reg) {
    auto c = std::make_shared<quantize_cli>();
    auto *cmd = app.add_subcommand(
        "quantize",
        "Quantize the MoE weights of a bf16/fp16/fp32 Hugging Face checkpoint to NVFP4 as ModelOpt does (routed and "
        "shared experts by default; gate/up of each MLP share one weight_scale_2). Weight-only: no activation "
        "calibration, so no input_scale is written and quant_algo is \"W4A16_NVFP4\" (accepted by vLLM and fp4moe). "
        "Attention, routers, embeddings, norms, lm_head and MTP layers are copied unchanged; hf_quant_config.json "
        "lists them in exclude_modules. Tokenizer and other files are copied.");
    cmd->add_option("--in", c->o.in, "Input checkpoint directory")->required()->check(CLI::ExistingDirectory);
    cmd->add_option("--out", c->o.out, "Output directory (created; must be empty unless --force)")->required();
    cmd->add_option(
        "--exclude", c->o.exclude,
        "Keep these modules bf16 too (ModelOpt wildcard, repeatable), e.g. 'model.layers.*.mlp.shared_experts*'");
    cmd->add_flag("--dense-mlp", c->o.dense_mlp, "Also quantize the dense MLP layers (first_k_dense_replace)");
    cmd->add_option("--shard-size", c->shard_size, "Bytes per safetensors shard, e.g. 2GB, 500MB")
        ->capture_default_str();
    cmd->add_option("--threads", c->o.threads, "Worker threads (0: all cores)")->capture_default_str();
    cmd->add_flag("--force", c->o.force, "Write into a non-empty --out (old model*.safetensors* removed first)");
    cmd->add_flag(
        "--no-progress", [c](std::int64_t) { c->o.progress = false; }, "No progress line on stderr");
    cmd->callback([c, &reg] {
        if (!parse_shard_size_flag("quantize", c->shard_size, c->o.shard_size, reg)) return;
        run_checkpoint_writer(
            "quantize", c->o.out, [&] { return quantize_checkpoint(c->o); }, reg);
    });
}

} // namespace fp4moe::tools
