// Synthetic checkpoints. Every random value comes from a counter-based stream keyed by (seed, tensor name,
// block of 64Ki elements), so the bytes do not depend on the thread count or on how tensors are split into
// chunks, and --format bf16 and --format nvfp4 draw the same weights.
#include "model/make_model.h"

#include "core/error.h"
#include "model/config.h"
#include "model/inspect.h"
#include "model/presets.h"
#include "model/tokenizer_gen.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// ---- random numbers ----------------------------------------------------------------------------------

std::uint64_t splitmix64(std::uint64_t &x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// xoshiro256** (Blackman & Vigna): fast, and good enough for weights.
struct xoshiro256 {
    std::uint64_t s[4];
    explicit xoshiro256(std::uint64_t seed) {
        for (auto &v : s) v = splitmix64(seed);
    }
    std::uint64_t next() {
        const std::uint64_t r = std::rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = std::rotl(s[3], 45);
        return r;
    }
};

std::uint64_t tensor_seed(std::uint64_t seed, std::string_view name) {
    std::uint64_t x = seed ^ 0x5EEDF00Dull;
    return splitmix64(x) ^ fnv1a(name);
}

float uniform01(std::uint64_t seed, std::string_view key) {
    std::uint64_t x = tensor_seed(seed, key);
    return static_cast<float>(splitmix64(x) >> 40) * 0x1p-24f;
}

// How a tensor's values are drawn: mean + std * n, n approximately standard normal (Irwin-Hall sum of four
// 16-bit uniforms from one 64-bit draw: variance 1, tails cut at +-3.46).
struct init {
    float mean = 0.0f;
    float std = 0.02f;
};

constexpr std::int64_t kStreamBlock = 1 << 16; // elements per independent stream
constexpr std::int64_t kChunk = 1 << 20;       // elements per bf16 work chunk (a multiple of kStreamBlock)

// Values [begin, end) of the tensor's stream; begin must be a multiple of kStreamBlock.
template <typename Out>
void draw(std::uint64_t tseed, init in, std::int64_t begin, std::int64_t end, Out out) {
    constexpr float kInvStd = 1.0f / 37837.23f; // sqrt(4 * (65536^2 - 1) / 12)
    for (std::int64_t b = begin; b < end; b += kStreamBlock) {
        xoshiro256 rng(tseed ^ (static_cast<std::uint64_t>(b / kStreamBlock) * 0xD1B54A32D192ED03ull));
        const std::int64_t e = std::min(end, b + kStreamBlock);
        for (std::int64_t i = b; i < e; ++i) {
            const std::uint64_t r = rng.next();
            const auto sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
            out(i, in.mean + in.std * ((sum - 131070.0f) * kInvStd));
        }
    }
}

// The bf16-rounded values of a whole matrix, as floats (what --format bf16 stores).
std::vector<float> draw_matrix(std::uint64_t seed, const std::string &name, std::int64_t n, init in) {
    std::vector<float> v(static_cast<std::size_t>(n));
    draw(tensor_seed(seed, name), in, 0, n,
         [&](std::int64_t i, float x) { v[static_cast<std::size_t>(i)] = bf16_to_float(float_to_bf16(x)); });
    return v;
}

// ---- the tensor plan ---------------------------------------------------------------------------------

struct plan_context {
    std::uint64_t seed = 0;
    bool nvfp4 = true;
    quant_config quant; // decides which Linear modules are NVFP4
    std::vector<write_unit> units;
    std::int64_t nvfp4_groups = 0;
};

void add_random(plan_context &c, const std::string &name, dtype type, std::vector<std::int64_t> shape, init in) {
    write_unit u;
    tensor_spec t{name, type, std::move(shape)};
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    u.tensors.push_back(t);
    u.chunks = static_cast<int>(std::max<std::int64_t>(1, (n + kChunk - 1) / kChunk));
    const std::uint64_t ts = tensor_seed(c.seed, name);
    u.produce = [ts, in, n, type](int chunk, std::span<const std::span<std::byte>> out) {
        const std::int64_t b = chunk * kChunk, e = std::min(n, b + kChunk);
        std::byte *dst = out[0].data();
        if (type == dtype::f32) {
            draw(ts, in, b, e, [&](std::int64_t i, float x) { std::memcpy(dst + 4 * i, &x, 4); });
        } else {
            FP4MOE_ASSERT(type == dtype::bf16);
            draw(ts, in, b, e, [&](std::int64_t i, float x) {
                const bf16_t h = float_to_bf16(x);
                std::memcpy(dst + 2 * i, &h.bits, 2);
            });
        }
    };
    c.units.push_back(std::move(u));
}

// Plausible static activation scale: amax in [4, 12) / 2688, one per module (gate/up share theirs).
float input_scale_for(std::uint64_t seed, const std::string &key) {
    return (4.0f + 8.0f * uniform01(seed, key + ".input_amax")) / 2688.0f;
}

// One Linear `module` [rows, cols], or a gate/up pair (`sibling` non-empty) sharing amax and input scale.
void add_linear(plan_context &c, const std::string &module, std::int64_t rows, std::int64_t cols,
                const std::string &sibling = {}) {
    const bool q = c.nvfp4 && c.quant.module_is_nvfp4(module);
    if (!q) {
        add_random(c, module + ".weight", dtype::bf16, {rows, cols}, {});
        if (!sibling.empty()) add_random(c, sibling + ".weight", dtype::bf16, {rows, cols}, {});
        return;
    }
    write_unit u;
    u.tensors = nvfp4_tensor_specs(module, rows, cols, true);
    std::vector<std::string> names = {module};
    if (!sibling.empty()) {
        auto more = nvfp4_tensor_specs(sibling, rows, cols, true);
        u.tensors.insert(u.tensors.end(), more.begin(), more.end());
        names.push_back(sibling);
    }
    c.nvfp4_groups += static_cast<std::int64_t>(names.size());
    const std::uint64_t seed = c.seed;
    const float in_scale = input_scale_for(seed, module);
    u.produce = [seed, names, rows, cols, in_scale](int, std::span<const std::span<std::byte>> out) {
        std::vector<std::vector<float>> w;
        float amax = 0.0f;
        for (const auto &n : names) {
            w.push_back(draw_matrix(seed, n + ".weight", rows * cols, {}));
            for (float x : w.back()) amax = std::max(amax, std::fabs(x));
        }
        for (std::size_t k = 0; k < names.size(); ++k) {
            auto m = nvfp4::quantize(std::span<const float>(w[k]), rows, cols, amax);
            if (!m.ok()) fail(m.get_status().code(), "{}: {}", names[k], m.get_status().message());
            store_nvfp4(m.value(), in_scale, out.subspan(4 * k, 4));
        }
    };
    c.units.push_back(std::move(u));
}

void add_norm(plan_context &c, const std::string &name, std::int64_t n) {
    add_random(c, name, dtype::bf16, {n}, {1.0f, 0.02f});
}

struct model_shape {
    model_preset p; // after overrides
    std::int64_t layers = 0;
    std::int64_t vocab = 0;
};

void plan_attention(plan_context &c, const model_preset &p, const std::string &a) {
    const std::int64_t H = p.hidden_size;
    if (!p.mla()) {
        const std::int64_t q = p.num_heads * p.head_dim, kv = p.num_kv_heads * p.head_dim;
        for (auto [proj, rows] : {std::pair{"q_proj", q}, std::pair{"k_proj", kv}, std::pair{"v_proj", kv}}) {
            add_linear(c, a + proj, rows, H);
            if (p.attention_bias) add_random(c, a + proj + ".bias", dtype::bf16, {rows}, {});
        }
        add_linear(c, a + "o_proj", H, q);
        if (p.use_qk_norm) {
            add_norm(c, a + "q_norm.weight", p.head_dim);
            add_norm(c, a + "k_norm.weight", p.head_dim);
        }
        return;
    }
    const std::int64_t qk = p.qk_nope_head_dim + p.qk_rope_head_dim;
    add_linear(c, a + "q_a_proj", p.q_lora_rank, H);
    add_norm(c, a + "q_a_layernorm.weight", p.q_lora_rank);
    add_linear(c, a + "q_b_proj", p.num_heads * qk, p.q_lora_rank);
    add_linear(c, a + "kv_a_proj_with_mqa", p.kv_lora_rank + p.qk_rope_head_dim, H);
    add_norm(c, a + "kv_a_layernorm.weight", p.kv_lora_rank);
    add_linear(c, a + "kv_b_proj", p.num_heads * (p.qk_nope_head_dim + p.v_head_dim), p.kv_lora_rank);
    add_linear(c, a + "o_proj", H, p.num_heads * p.v_head_dim);
    if (p.index_n_heads > 0) {
        add_linear(c, a + "indexer.wq_b", p.index_n_heads * p.index_head_dim, p.q_lora_rank);
        add_linear(c, a + "indexer.wk", p.index_head_dim, H);
        add_norm(c, a + "indexer.k_norm.weight", p.index_head_dim);
        add_random(c, a + "indexer.k_norm.bias", dtype::bf16, {p.index_head_dim}, {});
        add_linear(c, a + "indexer.weights_proj", p.index_n_heads, H);
    }
}

void plan_mlp(plan_context &c, const std::string &m, std::int64_t width, std::int64_t hidden) {
    add_linear(c, m + "gate_proj", width, hidden, m + "up_proj");
    add_linear(c, m + "down_proj", hidden, width);
}

void plan_model(plan_context &c, const model_shape &s) {
    const model_preset &p = s.p;
    const std::int64_t H = p.hidden_size;
    add_random(c, "model.embed_tokens.weight", dtype::bf16, {s.vocab, H}, {});
    for (std::int64_t i = 0; i < s.layers; ++i) {
        const std::string l = fmt::format("model.layers.{}.", i);
        add_norm(c, l + "input_layernorm.weight", H);
        plan_attention(c, p, l + "self_attn.");
        add_norm(c, l + "post_attention_layernorm.weight", H);
        const bool moe = p.arch == model_arch::qwen3_moe || i >= p.first_k_dense_replace;
        if (!moe) {
            plan_mlp(c, l + "mlp.", p.intermediate_size, H);
            continue;
        }
        add_linear(c, l + "mlp.gate", p.num_experts, H);
        if (p.arch != model_arch::qwen3_moe)
            add_random(c, l + "mlp.gate.e_score_correction_bias", dtype::f32, {p.num_experts}, {0.0f, 0.01f});
        for (std::int64_t e = 0; e < p.num_experts; ++e)
            plan_mlp(c, fmt::format("{}mlp.experts.{}.", l, e), p.moe_intermediate_size, H);
        if (p.n_shared_experts > 0)
            plan_mlp(c, l + "mlp.shared_experts.", p.moe_intermediate_size * p.n_shared_experts, H);
    }
    add_norm(c, "model.norm.weight", H);
    add_linear(c, "lm_head", s.vocab, H);
}

// ---- config files ------------------------------------------------------------------------------------

ojson token_ids(const generated_tokenizer &t, const std::vector<std::string> &names) {
    if (names.size() == 1) return t.id_of(names[0]);
    ojson a = ojson::array();
    for (const auto &n : names) a.push_back(t.id_of(n));
    return a;
}

ojson make_config(const model_shape &s, const generated_tokenizer &tok, const ojson *quantization) {
    const model_preset &p = s.p;
    ojson j;
    j["architectures"] = {model_arch_name(p.arch)};
    const bool qwen = p.arch == model_arch::qwen3_moe;
    switch (p.arch) {
    case model_arch::glm4_moe:
        j["model_type"] = "glm4_moe";
        break;
    case model_arch::qwen3_moe:
        j["model_type"] = "qwen3_moe";
        break;
    case model_arch::deepseek_v3:
        j["model_type"] = "deepseek_v3";
        break;
    case model_arch::glm_moe_dsa:
        j["model_type"] = "glm_moe_dsa";
        break;
    }
    j["vocab_size"] = s.vocab;
    j["hidden_size"] = p.hidden_size;
    j["intermediate_size"] = p.intermediate_size;
    j["moe_intermediate_size"] = p.moe_intermediate_size;
    j["num_hidden_layers"] = s.layers;
    j["num_attention_heads"] = p.num_heads;
    j["num_key_value_heads"] = p.num_kv_heads;
    if (p.arch != model_arch::deepseek_v3) j["head_dim"] = p.head_dim;
    if (qwen) {
        j["num_experts"] = p.num_experts;
        j["num_experts_per_tok"] = p.top_k;
        j["decoder_sparse_step"] = 1;
        j["mlp_only_layers"] = ojson::array();
        j["norm_topk_prob"] = true;
        j["output_router_logits"] = false;
        j["router_aux_loss_coef"] = 0.001;
    } else {
        j["n_routed_experts"] = p.num_experts;
        j["n_shared_experts"] = p.n_shared_experts;
        j["num_experts_per_tok"] = p.top_k;
        j["first_k_dense_replace"] = p.first_k_dense_replace;
        j["moe_layer_freq"] = 1;
        j["n_group"] = p.n_group;
        j["topk_group"] = p.topk_group;
        j["topk_method"] = "noaux_tc";
        j["scoring_func"] = "sigmoid";
        j["norm_topk_prob"] = true;
        j["routed_scaling_factor"] = p.routed_scaling_factor;
        // The real models have one MTP layer; make-model writes none, so it declares none.
        j["num_nextn_predict_layers"] = 0;
    }
    if (p.mla()) {
        j["q_lora_rank"] = p.q_lora_rank;
        j["kv_lora_rank"] = p.kv_lora_rank;
        j["qk_nope_head_dim"] = p.qk_nope_head_dim;
        j["qk_rope_head_dim"] = p.qk_rope_head_dim;
        if (p.arch == model_arch::glm_moe_dsa) j["qk_head_dim"] = p.qk_nope_head_dim + p.qk_rope_head_dim;
        j["v_head_dim"] = p.v_head_dim;
    }
    if (p.index_n_heads > 0) {
        j["index_topk"] = p.index_topk;
        j["index_head_dim"] = p.index_head_dim;
        j["index_n_heads"] = p.index_n_heads;
        j["rope_interleave"] = true;
        j["indexer_rope_interleave"] = true;
    }
    if (p.arch == model_arch::glm_moe_dsa) {
        j["rope_parameters"] = {{"rope_theta", p.rope_theta}, {"rope_type", "default"}};
    } else {
        if (p.arch == model_arch::glm4_moe) j["partial_rotary_factor"] = p.partial_rotary_factor;
        j["rope_theta"] = p.rope_theta;
        if (p.yarn)
            j["rope_scaling"] = {{"beta_fast", 32}, {"beta_slow", 1},        {"factor", 40},
                                 {"mscale", 1.0},   {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 4096},
                                 {"type", "yarn"}};
        else
            j["rope_scaling"] = nullptr;
    }
    j["max_position_embeddings"] = p.max_position_embeddings;
    j["attention_bias"] = p.attention_bias;
    j["attention_dropout"] = 0.0;
    if (p.arch == model_arch::glm4_moe) j["use_qk_norm"] = p.use_qk_norm;
    j["hidden_act"] = "silu";
    j["rms_norm_eps"] = p.rms_norm_eps;
    j["initializer_range"] = 0.02;
    j["tie_word_embeddings"] = false;
    if (!tok.bos.empty()) j["bos_token_id"] = tok.id_of(tok.bos);
    j["eos_token_id"] = token_ids(tok, tok.stop.size() > 1 && !qwen ? tok.stop : std::vector{tok.eos});
    j["pad_token_id"] = tok.id_of(tok.pad);
    j["torch_dtype"] = "bfloat16";
    j["use_cache"] = true;
    j["transformers_version"] = p.arch == model_arch::glm_moe_dsa ? "5.0.2.dev0" : "4.57.1";
    if (quantization) j["quantization_config"] = *quantization;
    return j;
}

ojson generation_config(const model_shape &s, const generated_tokenizer &tok) {
    ojson j;
    if (!tok.bos.empty()) j["bos_token_id"] = tok.id_of(tok.bos);
    j["eos_token_id"] = token_ids(tok, tok.stop);
    j["pad_token_id"] = tok.id_of(tok.pad);
    j["do_sample"] = true;
    const bool qwen = s.p.arch == model_arch::qwen3_moe;
    j["temperature"] = qwen ? 0.6 : (s.p.tokenizer == tokenizer_family::glm ? 1.0 : 0.6);
    j["top_p"] = 0.95;
    if (qwen) j["top_k"] = 20;
    j["transformers_version"] = "4.57.1";
    return j;
}

void write_text(const fs::path &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) fail(status_code::io_error, "{}: cannot create", path.string());
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) fail(status_code::io_error, "{}: write failed", path.string());
}

std::string human_gb(std::uint64_t b) {
    return fmt::format("{:.2f} GB", static_cast<double>(b) / 1e9);
}

} // namespace

// ---- NVFP4 tensors -----------------------------------------------------------------------------------

std::vector<tensor_spec> nvfp4_tensor_specs(const std::string &prefix, std::int64_t rows, std::int64_t cols,
                                            bool input_scale) {
    std::vector<tensor_spec> t = {{prefix + ".weight", dtype::u8, {rows, cols / 2}},
                                  {prefix + ".weight_scale", dtype::f8_e4m3, {rows, cols / nvfp4::kBlock}},
                                  {prefix + ".weight_scale_2", dtype::f32, {}}};
    if (input_scale) t.push_back({prefix + ".input_scale", dtype::f32, {}});
    return t;
}

void store_nvfp4(const nvfp4::matrix &m, float input_scale, std::span<const std::span<std::byte>> out) {
    FP4MOE_ASSERT(out.size() >= 3 && out[0].size() == m.packed.size() && out[1].size() == m.scales.size());
    std::memcpy(out[0].data(), m.packed.data(), m.packed.size());
    std::memcpy(out[1].data(), m.scales.data(), m.scales.size());
    std::memcpy(out[2].data(), &m.global_scale, 4);
    if (out.size() > 3) std::memcpy(out[3].data(), &input_scale, 4);
}

std::uint64_t tensor_spec::nbytes() const {
    std::uint64_t n = dtype_size(type);
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
}

std::uint64_t parse_byte_size(const std::string &s) {
    std::size_t pos = 0;
    double v = 0;
    try {
        v = std::stod(s, &pos);
    } catch (const std::exception &) {
        return 0;
    }
    std::string unit = s.substr(pos);
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
    double mul = 0;
    if (unit.empty() || unit == "B")
        mul = 1;
    else if (unit == "KB" || unit == "K")
        mul = 1e3;
    else if (unit == "MB" || unit == "M")
        mul = 1e6;
    else if (unit == "GB" || unit == "G")
        mul = 1e9;
    else if (unit == "KIB")
        mul = 1024.0;
    else if (unit == "MIB")
        mul = 1024.0 * 1024;
    else if (unit == "GIB")
        mul = 1024.0 * 1024 * 1024;
    if (mul == 0 || !(v > 0)) return 0;
    return static_cast<std::uint64_t>(v * mul);
}

// ---- output directory and the sharded writer ---------------------------------------------------------

status prepare_output_dir(const std::string &dir, bool force) {
    return catch_status([&] {
        std::error_code ec;
        if (fs::exists(dir, ec)) {
            if (!fs::is_directory(dir, ec))
                fail(status_code::invalid_argument, "{}: exists and is not a directory", dir);
            if (!fs::is_empty(dir, ec) && !force)
                fail(status_code::invalid_argument, "{}: directory is not empty (pass --force to write into it)", dir);
            for (const auto &e : fs::directory_iterator(dir)) {
                const std::string n = e.path().filename().string();
                if (n.starts_with("model") && n.find(".safetensors") != std::string::npos) fs::remove(e.path());
            }
        }
        fs::create_directories(dir, ec);
        if (ec) fail(status_code::io_error, "{}: cannot create directory: {}", dir, ec.message());
    });
}

namespace {

// A progress line on stderr, redrawn at most 5 times a second, only when stderr is a terminal.
class progress_line {
public:
    progress_line(bool on, std::string label, std::uint64_t total)
        : on_(on && ::isatty(2)), label_(std::move(label)), total_(total), start_(clock::now()) {}
    void add(std::uint64_t bytes, std::int64_t tensors, int shard, int shards) {
        done_ += bytes;
        tensors_ += tensors;
        if (!on_) return;
        std::unique_lock lock(m_, std::try_to_lock);
        if (!lock) return;
        const auto now = clock::now();
        if (now - last_ < std::chrono::milliseconds(200) && done_ < total_) return;
        last_ = now;
        const double s = std::chrono::duration<double>(now - start_).count();
        fmt::print(stderr, "\r{}: shard {}/{}, {} tensors, {} / {} ({:.0f}%), {:.1f} s   ", label_, shard, shards,
                   tensors_.load(), human_gb(done_), human_gb(total_),
                   100.0 * done_ / std::max<std::uint64_t>(total_, 1), s);
    }
    void finish() {
        if (on_) fmt::print(stderr, "\n");
    }

private:
    using clock = std::chrono::steady_clock;
    bool on_;
    std::string label_;
    std::uint64_t total_;
    std::atomic<std::uint64_t> done_{0};
    std::atomic<std::int64_t> tensors_{0};
    clock::time_point start_, last_{};
    std::mutex m_;
};

} // namespace

result<checkpoint_write_report> write_sharded_checkpoint(const std::string &dir, std::span<const write_unit> units,
                                                         const sharded_write_options &opts) {
    checkpoint_write_report rep;
    const status st = catch_status([&] {
        // Shards: consecutive units, a new shard when the next unit would pass the limit.
        std::vector<std::uint64_t> unit_bytes(units.size());
        std::vector<std::pair<std::size_t, std::size_t>> shards; // [first, last) units
        std::uint64_t cur = 0, total = 0;
        for (std::size_t i = 0; i < units.size(); ++i) {
            for (const auto &t : units[i].tensors) unit_bytes[i] += t.nbytes();
            total += unit_bytes[i];
            if (shards.empty() || (cur > 0 && cur + unit_bytes[i] > opts.shard_size)) {
                shards.push_back({i, i});
                cur = 0;
            }
            shards.back().second = i + 1;
            cur += unit_bytes[i];
        }
        if (shards.empty()) fail(status_code::invalid_argument, "{}: nothing to write", dir);
        const int n_shards = static_cast<int>(shards.size());
        const int threads = opts.threads > 0 ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
        progress_line progress(opts.progress, opts.label, total);

        nlohmann::json weight_map = nlohmann::json::object();
        for (int s = 0; s < n_shards; ++s) {
            const auto [first, last] = shards[static_cast<std::size_t>(s)];
            const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
            // One buffer for the shard; every tensor gets its slice.
            std::uint64_t bytes = 0;
            for (std::size_t u = first; u < last; ++u) bytes += unit_bytes[u];
            std::vector<std::byte> buf(bytes);
            std::vector<std::vector<std::span<std::byte>>> spans(last - first);
            std::vector<tensor_to_write> tensors;
            std::uint64_t off = 0;
            std::vector<std::pair<std::size_t, int>> jobs;
            for (std::size_t u = first; u < last; ++u) {
                for (const auto &t : units[u].tensors) {
                    std::span<std::byte> sp(buf.data() + off, t.nbytes());
                    spans[u - first].push_back(sp);
                    tensors.push_back({t.name, t.type, t.shape, sp});
                    weight_map[t.name] = file;
                    off += t.nbytes();
                }
                for (int c = 0; c < units[u].chunks; ++c) jobs.emplace_back(u, c);
            }
            // Dynamic scheduling over (unit, chunk) jobs; results do not depend on which thread runs what.
            std::atomic<std::size_t> next{0};
            std::mutex err_m;
            status first_err;
            auto worker = [&] {
                for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
                    const auto [u, c] = jobs[j];
                    status e = catch_status([&] { units[u].produce(c, spans[u - first]); });
                    if (!e.ok()) {
                        std::lock_guard g(err_m);
                        if (first_err.ok()) first_err = e;
                        next = jobs.size();
                        return;
                    }
                    const auto &unit = units[u];
                    progress.add(unit_bytes[u] / static_cast<std::uint64_t>(unit.chunks),
                                 c == 0 ? static_cast<std::int64_t>(unit.tensors.size()) : 0, s + 1, n_shards);
                }
            };
            std::vector<std::thread> pool;
            for (int t = 1; t < std::min<int>(threads, static_cast<int>(jobs.size())); ++t) pool.emplace_back(worker);
            worker();
            for (auto &t : pool) t.join();
            if (!first_err.ok()) throw error(first_err.code(), first_err.message());
            const status w = write_safetensors((fs::path(dir) / file).string(), tensors, {{"format", "pt"}});
            if (!w.ok()) throw error(w.code(), w.message());
            rep.tensors += static_cast<std::int64_t>(tensors.size());
        }
        progress.finish();
        rep.shards = n_shards;
        rep.tensor_bytes = total;
        nlohmann::ordered_json index;
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = weight_map; // sorted by name, as transformers writes it
        write_text(fs::path(dir) / "model.safetensors.index.json", index.dump(2) + "\n");
    });
    if (!st.ok()) return st;
    return rep;
}

// ---- make_model --------------------------------------------------------------------------------------

result<checkpoint_write_report> make_model(const make_model_options &o) {
    const model_preset *preset = find_model_preset(o.preset);
    if (!preset)
        return status{status_code::invalid_argument,
                      fmt::format("unknown preset '{}'; presets: {}", o.preset, model_preset_names())};
    checkpoint_write_report rep;
    const status st = catch_status([&] {
        model_shape s{*preset, o.layers > 0 ? o.layers : preset->default_layers, 0};
        model_preset &p = s.p;
        if (o.layers < 0) fail(status_code::invalid_argument, "--layers must be positive, got {}", o.layers);
        if (o.experts < 0) fail(status_code::invalid_argument, "--experts must be positive, got {}", o.experts);
        if (o.shard_size == 0) fail(status_code::invalid_argument, "--shard-size must be positive");
        std::vector<std::string> notes;
        if (p.arch != model_arch::qwen3_moe && p.first_k_dense_replace > s.layers - 1) {
            const std::int64_t k = std::max<std::int64_t>(0, s.layers - 1);
            notes.push_back(fmt::format("first_k_dense_replace {} -> {} (with {} layers, so that one is MoE)",
                                        p.first_k_dense_replace, k, s.layers));
            p.first_k_dense_replace = k;
        }
        if (o.experts > 0) p.num_experts = o.experts;
        if (p.top_k > p.num_experts) {
            notes.push_back(fmt::format("num_experts_per_tok {} -> {}", p.top_k, p.num_experts));
            p.top_k = p.num_experts;
        }
        if (p.n_group > 1 && (p.num_experts % p.n_group || p.num_experts / p.n_group < 2 ||
                              p.top_k > p.topk_group * (p.num_experts / p.n_group))) {
            notes.push_back(
                fmt::format("n_group/topk_group {}/{} -> 1/1 ({} experts)", p.n_group, p.topk_group, p.num_experts));
            p.n_group = p.topk_group = 1;
        }
        const generated_tokenizer tok = generate_tokenizer(p.tokenizer, p.max_position_embeddings);
        s.vocab = p.vocab_size > 0 ? p.vocab_size : (tok.size + 63) / 64 * 64;
        if (s.vocab < tok.size)
            fail(status_code::internal, "preset vocab_size {} is below the tokenizer's {}", s.vocab, tok.size);

        plan_context c;
        c.seed = o.seed;
        c.nvfp4 = o.nvfp4;
        ojson hf_quant, quantization;
        if (o.nvfp4) {
            // As nvidia/GLM-4.7-NVFP4: attention, router and lm_head bf16; experts, shared experts and dense MLP
            // NVFP4 (sorted, as ModelOpt's summary is).
            c.quant.quant_algo = "NVFP4";
            c.quant.exclude = {"lm_head", "model.layers.*.mlp.gate", "model.layers.*.self_attn*"};
            const ojson producer = {{"name", "modelopt"}, {"version", "0.37.0+fp4moe.synthetic"}};
            hf_quant = {{"producer", producer},
                        {"quantization",
                         {{"quant_algo", "NVFP4"},
                          {"kv_cache_quant_algo", nullptr},
                          {"group_size", 16},
                          {"exclude_modules", c.quant.exclude}}}};
            const ojson fp4 = {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", 16}};
            quantization = {{"config_groups",
                             {{"group_0", {{"input_activations", fp4}, {"weights", fp4}, {"targets", {"Linear"}}}}}},
                            {"ignore", c.quant.exclude},
                            {"quant_algo", "NVFP4"},
                            {"producer", producer},
                            {"quant_method", "modelopt"}};
        }
        plan_model(c, s);

        if (auto ps = prepare_output_dir(o.out, o.force); !ps.ok()) throw error(ps.code(), ps.message());
        const fs::path dir(o.out);
        write_text(dir / "config.json", make_config(s, tok, o.nvfp4 ? &quantization : nullptr).dump(2) + "\n");
        if (o.nvfp4) write_text(dir / "hf_quant_config.json", hf_quant.dump(2) + "\n");
        write_text(dir / "generation_config.json", generation_config(s, tok).dump(2) + "\n");
        write_text(dir / "tokenizer.json", tok.tokenizer_json);
        write_text(dir / "tokenizer_config.json", tok.tokenizer_config_json);

        sharded_write_options w;
        w.shard_size = o.shard_size;
        w.threads = o.threads;
        w.progress = o.progress;
        w.label = "make-model " + p.name;
        auto wr = write_sharded_checkpoint(o.out, c.units, w);
        if (!wr.ok()) throw error(wr.get_status().code(), wr.get_status().message());
        rep = wr.value();
        rep.nvfp4_groups = c.nvfp4_groups;
        rep.notes = std::move(notes);

        // Self-check: what the engine's loaders will do first.
        auto cfg = load_model_config(o.out);
        if (!cfg.ok()) fail(status_code::internal, "written config does not load: {}", cfg.get_status().message());
        auto ck = checkpoint::open(o.out);
        if (!ck.ok()) fail(status_code::internal, "written checkpoint does not open: {}", ck.get_status().message());
        const auto sum = summarize_checkpoint(ck.value());
        if (!sum.problems.empty())
            fail(status_code::internal, "written checkpoint has an inconsistent NVFP4 group: {}: {}",
                 sum.problems[0].prefix, sum.problems[0].problem);
        if (static_cast<std::int64_t>(sum.nvfp4.size()) != c.nvfp4_groups)
            fail(status_code::internal, "wrote {} NVFP4 groups but the checkpoint shows {}", c.nvfp4_groups,
                 sum.nvfp4.size());
    });
    if (!st.ok()) return st;
    return rep;
}

} // namespace fp4moe
