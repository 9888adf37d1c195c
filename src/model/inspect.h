// What a checkpoint holds: tensors by dtype, NVFP4 groups (ModelOpt layout), parameter counts and bytes.
// The library side of `fp4moe inspect`.
#pragma once

#include "fp4moe/safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fp4moe {

/// One NVFP4-quantized Linear `<prefix>` as ModelOpt exports it:
///   <prefix>.weight U8 [N, K/2], <prefix>.weight_scale F8_E4M3 [N, K/16], <prefix>.weight_scale_2 F32 [],
///   optionally <prefix>.input_scale F32 [].
struct nvfp4_group {
    std::string prefix;
    std::int64_t rows = 0; ///< N
    std::int64_t cols = 0; ///< K (elements, i.e. twice the packed bytes per row)
    bool has_input_scale = false;
};

/// A tensor whose name ends in `.weight_scale` or `.weight_scale_2` but does not form a consistent NVFP4
/// group with its siblings; `problem` says why ("weight_scale shape [4, 3] but weight [4, 32] needs [4, 4]").
struct nvfp4_problem {
    std::string prefix;
    std::string problem;
};

struct checkpoint_summary {
    std::int64_t tensor_count = 0;
    std::uint64_t total_bytes = 0;
    std::map<dtype, std::int64_t> tensors_by_dtype;
    std::map<dtype, std::uint64_t> bytes_by_dtype;
    std::vector<nvfp4_group> nvfp4;
    std::vector<nvfp4_problem> problems;
    std::int64_t nvfp4_params = 0; ///< elements held as E2M1 (N*K summed over groups)
    std::uint64_t nvfp4_bytes = 0; ///< packed weights + block scales + global/input scales
    std::int64_t bf16_params = 0;  ///< elements of BF16 tensors
    std::int64_t other_params = 0; ///< elements of tensors that are neither NVFP4 groups nor BF16
};

/// Classifies every tensor of `ckpt`. Never fails: inconsistent groups are reported in `problems`.
checkpoint_summary summarize_checkpoint(const checkpoint &ckpt);

} // namespace fp4moe
