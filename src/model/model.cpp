// The CPU forward of the GQA MoE families. Numeric path: residual stream and every op in fp32, weights bf16
// or NVFP4 (dequantized exactly), MoE and dense MLP inputs rounded to bf16 (the runners take bf16
// activations, as the GPU path does), K/V stored in bf16.
#include "model/model.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fp4moe {

result<std::unique_ptr<model>> model::load(const std::string &dir, const model_options &opts, moe_selector select) {
    auto w = load_model_weights(dir);
    if (!w.ok()) return w.get_status();
    if (opts.max_batch_tokens <= 0)
        return status{status_code::invalid_argument, "model_options.max_batch_tokens must be positive"};
    return std::unique_ptr<model>(new model(std::move(w.value()), opts, std::move(select)));
}

model::model(std::unique_ptr<model_weights> w, const model_options &opts, moe_selector select)
    : w_(std::move(w)), opts_(opts), select_(std::move(select)), pool_(opts.threads) {
    const auto &c = w_->config;
    const auto n = opts_.max_batch_tokens, h = c.hidden_size;
    h_.resize(n * h);
    a_.resize(n * h);
    tmp_.resize(n * h);
    q_.resize(n * c.num_heads * c.head_dim);
    o_.resize(q_.size());
    k_.resize(n * c.num_kv_heads * c.head_dim);
    v_.resize(k_.size());
    xb_.resize(n * h);
    yb_.resize(n * h);
    pos_.resize(n);
    row_seq_.resize(n);
    final_hidden_.reserve(n * h);
    std::int64_t max_e = 1;
    for (auto &lw : w_->layers) {
        for (const expert_set *s : {&lw.mlp, lw.shared.get()}) {
            if (!s) continue;
            max_e = std::max(max_e, s->desc.experts);
            if (std::find(plan_descs_.begin(), plan_descs_.end(), s->desc) == plan_descs_.end()) {
                plan_descs_.push_back(s->desc);
                plans_.emplace_back(s->desc, n);
            }
        }
    }
    router_logits_.resize(n * max_e);
}

std::vector<std::pair<moe_desc, const expert_set *>> model::expert_shapes() const {
    std::vector<std::pair<moe_desc, const expert_set *>> out;
    for (const auto &lw : w_->layers)
        for (const expert_set *s : {&lw.mlp, static_cast<const expert_set *>(lw.shared.get())})
            if (s && std::none_of(out.begin(), out.end(), [&](const auto &p) { return p.first == s->desc; }))
                out.emplace_back(s->desc, s);
    return out;
}

status model::forward(std::span<const seq_step> batch, kv_cache &kv, std::vector<float> &logits) {
    const auto &c = w_->config;
    const std::int64_t h = c.hidden_size;
    std::int64_t rows = 0, out_rows = 0;
    for (std::size_t s = 0; s < batch.size(); ++s) {
        const auto &e = batch[s];
        const auto n = static_cast<std::int64_t>(e.tokens.size());
        if (n == 0)
            return {status_code::invalid_argument, fmt::format("sequence {} of the batch has no new tokens", s)};
        if (e.start + n > c.max_position_embeddings)
            return {status_code::invalid_argument,
                    fmt::format("sequence {}: position {} is past max_position_embeddings ({})", s, e.start + n - 1,
                                c.max_position_embeddings)};
        const std::int64_t need = (e.start + n + kv.block_size() - 1) / kv.block_size();
        if (static_cast<std::int64_t>(e.blocks.size()) < need)
            return {status_code::invalid_argument, fmt::format("sequence {}: {} KV blocks for {} positions (needs {})",
                                                               s, e.blocks.size(), e.start + n, need)};
        for (auto b : e.blocks.first(need))
            if (b < 0 || b >= kv.num_blocks())
                return {status_code::invalid_argument, fmt::format("sequence {}: KV block {} out of range", s, b)};
        for (auto t : e.tokens)
            if (t < 0 || t >= c.vocab_size)
                return {status_code::invalid_argument,
                        fmt::format("sequence {}: token id {} outside the vocabulary [0, {})", s, t, c.vocab_size)};
        if (rows + n > opts_.max_batch_tokens)
            return {status_code::invalid_argument,
                    fmt::format("batch has more than max_batch_tokens ({}) new tokens", opts_.max_batch_tokens)};
        for (std::int64_t i = 0; i < n; ++i) {
            pos_[rows + i] = e.start + i;
            row_seq_[rows + i] = static_cast<std::int32_t>(s);
            const bf16_t *src = w_->embed + static_cast<std::int64_t>(e.tokens[i]) * h;
            for (std::int64_t k = 0; k < h; ++k) h_[(rows + i) * h + k] = bf16_to_float(src[k]);
        }
        rows += n;
        out_rows += e.all_logits ? n : 1;
    }

    for (std::int64_t l = 0; l < c.num_layers; ++l) {
        const auto &lw = w_->layers[l];
        cpu::rmsnorm(h_.data(), lw.input_norm.data(), rows, h, c.rms_norm_eps, a_.data());
        attention(l, batch, kv);
        cpu::linear(pool_, lw.attn.o, o_.data(), rows, tmp_.data());
        for (std::int64_t i = 0; i < rows * h; ++i) h_[i] += tmp_[i];

        cpu::rmsnorm(h_.data(), lw.post_norm.data(), rows, h, c.rms_norm_eps, a_.data());
        run_experts(lw.mlp, rows, a_.data(), h_.data());
        if (lw.shared) run_experts(*lw.shared, rows, a_.data(), h_.data());
    }

    // Final norm and lm_head on the rows that want logits.
    final_hidden_.resize(out_rows * h);
    std::int64_t r = 0, o = 0;
    for (const auto &e : batch) {
        const auto n = static_cast<std::int64_t>(e.tokens.size());
        const std::int64_t first = e.all_logits ? 0 : n - 1;
        for (std::int64_t i = first; i < n; ++i, ++o)
            cpu::rmsnorm(h_.data() + (r + i) * h, w_->final_norm.data(), 1, h, c.rms_norm_eps,
                         final_hidden_.data() + o * h);
        r += n;
    }
    logits.resize(out_rows * c.vocab_size);
    cpu::linear(pool_, w_->lm_head, final_hidden_.data(), out_rows, logits.data());
    return status::success();
}

void model::attention(std::int64_t layer, std::span<const seq_step> batch, kv_cache &kv) {
    const auto &c = w_->config;
    const auto &a = w_->layers[layer].attn;
    std::int64_t n_rows = 0;
    for (const auto &e : batch) n_rows += static_cast<std::int64_t>(e.tokens.size());
    const std::int64_t hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
    cpu::linear(pool_, a.q, a_.data(), n_rows, q_.data());
    cpu::linear(pool_, a.k, a_.data(), n_rows, k_.data());
    cpu::linear(pool_, a.v, a_.data(), n_rows, v_.data());
    const auto rot = static_cast<std::int64_t>(static_cast<float>(hd) * c.partial_rotary_factor);
    for (std::int64_t t = 0; t < n_rows; ++t) {
        float *q = q_.data() + t * nh * hd;
        float *k = k_.data() + t * nkv * hd;
        if (c.qk_norm) {
            cpu::rmsnorm(q, a.q_norm.data(), nh, hd, c.rms_norm_eps, q);
            cpu::rmsnorm(k, a.k_norm.data(), nkv, hd, c.rms_norm_eps, k);
        }
        cpu::rope_neox(q, nh, hd, rot, pos_[t], c.rope_theta);
        cpu::rope_neox(k, nkv, hd, rot, pos_[t], c.rope_theta);
        const auto &e = batch[row_seq_[t]];
        const std::int64_t p = pos_[t];
        bf16_t *kd = kv.k(layer, e.blocks[p / kv.block_size()], p % kv.block_size());
        bf16_t *vd = kv.v(layer, e.blocks[p / kv.block_size()], p % kv.block_size());
        for (std::int64_t i = 0; i < nkv * hd; ++i) {
            kd[i] = float_to_bf16(k[i]);
            vd[i] = float_to_bf16(v_[t * nkv * hd + i]);
        }
    }
    // Causal attention over the cache, parallel over (token, head).
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const std::int64_t group = nh / nkv;
    pool_.parallel_for(n_rows * nh, [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> scores, acc;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t t = job / nh, head = job % nh, kvh = head / group;
            const auto &e = batch[row_seq_[t]];
            const std::int64_t ctx = pos_[t] + 1;
            const float *q = q_.data() + (t * nh + head) * hd;
            scores.resize(ctx);
            float mx = -INFINITY;
            for (std::int64_t j = 0; j < ctx; ++j) {
                const bf16_t *kj = kv.k(layer, e.blocks[j / kv.block_size()], j % kv.block_size()) + kvh * hd;
                float s = 0.0f;
                for (std::int64_t d = 0; d < hd; ++d) s += q[d] * bf16_to_float(kj[d]);
                scores[j] = s * scale;
                mx = std::max(mx, scores[j]);
            }
            float sum = 0.0f;
            for (auto &s : scores) sum += (s = std::exp(s - mx));
            acc.assign(hd, 0.0f);
            for (std::int64_t j = 0; j < ctx; ++j) {
                const bf16_t *vj = kv.v(layer, e.blocks[j / kv.block_size()], j % kv.block_size()) + kvh * hd;
                const float p = scores[j] / sum;
                for (std::int64_t d = 0; d < hd; ++d) acc[d] += p * bf16_to_float(vj[d]);
            }
            std::copy(acc.begin(), acc.end(), o_.data() + (t * nh + head) * hd);
        }
    });
}

void model::run_experts(const expert_set &set, std::int64_t rows, const float *x, float *out_add) {
    const auto &d = set.desc;
    const std::int64_t h = d.hidden;
    for (std::int64_t i = 0; i < rows * h; ++i) xb_[i] = float_to_bf16(x[i]);
    const auto it = std::find(plan_descs_.begin(), plan_descs_.end(), d);
    FP4MOE_ASSERT(it != plan_descs_.end());
    moe_plan &plan = plans_[it - plan_descs_.begin()];
    if (set.router.empty()) {
        // A dense MLP (or a shared expert run apart): one expert, every token, weight 1.
        plan.tokens = rows;
        plan.topk_ids.assign(rows * d.slots(), 0);
        plan.topk_weights.assign(rows * d.slots(), 1.0f);
        moe_plan_from_ids(d, plan);
    } else {
        // Router logits in fp32 on the bf16-rounded input, as the MoE runners see it.
        pool_.parallel_for(rows, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t t = b; t < e; ++t)
                for (std::int64_t j = 0; j < d.experts; ++j) {
                    float s = 0.0f;
                    for (std::int64_t k = 0; k < h; ++k) s += x[t * h + k] * set.router[j * h + k];
                    router_logits_[t * d.experts + j] = s;
                }
        });
        auto st = moe_route(d, std::span<const float>(router_logits_.data(), rows * d.experts),
                            set.correction_bias.empty() ? nullptr : set.correction_bias.data(), rows, plan);
        FP4MOE_ASSERT(st.ok()); // inputs were validated; a failure here is a bug
    }
    const moe_choice ch = select_(d, rows);
    FP4MOE_ASSERT(ch.runner != nullptr);
    const std::size_t ws = ch.runner->workspace_size(d, rows);
    if (workspace_.size() < ws) workspace_.resize(ws);
    const moe_weights mw = set.view();
    moe_args args;
    args.x = xb_.data();
    args.out = yb_.data();
    args.w = &mw;
    args.workspace = workspace_.data();
    args.workspace_bytes = workspace_.size();
    moe_device dev;
    dev.name = "cpu";
    dev.threads = pool_.size();
    auto st = ch.runner->run(d, args, plan, ch.tactic, dev);
    FP4MOE_ASSERT(st.ok());
    for (std::int64_t i = 0; i < rows * h; ++i) out_add[i] += bf16_to_float(yb_[i]);
}

} // namespace fp4moe
