// What `make-model` and `quantize` share on the command line: parsing --shard-size, running the writer with
// a timer, and the summary line.
#pragma once

#include "commands.h"
#include "model/make_model.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <string>

namespace fp4moe::tools {

/// Parses `text` (e.g. "2GB") into `bytes`; on failure prints "fp4moe CMD: ..." and sets exit code 2.
inline bool parse_shard_size_flag(const char *cmd, const std::string &text, std::uint64_t &bytes,
                                  command_registry &reg) {
    bytes = parse_byte_size(text);
    if (bytes != 0) return true;
    fmt::print(stderr, "fp4moe {}: --shard-size '{}' is not a size (e.g. 2GB, 500MB)\n", cmd, text);
    reg.result = 2;
    return false;
}

/// Runs `write`, prints its error (exit code 1) or its notes and the one-line summary for checkpoint `out`.
inline void run_checkpoint_writer(const char *cmd, const std::string &out,
                                  const std::function<result<checkpoint_write_report>()> &write,
                                  command_registry &reg) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = write();
    if (!r.ok()) {
        fmt::print(stderr, "fp4moe {}: {}\n", cmd, r.get_status().message());
        reg.result = 1;
        return;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto &w = r.value();
    for (const auto &n : w.notes) fmt::print("note: {}\n", n);
    fmt::print("wrote {}: {} tensors ({} NVFP4 groups) in {} shard{}, {:.3f} GB of tensors, {:.1f} s\n", out, w.tensors,
               w.nvfp4_groups, w.shards, w.shards == 1 ? "" : "s", w.tensor_bytes / 1e9, s);
}

} // namespace fp4moe::tools
