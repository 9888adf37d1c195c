// Checkpoint -> model_weights for the GQA MoE families (Glm4MoeForCausalLM, Qwen3MoeForCausalLM).
// Tensor names: reference/models.md section 6.
#include "model/weights.h"

#include "core/error.h"
#include "core/log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <set>

namespace fp4moe {
namespace {

std::string shape_str(const std::vector<std::int64_t> &s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
}

class loader {
public:
    loader(const checkpoint &ck, const model_config &cfg) : ck_(ck), cfg_(cfg) {}

    const tensor_info &expect(const std::string &name, std::initializer_list<dtype> types,
                              const std::vector<std::int64_t> &shape) {
        const auto e = ck_.find(name);
        if (!e.info)
            fail(status_code::not_found, "{}: tensor '{}' is missing (expected {} {})", ck_.path(), name,
                 dtype_name(*types.begin()), shape_str(shape));
        bool type_ok = false;
        for (auto t : types) type_ok |= e.info->type == t;
        if (!type_ok)
            fail(status_code::invalid_argument, "{}: tensor '{}' is {}, expected {}", ck_.path(), name,
                 dtype_name(e.info->type), dtype_name(*types.begin()));
        // A 0-dim scalar and a [1] tensor are interchangeable for scale scalars.
        const bool scalar_ok = shape.empty() && e.info->numel() == 1 && e.info->shape.size() <= 1;
        if (e.info->shape != shape && !scalar_ok)
            fail(status_code::invalid_argument, "{}: tensor '{}' has shape {}, expected {}", ck_.path(), name,
                 shape_str(e.info->shape), shape_str(shape));
        used_.insert(name);
        return *e.info;
    }

    bool has(const std::string &name) const { return ck_.find(name).info != nullptr; }

    const std::byte *data(const std::string &name) const { return ck_.find(name).data().data(); }

    // A small float tensor (bf16, f16 is not used by these families, f32) as fp32.
    std::vector<float> floats(const std::string &name, const std::vector<std::int64_t> &shape) {
        const auto &t = expect(name, {dtype::bf16, dtype::f32}, shape);
        std::vector<float> out(t.numel());
        const std::byte *p = data(name);
        if (t.type == dtype::f32)
            std::memcpy(out.data(), p, out.size() * 4);
        else
            for (std::size_t i = 0; i < out.size(); ++i) {
                bf16_t b;
                std::memcpy(&b.bits, p + 2 * i, 2);
                out[i] = bf16_to_float(b);
            }
        return out;
    }

    // A Linear `<module>` [out, in]: NVFP4 group or bf16, whichever the checkpoint holds, checked against the
    // quantization config.
    cpu::linear_view linear(const std::string &module, std::int64_t out, std::int64_t in) {
        cpu::linear_view l;
        l.out = out;
        l.in = in;
        const bool want_nvfp4 = cfg_.quant.module_is_nvfp4(module);
        const bool is_nvfp4 = has(module + ".weight_scale");
        if (want_nvfp4 != is_nvfp4)
            fail(status_code::invalid_argument, "{}: '{}' is {} in the checkpoint but {} says it should be {}",
                 ck_.path(), module, is_nvfp4 ? "NVFP4" : "unquantized",
                 cfg_.quant.source.empty() ? "config.json" : cfg_.quant.source,
                 want_nvfp4 ? "NVFP4" : "unquantized (excluded)");
        if (is_nvfp4) {
            if (in % nvfp4::kBlock)
                fail(status_code::invalid_argument, "{}: '{}' has K = {}, not a multiple of 16", ck_.path(), module,
                     in);
            expect(module + ".weight", {dtype::u8}, {out, in / 2});
            expect(module + ".weight_scale", {dtype::f8_e4m3}, {out, in / nvfp4::kBlock});
            expect(module + ".weight_scale_2", {dtype::f32}, {});
            if (has(module + ".input_scale")) expect(module + ".input_scale", {dtype::f32}, {}); // unused (W4A16)
            l.format = moe_weight_format::nvfp4;
            l.w.nvfp4.rows = out;
            l.w.nvfp4.cols = in;
            l.w.nvfp4.packed = reinterpret_cast<const std::uint8_t *>(data(module + ".weight"));
            l.w.nvfp4.scales = reinterpret_cast<const std::uint8_t *>(data(module + ".weight_scale"));
            std::memcpy(&l.w.nvfp4.global_scale, data(module + ".weight_scale_2"), 4);
            if (!(l.w.nvfp4.global_scale > 0.0f) || !std::isfinite(l.w.nvfp4.global_scale))
                fail(status_code::invalid_argument, "{}: '{}.weight_scale_2' is {}, expected a positive finite scale",
                     ck_.path(), module, l.w.nvfp4.global_scale);
        } else {
            expect(module + ".weight", {dtype::bf16}, {out, in});
            l.format = moe_weight_format::bf16;
            l.w.bf16 = reinterpret_cast<const bf16_t *>(data(module + ".weight"));
        }
        return l;
    }

    // gate/up/down of one SwiGLU MLP `<prefix>` of width `inter` into slot `e` of `set`.
    moe_weight_format mlp(const std::string &prefix, std::int64_t inter, expert_set &set, std::size_t e) {
        const auto h = cfg_.hidden_size;
        const auto g = linear(prefix + ".gate_proj", inter, h);
        const auto u = linear(prefix + ".up_proj", inter, h);
        const auto d = linear(prefix + ".down_proj", h, inter);
        if (g.format != u.format || g.format != d.format)
            fail(status_code::unsupported, "{}: '{}' mixes NVFP4 and unquantized projections", ck_.path(), prefix);
        set.gate[e] = g.w;
        set.up[e] = u.w;
        set.down[e] = d.w;
        return g.format;
    }

    std::int64_t unused() const {
        std::int64_t n = 0;
        for (const auto &e : ck_.tensors()) n += !used_.contains(e.info->name);
        return n;
    }

private:
    const checkpoint &ck_;
    const model_config &cfg_;
    std::set<std::string> used_;
};

void load_attention(loader &ld, const model_config &c, const std::string &p, attention_weights &a) {
    const auto h = c.hidden_size, hd = c.head_dim;
    a.q = ld.linear(p + "q_proj", c.num_heads * hd, h);
    a.k = ld.linear(p + "k_proj", c.num_kv_heads * hd, h);
    a.v = ld.linear(p + "v_proj", c.num_kv_heads * hd, h);
    a.o = ld.linear(p + "o_proj", h, c.num_heads * hd);
    if (c.attention_bias) {
        a.q_bias = ld.floats(p + "q_proj.bias", {c.num_heads * hd});
        a.k_bias = ld.floats(p + "k_proj.bias", {c.num_kv_heads * hd});
        a.v_bias = ld.floats(p + "v_proj.bias", {c.num_kv_heads * hd});
        a.q.bias = a.q_bias.data();
        a.k.bias = a.k_bias.data();
        a.v.bias = a.v_bias.data();
    }
    if (c.qk_norm) {
        a.q_norm = ld.floats(p + "q_norm.weight", {hd});
        a.k_norm = ld.floats(p + "k_norm.weight", {hd});
    }
}

void load_moe(loader &ld, const model_config &c, const std::string &p, layer_weights &lw) {
    const auto h = c.hidden_size, e_count = c.num_experts, inter = c.moe_intermediate_size;
    expert_set routed;
    routed.gate.resize(e_count);
    routed.up.resize(e_count);
    routed.down.resize(e_count);
    routed.router = ld.floats(p + "gate.weight", {e_count, h});
    if (c.routing.correction_bias) routed.correction_bias = ld.floats(p + "gate.e_score_correction_bias", {e_count});
    moe_weight_format fmt = moe_weight_format::bf16;
    for (std::int64_t e = 0; e < e_count; ++e) {
        const auto f = ld.mlp(fmt::format("{}experts.{}", p, e), inter, routed, e);
        if (e > 0 && f != fmt)
            fail(status_code::unsupported, "layer {}: experts mix NVFP4 and unquantized weights ('{}experts.{}')", p, p,
                 e);
        fmt = f;
    }
    if (c.n_shared_experts > 0) {
        // The shared MLP has width S*I; as slots it is S experts of width I, whose rows of gate/up and columns
        // of down are consecutive slices. Only S = 1 is sliced in place here (every supported family).
        expert_set shared;
        shared.gate.resize(1);
        shared.up.resize(1);
        shared.down.resize(1);
        if (c.n_shared_experts != 1)
            fail(status_code::unsupported, "n_shared_experts = {} is not supported yet (1 is)", c.n_shared_experts);
        const auto sf = ld.mlp(p + "shared_experts", inter, shared, 0);
        if (sf == fmt) {
            routed.gate.push_back(shared.gate[0]);
            routed.up.push_back(shared.up[0]);
            routed.down.push_back(shared.down[0]);
            routed.desc = c.moe(fmt, true);
        } else {
            routed.desc = c.moe(fmt, false);
            shared.desc = c.moe(sf, false);
            shared.desc.experts = 1;
            shared.desc.top_k = 1;
            shared.desc.routing = {};
            lw.shared = std::make_unique<expert_set>(std::move(shared));
        }
    } else {
        routed.desc = c.moe(fmt, false);
    }
    lw.mlp = std::move(routed);
}

void load_dense(loader &ld, const model_config &c, const std::string &p, layer_weights &lw) {
    expert_set d;
    d.gate.resize(1);
    d.up.resize(1);
    d.down.resize(1);
    const auto f = ld.mlp(p.substr(0, p.size() - 1), c.intermediate_size, d, 0);
    d.desc.hidden = c.hidden_size;
    d.desc.intermediate = c.intermediate_size;
    d.desc.experts = 1;
    d.desc.top_k = 1;
    d.desc.weights = f;
    lw.mlp = std::move(d);
}

} // namespace

moe_weights expert_set::view() const {
    moe_weights w;
    w.router = router.empty() ? nullptr : router.data();
    w.correction_bias = correction_bias.empty() ? nullptr : correction_bias.data();
    w.gate = gate;
    w.up = up;
    w.down = down;
    return w;
}

result<std::unique_ptr<model_weights>> load_model_weights(const std::string &dir) {
    auto cfg = load_model_config(dir);
    if (!cfg.ok()) return cfg.get_status();
    const model_config &c = cfg.value();
    if (model_arch_uses_mla(c.arch))
        return status{status_code::unsupported,
                      fmt::format("{}: {} uses multi-head latent attention (MLA), which fp4moe cannot run yet; "
                                  "`fp4moe inspect {}` shows the checkpoint",
                                  dir, model_arch_name(c.arch), dir)};
    auto ck = checkpoint::open(dir);
    if (!ck.ok()) return ck.get_status();
    auto m = std::make_unique<model_weights>();
    m->config = c;
    m->ckpt = std::move(ck.value());
    auto st = catch_status([&] {
        loader ld(m->ckpt, m->config);
        const auto h = c.hidden_size;
        ld.expect("model.embed_tokens.weight", {dtype::bf16}, {c.vocab_size, h});
        m->embed = reinterpret_cast<const bf16_t *>(ld.data("model.embed_tokens.weight"));
        m->final_norm = ld.floats("model.norm.weight", {h});
        if (c.tie_word_embeddings) {
            m->lm_head.out = c.vocab_size;
            m->lm_head.in = h;
            m->lm_head.w.bf16 = m->embed;
        } else {
            m->lm_head = ld.linear("lm_head", c.vocab_size, h);
        }
        m->layers.resize(c.num_layers);
        for (std::int64_t i = 0; i < c.num_layers; ++i) {
            auto &lw = m->layers[i];
            const std::string p = fmt::format("model.layers.{}.", i);
            lw.input_norm = ld.floats(p + "input_layernorm.weight", {h});
            lw.post_norm = ld.floats(p + "post_attention_layernorm.weight", {h});
            load_attention(ld, c, p + "self_attn.", lw.attn);
            lw.moe = c.is_moe_layer(i);
            if (lw.moe)
                load_moe(ld, c, p + "mlp.", lw);
            else
                load_dense(ld, c, p + "mlp.", lw);
            if (auto s = lw.mlp.desc.validate(); !s.ok())
                fail(status_code::invalid_argument, "{}: layer {}: {}", dir, i, s.message());
        }
        m->unused_tensors = ld.unused();
    });
    if (!st.ok()) return st;
    if (m->unused_tensors > 0)
        FP4MOE_LOG_INFO("{}: {} tensors not used by the model (e.g. MTP layers)", dir, m->unused_tensors);
    return m;
}

} // namespace fp4moe
