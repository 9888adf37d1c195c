// Shared by the loadgen tests: a generated tokenizer on disk (the Qwen family's, from make-model's generator).
#pragma once

#include "model/tokenizer_gen.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace fp4moe::loadgen::test {

/// A directory holding tokenizer.json and tokenizer_config.json, created once per process.
inline const std::string &tokenizer_dir() {
    static const std::string dir = [] {
        const auto d = std::filesystem::temp_directory_path() / ("fp4moe_loadgen_tok_" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        const auto t = generate_tokenizer(tokenizer_family::qwen, 4096);
        std::ofstream(d / "tokenizer.json") << t.tokenizer_json;
        std::ofstream(d / "tokenizer_config.json") << t.tokenizer_config_json;
        return d.string();
    }();
    return dir;
}

} // namespace fp4moe::loadgen::test
