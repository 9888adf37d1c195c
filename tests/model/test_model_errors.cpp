// Broken checkpoints: every defect is refused before anything runs, with an error that names the problem.
// Each case copies the tiny golden checkpoint (GLM-4.5 family) or its NVFP4 twin and breaks one thing.
#include "fp4moe/safetensors.h"
#include "model/weights.h"
#include "safetensors_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

using namespace fp4moe;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/golden/";

// Copies `name` into `dir` (a fresh checkpoint directory).
std::string copy_fixture(const test::temp_dir &tmp, const std::string &name) {
    const fs::path dst = tmp.path() / name;
    fs::create_directories(dst);
    for (const auto &e : fs::directory_iterator(kGolden + name))
        if (e.path().extension() != ".json" || e.path().filename() != "golden.json")
            fs::copy_file(e.path(), dst / e.path().filename(), fs::copy_options::overwrite_existing);
    for (const auto &e : fs::directory_iterator(dst))
        fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add);
    return dst.string();
}

void edit_json(const std::string &file, const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json j;
    {
        std::ifstream in(file);
        j = nlohmann::json::parse(in);
    }
    edit(j);
    std::ofstream(file) << j.dump(2);
}

// Rewrites the single-file checkpoint with `edit` applied to its tensor list.
void edit_tensors(const std::string &file, const std::function<void(std::vector<tensor_to_write> &)> &edit) {
    std::vector<std::byte> keep;
    std::vector<tensor_to_write> ts;
    {
        auto f = safetensors_file::open(file);
        ASSERT_TRUE(f.ok()) << f.get_status().to_string();
        std::size_t total = 0;
        for (const auto &t : f.value().tensors()) total += t.nbytes();
        keep.resize(total);
        std::size_t off = 0;
        for (const auto &t : f.value().tensors()) {
            auto d = f.value().data(t);
            std::copy(d.begin(), d.end(), keep.begin() + static_cast<std::ptrdiff_t>(off));
            ts.push_back({t.name, t.type, t.shape, std::span<const std::byte>(keep.data() + off, d.size())});
            off += d.size();
        }
    }
    edit(ts);
    ASSERT_TRUE(write_safetensors(file, ts).ok());
}

std::string load_error(const std::string &dir) {
    auto m = load_model_weights(dir);
    EXPECT_FALSE(m.ok()) << "loading " << dir << " should fail";
    return m.ok() ? std::string() : m.get_status().message();
}

} // namespace

TEST(ModelErrors, TheIntactFixtureLoads) {
    test::temp_dir tmp;
    auto m = load_model_weights(copy_fixture(tmp, "glm4_moe"));
    ASSERT_TRUE(m.ok()) << m.get_status().to_string();
    EXPECT_EQ(m.value()->layers.size(), 3u);
}

TEST(ModelErrors, MissingTensorIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_tensors(dir + "/model.safetensors", [](auto &ts) {
        std::erase_if(ts, [](const auto &t) { return t.name == "model.layers.2.mlp.experts.5.up_proj.weight"; });
    });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.layers.2.mlp.experts.5.up_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(ModelErrors, WrongShapeIsNamedWithTheExpectedShape) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_tensors(dir + "/model.safetensors", [](auto &ts) {
        for (auto &t : ts)
            if (t.name == "model.layers.1.self_attn.k_proj.weight") t.shape = {16, 128}; // was [32, 64]
    });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.layers.1.self_attn.k_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[16, 128]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected [32, 64]"), std::string::npos) << msg;
}

TEST(ModelErrors, WrongDtypeIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_tensors(dir + "/model.safetensors", [](auto &ts) {
        for (auto &t : ts)
            if (t.name == "model.embed_tokens.weight") t.type = dtype::f16;
    });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.embed_tokens.weight' is F16, expected BF16"), std::string::npos) << msg;
}

TEST(ModelErrors, TruncatedShardIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    const auto file = dir + "/model.safetensors";
    fs::resize_file(file, fs::file_size(file) - 1000);
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

TEST(ModelErrors, BadConfigFieldIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_json(dir + "/config.json", [](auto &j) { j["num_key_value_heads"] = "two"; });
    auto msg = load_error(dir);
    EXPECT_NE(msg.find("config.json: field 'num_key_value_heads' must be an integer"), std::string::npos) << msg;

    edit_json(dir + "/config.json", [](auto &j) {
        j["num_key_value_heads"] = 3; // 4 heads are not a multiple of 3 kv heads
    });
    msg = load_error(dir);
    EXPECT_NE(msg.find("num_key_value_heads (3)"), std::string::npos) << msg;

    edit_json(dir + "/config.json", [](auto &j) {
        j["num_key_value_heads"] = 2;
        j.erase("hidden_size");
    });
    msg = load_error(dir);
    EXPECT_NE(msg.find("missing field 'hidden_size'"), std::string::npos) << msg;
}

TEST(ModelErrors, UnknownArchitectureIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_json(dir + "/config.json", [](auto &j) {
        j["architectures"] = {"LlamaForCausalLM"};
        j["model_type"] = "llama";
    });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("architecture 'LlamaForCausalLM'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Glm4MoeForCausalLM"), std::string::npos) << msg; // lists what is supported
}

TEST(ModelErrors, MlaArchitecturesParseButAreRefused) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe");
    edit_json(dir + "/config.json", [](auto &j) {
        j["architectures"] = {"DeepseekV3ForCausalLM"};
        j["model_type"] = "deepseek_v3";
        j["kv_lora_rank"] = 32;
        j["q_lora_rank"] = 48;
        j["qk_nope_head_dim"] = 16;
        j["qk_rope_head_dim"] = 8;
        j["v_head_dim"] = 16;
    });
    auto cfg = load_model_config(dir);
    ASSERT_TRUE(cfg.ok()) << cfg.get_status().to_string();
    EXPECT_EQ(cfg.value().arch, model_arch::deepseek_v3);
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("multi-head latent attention (MLA)"), std::string::npos) << msg;
}

TEST(ModelErrors, QuantizationDisagreeingWithTheTensorsIsNamed) {
    // The NVFP4 twin says experts are NVFP4; excluding them in hf_quant_config.json contradicts the tensors.
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe-nvfp4");
    edit_json(dir + "/hf_quant_config.json",
              [](auto &j) { j["quantization"]["exclude_modules"].push_back("model.layers.*.mlp.experts*"); });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("mlp.experts.0.gate_proj' is NVFP4 in the checkpoint"), std::string::npos) << msg;
}

TEST(ModelErrors, Nvfp4ScaleShapeIsNamed) {
    test::temp_dir tmp;
    const auto dir = copy_fixture(tmp, "glm4_moe-nvfp4");
    const auto shard = dir + "/model-00001-of-00001.safetensors";
    edit_tensors(shard, [](auto &ts) {
        for (auto &t : ts)
            if (t.name == "model.layers.1.mlp.experts.3.down_proj.weight_scale") t.shape = {32, 4}; // was [64, 2]
    });
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.layers.1.mlp.experts.3.down_proj.weight_scale"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected [64, 2]"), std::string::npos) << msg;
}
