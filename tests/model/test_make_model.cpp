// make-model: the files, the config the engine's parser reads, the NVFP4 groups, determinism, presets, errors.
#include "model/config.h"
#include "model/inspect.h"
#include "model/make_model.h"
#include "model/presets.h"
#include "model/tokenizer_gen.h"
#include "safetensors_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::temp_dir;

nlohmann::json read_json(const fs::path &p) {
    return nlohmann::json::parse(read_file(p));
}

make_model_options tiny_opts(const fs::path &out, const std::string &preset = "tiny") {
    make_model_options o;
    o.preset = preset;
    o.out = out.string();
    o.progress = false;
    o.seed = 1;
    return o;
}

checkpoint_write_report make(const make_model_options &o) {
    auto r = make_model(o);
    EXPECT_TRUE(r.ok()) << r.get_status().to_string();
    return r.ok() ? r.value() : checkpoint_write_report{};
}

float f32_of(const checkpoint &ck, const std::string &name) {
    auto e = ck.find(name);
    EXPECT_NE(e.info, nullptr) << name;
    if (!e.info) return NAN;
    EXPECT_EQ(e.info->type, dtype::f32) << name;
    float v;
    std::memcpy(&v, e.data().data(), 4);
    return v;
}

nvfp4::matrix_view view_of(const checkpoint &ck, const std::string &prefix) {
    auto w = ck.find(prefix + ".weight"), s = ck.find(prefix + ".weight_scale");
    EXPECT_TRUE(w.info && s.info) << prefix;
    return {w.info->shape[0], w.info->shape[1] * 2, reinterpret_cast<const std::uint8_t *>(w.data().data()),
            reinterpret_cast<const std::uint8_t *>(s.data().data()), f32_of(ck, prefix + ".weight_scale_2")};
}

std::vector<float> bf16_values(const checkpoint &ck, const std::string &name) {
    auto e = ck.find(name);
    EXPECT_TRUE(e.info && e.info->type == dtype::bf16) << name;
    std::vector<float> v(static_cast<std::size_t>(e.info->numel()));
    for (std::size_t i = 0; i < v.size(); ++i) {
        bf16_t h;
        std::memcpy(&h.bits, e.data().data() + 2 * i, 2);
        v[i] = bf16_to_float(h);
    }
    return v;
}

TEST(MakeModel, TinyWritesEveryFile) {
    temp_dir d;
    const auto rep = make(tiny_opts(d.path() / "m"));
    for (const char *f : {"config.json", "hf_quant_config.json", "generation_config.json", "tokenizer.json",
                          "tokenizer_config.json", "model.safetensors.index.json", "model-00001-of-00001.safetensors"})
        EXPECT_TRUE(fs::exists(d.path() / "m" / f)) << f;
    EXPECT_EQ(rep.shards, 1);
    EXPECT_EQ(rep.nvfp4_groups, 30); // layer 0 dense (3) + 8 experts x 3 + shared (3)
    EXPECT_LT(fs::file_size(d.path() / "m" / "model-00001-of-00001.safetensors"), 4u << 20);
}

TEST(MakeModel, TinyConfigLoadsAndMatchesTokenizer) {
    temp_dir d;
    make(tiny_opts(d.path()));
    auto c = load_model_config(d.path().string());
    ASSERT_TRUE(c.ok()) << c.get_status().to_string();
    const auto &cfg = c.value();
    EXPECT_EQ(cfg.arch, model_arch::glm4_moe);
    EXPECT_EQ(cfg.hidden_size, 128);
    EXPECT_EQ(cfg.num_layers, 2);
    EXPECT_EQ(cfg.num_heads, 4);
    EXPECT_EQ(cfg.num_kv_heads, 2);
    EXPECT_EQ(cfg.head_dim, 32);
    EXPECT_EQ(cfg.num_experts, 8);
    EXPECT_EQ(cfg.num_experts_per_tok, 2);
    EXPECT_EQ(cfg.n_shared_experts, 1);
    EXPECT_EQ(cfg.first_k_dense_replace, 1);
    EXPECT_TRUE(cfg.attention_bias);
    EXPECT_TRUE(cfg.qk_norm);
    EXPECT_FLOAT_EQ(cfg.partial_rotary_factor, 0.5f);
    EXPECT_EQ(cfg.quant.quant_algo, "NVFP4");
    EXPECT_TRUE(cfg.quant.module_is_nvfp4("model.layers.1.mlp.experts.7.up_proj"));
    EXPECT_TRUE(cfg.quant.module_is_nvfp4("model.layers.1.mlp.shared_experts.down_proj"));
    EXPECT_TRUE(cfg.quant.module_is_nvfp4("model.layers.0.mlp.gate_proj"));
    EXPECT_FALSE(cfg.quant.module_is_nvfp4("model.layers.1.mlp.gate"));
    EXPECT_FALSE(cfg.quant.module_is_nvfp4("model.layers.0.self_attn.q_proj"));
    EXPECT_FALSE(cfg.quant.module_is_nvfp4("lm_head"));

    // Special-token ids in config.json are those of tokenizer.json; vocab_size covers every id.
    const auto tok = read_json(d.path() / "tokenizer.json");
    std::map<std::string, std::int64_t> added;
    std::int64_t max_id = 0;
    for (const auto &a : tok["added_tokens"]) {
        added[a["content"]] = a["id"];
        max_id = std::max<std::int64_t>(max_id, a["id"]);
    }
    for (const auto &[k, v] : tok["model"]["vocab"].items()) max_id = std::max<std::int64_t>(max_id, v);
    EXPECT_GT(cfg.vocab_size, max_id);
    EXPECT_EQ(cfg.vocab_size % 64, 0);
    ASSERT_EQ(cfg.eos_token_ids.size(), 3u);
    EXPECT_EQ(cfg.eos_token_ids[0], added.at("<|endoftext|>"));
    EXPECT_EQ(cfg.eos_token_ids[1], added.at("<|user|>"));
    EXPECT_EQ(cfg.eos_token_ids[2], added.at("<|observation|>"));
    EXPECT_EQ(cfg.pad_token_id, added.at("<|endoftext|>"));
    EXPECT_EQ(tok["model"]["type"], "BPE");
    EXPECT_EQ(tok["model"]["ignore_merges"], false);
    EXPECT_GE(tok["model"]["merges"].size(), 200u);

    const auto tc = read_json(d.path() / "tokenizer_config.json");
    EXPECT_EQ(tc["eos_token"], "<|endoftext|>");
    EXPECT_NE(tc["chat_template"].get<std::string>().find("[gMASK]<sop>"), std::string::npos);
    const auto hq = read_json(d.path() / "hf_quant_config.json");
    EXPECT_EQ(hq["producer"]["name"], "modelopt");
    EXPECT_TRUE(hq["quantization"]["kv_cache_quant_algo"].is_null());
    EXPECT_EQ(hq["quantization"]["exclude_modules"],
              nlohmann::json({"lm_head", "model.layers.*.mlp.gate", "model.layers.*.self_attn*"}));
    const auto cj = read_json(d.path() / "config.json");
    EXPECT_EQ(cj["torch_dtype"], "bfloat16");
    EXPECT_EQ(cj["quantization_config"]["quant_method"], "modelopt");
    EXPECT_EQ(cj["quantization_config"]["ignore"], hq["quantization"]["exclude_modules"]);
}

TEST(MakeModel, TinyNvfp4GroupsAreModelOptLayout) {
    temp_dir d;
    make(tiny_opts(d.path()));
    auto ck = checkpoint::open(d.path().string());
    ASSERT_TRUE(ck.ok()) << ck.get_status().to_string();
    const auto sum = summarize_checkpoint(ck.value());
    EXPECT_TRUE(sum.problems.empty());
    ASSERT_EQ(sum.nvfp4.size(), 30u);
    for (const auto &g : sum.nvfp4) {
        EXPECT_TRUE(g.has_input_scale) << g.prefix;
        const bool down = g.prefix.ends_with("down_proj");
        const bool dense = g.prefix.starts_with("model.layers.0.");
        const std::int64_t width = dense ? 256 : 64;
        EXPECT_EQ(g.rows, down ? 128 : width) << g.prefix;
        EXPECT_EQ(g.cols, down ? width : 128) << g.prefix;
        EXPECT_EQ(ck.value().find(g.prefix + ".weight_scale_2").info->shape.size(), 0u) << "scalar []";
    }
    // Unquantized tensors: attention, router (bf16) and its F32 bias; no NVFP4 tensor outside the MLPs.
    EXPECT_EQ(ck.value().find("model.layers.1.mlp.gate.weight").info->type, dtype::bf16);
    EXPECT_EQ(ck.value().find("model.layers.1.mlp.gate.e_score_correction_bias").info->type, dtype::f32);
    EXPECT_EQ(ck.value().find("model.layers.0.self_attn.q_proj.bias").info->type, dtype::bf16);
    EXPECT_EQ(ck.value().find("lm_head.weight").info->type, dtype::bf16);
    EXPECT_EQ(ck.value().find("model.layers.0.self_attn.k_norm.weight").info->shape, std::vector<std::int64_t>{32});
}

TEST(MakeModel, GateAndUpShareGlobalAndInputScales) {
    temp_dir d;
    make(tiny_opts(d.path()));
    auto ck = checkpoint::open(d.path().string());
    ASSERT_TRUE(ck.ok());
    std::set<float> distinct;
    std::vector<std::string> mlps = {"model.layers.0.mlp.", "model.layers.1.mlp.shared_experts."};
    for (int e = 0; e < 8; ++e) mlps.push_back("model.layers.1.mlp.experts." + std::to_string(e) + ".");
    for (const auto &m : mlps) {
        const float g2 = f32_of(ck.value(), m + "gate_proj.weight_scale_2");
        EXPECT_EQ(g2, f32_of(ck.value(), m + "up_proj.weight_scale_2")) << m;
        EXPECT_EQ(f32_of(ck.value(), m + "gate_proj.input_scale"), f32_of(ck.value(), m + "up_proj.input_scale")) << m;
        const float in = f32_of(ck.value(), m + "gate_proj.input_scale");
        EXPECT_GE(in, 4.0f / 2688) << m;
        EXPECT_LT(in, 12.0f / 2688) << m;
        // The shared amax is the larger of the two matrices' own: one of them reaches code 6 at scale 448.
        distinct.insert(g2);
    }
    EXPECT_GT(distinct.size(), 5u) << "experts keep their own scales";
}

// Dequantized weights are the bf16 weights of --format bf16 (same seed) within the NVFP4 bound.
TEST(MakeModel, Nvfp4IsTheBf16ModelQuantized) {
    temp_dir d;
    make(tiny_opts(d.path() / "q"));
    auto ob = tiny_opts(d.path() / "b");
    ob.nvfp4 = false;
    make(ob);
    auto q = checkpoint::open((d.path() / "q").string());
    auto b = checkpoint::open((d.path() / "b").string());
    ASSERT_TRUE(q.ok() && b.ok());
    EXPECT_TRUE(summarize_checkpoint(b.value()).nvfp4.empty());
    EXPECT_FALSE(load_model_config((d.path() / "b").string()).value().quant.nvfp4());
    EXPECT_FALSE(fs::exists(d.path() / "b" / "hf_quant_config.json"));
    for (const std::string p : {"model.layers.1.mlp.experts.3.gate_proj", "model.layers.1.mlp.experts.3.down_proj",
                                "model.layers.0.mlp.up_proj"}) {
        const auto v = view_of(q.value(), p);
        std::vector<float> deq(static_cast<std::size_t>(v.rows * v.cols));
        ASSERT_TRUE(nvfp4::dequantize(v, deq).ok());
        const auto ref = bf16_values(b.value(), p + ".weight");
        ASSERT_EQ(ref.size(), deq.size());
        double err2 = 0, ref2 = 0, sum = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
            // Half the widest E2M1 gap (4 -> 6) is one unit of the decoded block scale.
            const float unit = nvfp4::e4m3_decode(v.scales[i / 16]) * v.global_scale;
            ASSERT_LE(std::fabs(deq[i] - ref[i]), unit * 1.0001f) << p << " element " << i;
            err2 += (deq[i] - ref[i]) * (deq[i] - ref[i]);
            ref2 += ref[i] * ref[i];
            sum += ref[i];
        }
        const double rms = std::sqrt(ref2 / ref.size());
        EXPECT_NEAR(rms, 0.02, 0.002) << p;
        EXPECT_NEAR(sum / ref.size(), 0.0, 0.002) << p;
        const double rel = std::sqrt(err2 / ref2);
        EXPECT_GT(rel, 0.02) << p << ": 4-bit weights cannot be that close";
        EXPECT_LT(rel, 0.15) << p;
    }
    // Tensors that are bf16 in both are identical.
    for (const std::string n : {"model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.gate.weight",
                                "model.layers.0.self_attn.o_proj.weight", "model.norm.weight"}) {
        const auto x = q.value().find(n), y = b.value().find(n);
        ASSERT_TRUE(x.info && y.info) << n;
        EXPECT_TRUE(std::equal(x.data().begin(), x.data().end(), y.data().begin(), y.data().end())) << n;
    }
    const auto norm = bf16_values(b.value(), "model.norm.weight");
    for (float x : norm) EXPECT_NEAR(x, 1.0f, 0.1f);
}

TEST(MakeModel, DeterministicFromSeedAndThreadCount) {
    temp_dir d;
    auto a = tiny_opts(d.path() / "a");
    a.threads = 1;
    auto b = tiny_opts(d.path() / "b");
    b.threads = 3;
    auto c = tiny_opts(d.path() / "c");
    c.seed = 2;
    make(a), make(b), make(c);
    for (const auto &e : fs::directory_iterator(d.path() / "a")) {
        const auto name = e.path().filename();
        EXPECT_EQ(read_file(e.path()), read_file(d.path() / "b" / name)) << name;
    }
    const std::string shard = "model-00001-of-00001.safetensors";
    EXPECT_NE(read_file(d.path() / "a" / shard), read_file(d.path() / "c" / shard));
    EXPECT_EQ(read_file(d.path() / "a" / "config.json"), read_file(d.path() / "c" / "config.json"));
}

TEST(MakeModel, ShardsAndIndex) {
    temp_dir d;
    auto o = tiny_opts(d.path());
    o.shard_size = 100'000;
    const auto rep = make(o);
    EXPECT_GT(rep.shards, 3);
    const auto index = read_json(d.path() / "model.safetensors.index.json");
    EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), rep.tensor_bytes);
    auto ck = checkpoint::open(d.path().string());
    ASSERT_TRUE(ck.ok()) << ck.get_status().to_string();
    EXPECT_EQ(ck.value().files().size(), static_cast<std::size_t>(rep.shards));
    EXPECT_EQ(index["weight_map"].size(), ck.value().tensors().size());
    std::uint64_t total = 0;
    for (const auto &e : ck.value().tensors()) {
        total += e.info->nbytes();
        const std::string file = index["weight_map"][e.info->name];
        EXPECT_EQ(fs::path(e.file->path()).filename().string(), file) << e.info->name;
        EXPECT_TRUE(file.ends_with(fmt::format("-of-{:05d}.safetensors", rep.shards)));
    }
    EXPECT_EQ(total, rep.tensor_bytes);
    // gate/up pairs are never split across shards.
    for (int e = 0; e < 8; ++e) {
        const std::string p = "model.layers.1.mlp.experts." + std::to_string(e) + ".";
        EXPECT_EQ(index["weight_map"][p + "gate_proj.weight"], index["weight_map"][p + "up_proj.input_scale"]);
    }
}

TEST(MakeModel, EveryTinyPresetLoads) {
    for (const auto &p : model_presets()) {
        if (!p.name.starts_with("tiny")) continue;
        temp_dir d;
        const auto rep = make(tiny_opts(d.path(), p.name));
        auto c = load_model_config(d.path().string());
        ASSERT_TRUE(c.ok()) << p.name << ": " << c.get_status().to_string();
        EXPECT_EQ(c.value().arch, p.arch) << p.name;
        auto ck = checkpoint::open(d.path().string());
        ASSERT_TRUE(ck.ok()) << p.name;
        const auto sum = summarize_checkpoint(ck.value());
        EXPECT_TRUE(sum.problems.empty()) << p.name;
        EXPECT_EQ(static_cast<std::int64_t>(sum.nvfp4.size()), rep.nvfp4_groups) << p.name;
        for (const auto &g : sum.nvfp4) EXPECT_TRUE(c.value().quant.module_is_nvfp4(g.prefix)) << g.prefix;
    }
}

TEST(MakeModel, MlaAndIndexerTensorShapes) {
    temp_dir d;
    make(tiny_opts(d.path(), "tiny-glm-5"));
    auto ck = checkpoint::open(d.path().string());
    ASSERT_TRUE(ck.ok());
    auto shape = [&](const std::string &n) {
        auto e = ck.value().find("model.layers.1.self_attn." + n);
        EXPECT_NE(e.info, nullptr) << n;
        return e.info ? e.info->shape : std::vector<std::int64_t>{};
    };
    using v = std::vector<std::int64_t>;
    // heads 4, q_lora 64, kv_lora 32, nope 32, rope 16, v 32; indexer 4 heads x 32.
    EXPECT_EQ(shape("q_a_proj.weight"), (v{64, 128}));
    EXPECT_EQ(shape("q_a_layernorm.weight"), (v{64}));
    EXPECT_EQ(shape("q_b_proj.weight"), (v{4 * 48, 64}));
    EXPECT_EQ(shape("kv_a_proj_with_mqa.weight"), (v{32 + 16, 128}));
    EXPECT_EQ(shape("kv_a_layernorm.weight"), (v{32}));
    EXPECT_EQ(shape("kv_b_proj.weight"), (v{4 * 64, 32}));
    EXPECT_EQ(shape("o_proj.weight"), (v{128, 4 * 32}));
    EXPECT_EQ(shape("indexer.wq_b.weight"), (v{4 * 32, 64}));
    EXPECT_EQ(shape("indexer.wk.weight"), (v{32, 128}));
    EXPECT_EQ(shape("indexer.k_norm.weight"), (v{32}));
    EXPECT_EQ(shape("indexer.k_norm.bias"), (v{32}));
    EXPECT_EQ(shape("indexer.weights_proj.weight"), (v{4, 128}));
    auto c = load_model_config(d.path().string());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().head_dim, 48);
    EXPECT_EQ(c.value().v_head_dim, 32);
    const auto cj = read_json(d.path() / "config.json");
    EXPECT_EQ(cj["rope_parameters"]["rope_type"], "default");

    temp_dir d2;
    make(tiny_opts(d2.path(), "tiny-deepseek-v3"));
    auto c2 = load_model_config(d2.path().string());
    ASSERT_TRUE(c2.ok()) << c2.get_status().to_string();
    EXPECT_EQ(c2.value().routing.n_group, 4);
    EXPECT_EQ(c2.value().routing.topk_group, 2);
    const auto tok = read_json(d2.path() / "tokenizer.json");
    std::map<std::string, std::int64_t> added;
    for (const auto &a : tok["added_tokens"]) added[a["content"]] = a["id"];
    EXPECT_EQ(c2.value().bos_token_id, added.at("<｜begin▁of▁sentence｜>"));
    ASSERT_EQ(c2.value().eos_token_ids.size(), 1u);
    EXPECT_EQ(c2.value().eos_token_ids[0], added.at("<｜end▁of▁sentence｜>"));
    EXPECT_EQ(tok["pre_tokenizer"]["pretokenizers"].size(), 4u) << "three Splits + ByteLevel";
}

TEST(MakeModel, OverridesAndClamps) {
    temp_dir d;
    auto o = tiny_opts(d.path(), "tiny-deepseek-v3");
    o.layers = 1;
    o.experts = 4;
    const auto rep = make(o);
    auto c = load_model_config(d.path().string());
    ASSERT_TRUE(c.ok()) << c.get_status().to_string();
    EXPECT_EQ(c.value().num_layers, 1);
    EXPECT_EQ(c.value().first_k_dense_replace, 0);
    EXPECT_EQ(c.value().num_experts, 4);
    EXPECT_EQ(c.value().routing.n_group, 1) << "4 experts cannot form 4 groups of >= 2";
    EXPECT_EQ(rep.notes.size(), 2u);
    EXPECT_EQ(rep.nvfp4_groups, 4 * 3 + 3);
}

TEST(MakeModel, Errors) {
    temp_dir d;
    auto o = tiny_opts(d.path() / "x", "glm-9");
    auto r = make_model(o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.get_status().message().find("glm-9"), std::string::npos);
    for (const auto &p : model_presets()) EXPECT_NE(r.get_status().message().find(p.name), std::string::npos);

    o = tiny_opts(d.path() / "m");
    make(o);
    r = make_model(o);
    ASSERT_FALSE(r.ok()) << "refuses a non-empty --out";
    EXPECT_EQ(r.get_status().code(), status_code::invalid_argument);
    EXPECT_NE(r.get_status().message().find("--force"), std::string::npos);
    // --force rewrites, and drops the shards of the earlier run.
    o.force = true;
    o.shard_size = 100'000;
    const auto rep = make(o);
    o.shard_size = 2'000'000'000;
    make(o);
    int shards = 0;
    for (const auto &e : fs::directory_iterator(d.path() / "m")) shards += e.path().extension() == ".safetensors";
    EXPECT_GT(rep.shards, 1);
    EXPECT_EQ(shards, 1);
    EXPECT_TRUE(checkpoint::open((d.path() / "m").string()).ok());

    o = tiny_opts(d.path() / "y");
    o.layers = -1;
    EXPECT_FALSE(make_model(o).ok());
    EXPECT_EQ(parse_byte_size("2GB"), 2'000'000'000u);
    EXPECT_EQ(parse_byte_size("1GiB"), 1ull << 30);
    EXPECT_EQ(parse_byte_size("500mb"), 500'000'000u);
    EXPECT_EQ(parse_byte_size("4096"), 4096u);
    EXPECT_EQ(parse_byte_size("lots"), 0u);
    EXPECT_EQ(parse_byte_size("2XB"), 0u);
}

// The real-size presets carry models.md's numbers (these are not generated here: too big for a unit test).
TEST(MakeModel, RealPresetDims) {
    const auto *air = find_model_preset("glm-4.5-air");
    ASSERT_NE(air, nullptr);
    EXPECT_EQ(air->hidden_size, 4096);
    EXPECT_EQ(air->num_experts, 128);
    EXPECT_EQ(air->moe_intermediate_size, 1408);
    EXPECT_EQ(air->first_k_dense_replace, 1);
    const auto *g5 = find_model_preset("glm-5");
    ASSERT_NE(g5, nullptr);
    EXPECT_EQ(g5->num_heads * (g5->qk_nope_head_dim + g5->qk_rope_head_dim), 16384); // q_b_proj rows
    EXPECT_EQ(g5->num_heads * (g5->qk_nope_head_dim + g5->v_head_dim), 28672);       // kv_b_proj rows
    const auto *ds = find_model_preset("deepseek-v3");
    ASSERT_NE(ds, nullptr);
    EXPECT_EQ(ds->num_heads * (ds->qk_nope_head_dim + ds->qk_rope_head_dim), 24576);
    EXPECT_EQ(ds->n_group, 8);
    const auto *qw = find_model_preset("qwen3-30b-a3b");
    ASSERT_NE(qw, nullptr);
    EXPECT_EQ(qw->n_shared_experts, 0);
    EXPECT_EQ(qw->vocab_size, 151936);
    for (const auto &p : model_presets()) {
        EXPECT_EQ(p.hidden_size % 16, 0) << p.name;
        EXPECT_EQ(p.moe_intermediate_size % 16, 0) << p.name;
        EXPECT_EQ(p.intermediate_size % 16, 0) << p.name;
        const auto tok = generate_tokenizer(p.tokenizer, 4096);
        EXPECT_TRUE(p.vocab_size == 0 || p.vocab_size >= tok.size) << p.name;
    }
}

} // namespace
} // namespace fp4moe
