// `fp4moe make-model`: synthetic checkpoints with random weights in the exact on-disk format of the real ones
// (Hugging Face config.json, sharded safetensors + index, tokenizer files, ModelOpt NVFP4 experts).
//
// Also the sharded checkpoint writer that `fp4moe quantize` shares.
#pragma once

#include "fp4moe/dtype.h"
#include "fp4moe/nvfp4.h"
#include "fp4moe/status.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace fp4moe {

struct make_model_options {
    std::string preset;                       ///< a name from model_presets()
    std::int64_t layers = 0;                  ///< 0: the preset's default_layers (2 for the big presets)
    std::int64_t experts = 0;                 ///< 0: the preset's routed expert count
    std::uint64_t seed = 0;                   ///< same seed (and options) -> byte-identical files
    bool nvfp4 = true;                        ///< false: every weight bf16, no quantization config
    std::string out;                          ///< output directory
    std::uint64_t shard_size = 2'000'000'000; ///< bytes per safetensors shard (a tensor group never splits)
    bool force = false;   ///< write into a non-empty `out` (stale shards of an earlier run are removed)
    int threads = 0;      ///< 0: all hardware threads
    bool progress = true; ///< progress line on stderr, only when stderr is a terminal
};

/// What was written.
struct checkpoint_write_report {
    std::int64_t tensors = 0;
    std::int64_t shards = 0;
    std::uint64_t tensor_bytes = 0; ///< index metadata.total_size
    std::int64_t nvfp4_groups = 0;
    std::vector<std::string> notes; ///< adjustments made to the preset (clamped dense layers, routing groups)
};

/// Writes the checkpoint. Layer and expert overrides keep the real per-layer shapes; first_k_dense_replace is
/// clamped to layers - 1 (so at least one MoE layer exists) and grouped routing falls back to one group when
/// the expert count no longer divides into the preset's groups (both reported in `notes`).
/// NVFP4 weights are the ModelOpt recipe (nvfp4::quantize) applied to the same bf16 values --format bf16
/// writes; gate/up of each expert, shared expert and dense MLP share one amax, so their weight_scale_2 and
/// input_scale are equal. The result is re-opened and validated (load_model_config, checkpoint::open,
/// summarize_checkpoint) before returning. Errors: unknown preset (the message lists them), bad overrides,
/// `out` non-empty without `force`, I/O failures.
result<checkpoint_write_report> make_model(const make_model_options &opts);

// ---- the sharded writer (shared with quantize_checkpoint) ----------------------------------------------

/// One tensor of a write unit.
struct tensor_spec {
    std::string name;
    dtype type = dtype::bf16;
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes() const;
};

/// Tensors produced together (an NVFP4 gate/up pair with its scales, or one bf16 tensor). A unit never
/// straddles shards. `produce(chunk, out)` fills part `chunk` of `chunks` into `out` (one span per tensor,
/// each exactly nbytes()); chunks run concurrently on different threads and may throw fp4moe::error.
struct write_unit {
    std::vector<tensor_spec> tensors;
    int chunks = 1;
    std::function<void(int chunk, std::span<const std::span<std::byte>> out)> produce;
};

struct sharded_write_options {
    std::uint64_t shard_size = 2'000'000'000;
    int threads = 0;
    bool progress = true;
    std::string label = "fp4moe"; ///< progress line prefix
};

/// Writes `units` in order into `dir/model-0000k-of-0000N.safetensors` (N >= 1, a new shard starts when the
/// next unit would pass shard_size) plus `model.safetensors.index.json` (metadata.total_size, weight_map).
/// Each shard is built in memory (about shard_size bytes) and written with write_safetensors (metadata
/// {"format": "pt"}).
result<checkpoint_write_report> write_sharded_checkpoint(const std::string &dir, std::span<const write_unit> units,
                                                         const sharded_write_options &opts);

/// Creates `dir`, or checks that it is empty; with `force` a non-empty dir is accepted and the
/// model*.safetensors* files of an earlier run are removed. Errors name the directory.
status prepare_output_dir(const std::string &dir, bool force);

/// The tensors of one NVFP4 Linear `prefix` ([rows, cols] elements) as ModelOpt writes them: weight U8
/// [rows, cols/2], weight_scale F8_E4M3 [rows, cols/16], weight_scale_2 F32 [], and input_scale F32 [] when
/// `input_scale`.
std::vector<tensor_spec> nvfp4_tensor_specs(const std::string &prefix, std::int64_t rows, std::int64_t cols,
                                            bool input_scale);

/// Copies a quantized matrix into the spans of nvfp4_tensor_specs (weight, weight_scale, weight_scale_2[,
/// input_scale]); `input_scale` is written when the span is there.
void store_nvfp4(const nvfp4::matrix &m, float input_scale, std::span<const std::span<std::byte>> out);

/// Parses "2GB", "500MB", "1GiB", "4096" (bytes) for --shard-size; 0 on a malformed value.
std::uint64_t parse_byte_size(const std::string &s);

} // namespace fp4moe
