// Shared by the runtime tests: a `make-model --preset tiny` checkpoint in a per-process temp dir, loaded with
// the cpu.ref runner (no tuning) and its tokenizer. Set up once per test suite.
#pragma once

#include "fp4moe/tokenizer.h"
#include "model/make_model.h"
#include "runtime/cpu_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include <unistd.h>

namespace fp4moe::test {

struct tiny_checkpoint {
    std::string dir;
    cpu_model *model = nullptr; ///< owned
    tokenizer *tok = nullptr;   ///< owned

    /// Writes and loads the checkpoint under "<tmp>/fp4moe_<tag>_<pid>"; failures are gtest assertions.
    void create(const std::string &tag) {
        dir = (std::filesystem::temp_directory_path() / ("fp4moe_" + tag + "_" + std::to_string(::getpid()))).string();
        make_model_options mo;
        mo.preset = "tiny";
        mo.out = dir;
        mo.force = true;
        mo.threads = 2;
        mo.progress = false;
        auto w = make_model(mo);
        ASSERT_TRUE(w.ok()) << w.get_status().to_string();
        cpu_model_options co;
        co.model.threads = 2;
        co.model.max_batch_tokens = 64;
        co.moe_runner = "cpu.ref";
        co.tune_at_load = false;
        auto m = cpu_model::load(dir, co);
        ASSERT_TRUE(m.ok()) << m.get_status().to_string();
        model = m.value().release();
        auto t = tokenizer::load(dir);
        ASSERT_TRUE(t.ok()) << t.get_status().to_string();
        tok = new tokenizer(std::move(t.value()));
    }

    void destroy() {
        delete model;
        delete tok;
        model = nullptr;
        tok = nullptr;
        std::filesystem::remove_all(dir);
    }
};

} // namespace fp4moe::test
