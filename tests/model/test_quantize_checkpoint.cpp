// quantize: layout, exactness against make-model's NVFP4 (same recipe), error bound, untouched bf16 tensors,
// the exclusion summary, errors.
#include "model/config.h"
#include "model/inspect.h"
#include "model/make_model.h"
#include "model/quantize_checkpoint.h"
#include "safetensors_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::temp_dir;

void make(const fs::path &out, bool nvfp4, const std::string &preset = "tiny") {
    make_model_options o;
    o.preset = preset;
    o.out = out.string();
    o.nvfp4 = nvfp4;
    o.seed = 3;
    o.progress = false;
    auto r = make_model(o);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
}

quantize_options qopts(const fs::path &in, const fs::path &out) {
    quantize_options o;
    o.in = in.string();
    o.out = out.string();
    o.progress = false;
    return o;
}

bool same_bytes(const checkpoint &a, const checkpoint &b, const std::string &name) {
    const auto x = a.find(name), y = b.find(name);
    if (!x.info || !y.info) return false;
    return x.info->type == y.info->type && x.info->shape == y.info->shape &&
           std::equal(x.data().begin(), x.data().end(), y.data().begin(), y.data().end());
}

float f32_of(const checkpoint &ck, const std::string &name) {
    float v = NAN;
    if (auto e = ck.find(name); e.info) std::memcpy(&v, e.data().data(), 4);
    return v;
}

// With --dense-mlp the quantized bf16 model is make-model's NVFP4 model (same seed): same recipe, same bytes,
// except that make-model writes input_scale and quantize (weight-only) does not.
TEST(QuantizeCheckpoint, MatchesMakeModelNvfp4Bytes) {
    temp_dir d;
    make(d.path() / "bf16", false);
    make(d.path() / "nvfp4", true);
    auto o = qopts(d.path() / "bf16", d.path() / "q");
    o.dense_mlp = true;
    auto r = quantize_checkpoint(o);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().nvfp4_groups, 30);
    auto q = checkpoint::open((d.path() / "q").string());
    auto m = checkpoint::open((d.path() / "nvfp4").string());
    ASSERT_TRUE(q.ok() && m.ok());
    std::size_t compared = 0;
    for (const auto &e : m.value().tensors()) {
        const std::string &n = e.info->name;
        if (n.ends_with(".input_scale")) {
            EXPECT_EQ(q.value().find(n).info, nullptr) << n;
            continue;
        }
        EXPECT_TRUE(same_bytes(q.value(), m.value(), n)) << n;
        ++compared;
    }
    EXPECT_EQ(compared, q.value().tensors().size());
    const auto hq = nlohmann::json::parse(read_file(d.path() / "q" / "hf_quant_config.json"));
    EXPECT_EQ(hq["quantization"]["quant_algo"], "W4A16_NVFP4");
    EXPECT_EQ(hq["quantization"]["exclude_modules"],
              nlohmann::json({"lm_head", "model.layers.*.mlp.gate", "model.layers.*.self_attn*"}));
    auto c = load_model_config((d.path() / "q").string());
    ASSERT_TRUE(c.ok()) << c.get_status().to_string();
    EXPECT_EQ(c.value().quant.quant_algo, "W4A16_NVFP4");
}

TEST(QuantizeCheckpoint, DefaultsKeepDenseMlpAndNonExpertsBf16) {
    temp_dir d;
    make(d.path() / "bf16", false);
    auto r = quantize_checkpoint(qopts(d.path() / "bf16", d.path() / "q"));
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().nvfp4_groups, 27); // 8 experts + shared, x3
    auto in = checkpoint::open((d.path() / "bf16").string());
    auto q = checkpoint::open((d.path() / "q").string());
    ASSERT_TRUE(in.ok() && q.ok());
    const auto sum = summarize_checkpoint(q.value());
    EXPECT_TRUE(sum.problems.empty());
    EXPECT_EQ(sum.nvfp4.size(), 27u);
    for (const auto &g : sum.nvfp4) EXPECT_FALSE(g.has_input_scale) << g.prefix;

    // Every tensor that is not an expert weight is byte-identical to the input.
    std::size_t copied = 0;
    for (const auto &e : in.value().tensors()) {
        const std::string &n = e.info->name;
        if (n.find(".experts.") != std::string::npos || n.find(".shared_experts.") != std::string::npos) continue;
        EXPECT_TRUE(same_bytes(in.value(), q.value(), n)) << n;
        ++copied;
    }
    EXPECT_GT(copied, 20u);
    EXPECT_NE(q.value().find("model.layers.0.mlp.gate_proj.weight").info, nullptr);
    EXPECT_EQ(q.value().find("model.layers.0.mlp.gate_proj.weight_scale").info, nullptr);

    // Quantized weights: within the NVFP4 bound of the originals; gate/up share weight_scale_2.
    for (const std::string p :
         {"model.layers.1.mlp.experts.0.", "model.layers.1.mlp.experts.5.", "model.layers.1.mlp.shared_experts."}) {
        EXPECT_EQ(f32_of(q.value(), p + "gate_proj.weight_scale_2"), f32_of(q.value(), p + "up_proj.weight_scale_2"));
        for (const std::string proj : {"gate_proj", "up_proj", "down_proj"}) {
            const auto w = q.value().find(p + proj + ".weight"), s = q.value().find(p + proj + ".weight_scale");
            ASSERT_TRUE(w.info && s.info);
            EXPECT_EQ(w.info->type, dtype::u8);
            EXPECT_EQ(s.info->type, dtype::f8_e4m3);
            const nvfp4::matrix_view v{w.info->shape[0], w.info->shape[1] * 2,
                                       reinterpret_cast<const std::uint8_t *>(w.data().data()),
                                       reinterpret_cast<const std::uint8_t *>(s.data().data()),
                                       f32_of(q.value(), p + proj + ".weight_scale_2")};
            std::vector<float> deq(static_cast<std::size_t>(v.rows * v.cols));
            ASSERT_TRUE(nvfp4::dequantize(v, deq).ok());
            const auto src = in.value().find(p + proj + ".weight");
            ASSERT_EQ(static_cast<std::size_t>(src.info->numel()), deq.size());
            double err2 = 0, ref2 = 0;
            for (std::size_t i = 0; i < deq.size(); ++i) {
                bf16_t h;
                std::memcpy(&h.bits, src.data().data() + 2 * i, 2);
                const float ref = bf16_to_float(h);
                const float unit = nvfp4::e4m3_decode(v.scales[i / 16]) * v.global_scale;
                ASSERT_LE(std::fabs(deq[i] - ref), unit * 1.0001f) << p << proj << " " << i;
                err2 += (deq[i] - ref) * (deq[i] - ref);
                ref2 += ref * ref;
            }
            EXPECT_LT(std::sqrt(err2 / ref2), 0.15) << p << proj;
        }
    }
    const auto hq = nlohmann::json::parse(read_file(d.path() / "q" / "hf_quant_config.json"));
    EXPECT_EQ(
        hq["quantization"]["exclude_modules"],
        nlohmann::json({"lm_head", "model.layers.*.mlp.down_proj", "model.layers.*.mlp.gate",
                        "model.layers.*.mlp.gate_proj", "model.layers.*.mlp.up_proj", "model.layers.*.self_attn*"}));
    // Other files are copied; config.json is the input's plus quantization_config.
    for (const char *f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
        EXPECT_EQ(read_file(d.path() / "q" / f), read_file(d.path() / "bf16" / f)) << f;
    auto cin = nlohmann::json::parse(read_file(d.path() / "bf16" / "config.json"));
    auto cout = nlohmann::json::parse(read_file(d.path() / "q" / "config.json"));
    EXPECT_EQ(cout["quantization_config"]["quant_method"], "modelopt");
    EXPECT_EQ(cout["quantization_config"]["ignore"], hq["quantization"]["exclude_modules"]);
    cout.erase("quantization_config");
    EXPECT_EQ(cin, cout);
}

TEST(QuantizeCheckpoint, ExcludeSharedExpertsAndQwen) {
    temp_dir d;
    make(d.path() / "bf16", false);
    auto o = qopts(d.path() / "bf16", d.path() / "q");
    o.exclude = {"model.layers.*.mlp.shared_experts*"};
    auto r = quantize_checkpoint(o);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().nvfp4_groups, 24);
    const auto hq = nlohmann::json::parse(read_file(d.path() / "q" / "hf_quant_config.json"));
    const auto ex = hq["quantization"]["exclude_modules"];
    EXPECT_NE(std::find(ex.begin(), ex.end(), "model.layers.*.mlp.shared_experts*"), ex.end()) << ex.dump();

    make(d.path() / "qwen", false, "tiny-qwen3");
    r = quantize_checkpoint(qopts(d.path() / "qwen", d.path() / "qq"));
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_EQ(r.value().nvfp4_groups, 2 * 8 * 3);
    const auto hq2 = nlohmann::json::parse(read_file(d.path() / "qq" / "hf_quant_config.json"));
    EXPECT_EQ(hq2["quantization"]["exclude_modules"],
              nlohmann::json({"lm_head", "model.layers.*.mlp.gate", "model.layers.*.self_attn*"}));
}

TEST(QuantizeCheckpoint, ExclusionSummary) {
    // One expert kept bf16 by hand: its modules are named one by one, the rest summarized.
    std::vector<std::string> q, b = {"lm_head", "model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj",
                                     "model.layers.1.mlp.gate", "model.layers.2.mlp.experts.0.gate_proj"};
    for (int l = 1; l <= 2; ++l)
        for (int e = 0; e < 2; ++e)
            for (const char *p : {"gate_proj", "up_proj", "down_proj"}) {
                const std::string m = fmt::format("model.layers.{}.mlp.experts.{}.{}", l, e, p);
                if (m != b.back()) q.push_back(m);
            }
    // Layer 3 is an MTP layer (num_layers = 3): its index stays.
    b.push_back("model.layers.3.mlp.experts.0.gate_proj");
    b.push_back("model.layers.3.eh_proj");
    const auto s = summarize_exclusions(b, q, 3);
    EXPECT_EQ(s, (std::vector<std::string>{"lm_head", "model.layers.*.mlp.gate", "model.layers.*.self_attn*",
                                           "model.layers.2.mlp.experts.0.gate_proj", "model.layers.3*"}));
    quant_config qc;
    qc.quant_algo = "W4A16_NVFP4";
    qc.exclude = s;
    for (const auto &m : q) EXPECT_TRUE(qc.module_is_nvfp4(m)) << m;
    for (const auto &m : b) EXPECT_FALSE(qc.module_is_nvfp4(m)) << m;
}

TEST(QuantizeCheckpoint, Errors) {
    temp_dir d;
    fs::create_directories(d.path() / "empty");
    auto r = quantize_checkpoint(qopts(d.path() / "empty", d.path() / "o1"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("config.json"), std::string::npos);

    make(d.path() / "nv", true);
    r = quantize_checkpoint(qopts(d.path() / "nv", d.path() / "o2"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("already quantized"), std::string::npos);

    make(d.path() / "bf", false);
    r = quantize_checkpoint(qopts(d.path() / "bf", d.path() / "bf"));
    ASSERT_FALSE(r.ok()) << "--out == --in";
    r = quantize_checkpoint(qopts(d.path() / "bf", d.path() / "nv"));
    ASSERT_FALSE(r.ok()) << "non-empty --out";
    EXPECT_NE(r.get_status().message().find("--force"), std::string::npos);
    auto o = qopts(d.path() / "bf", d.path() / "o3");
    o.exclude = {"*experts*"};
    r = quantize_checkpoint(o);
    ASSERT_FALSE(r.ok()) << "nothing left to quantize";
}

} // namespace
} // namespace fp4moe
