// cpu.ref: the MoE oracle every other runner is checked against.
// Numeric path: weights dequantized exactly (E2M1 x E4M3 is exact in fp32), dot products accumulated in
// fp32 or fp64, the fp32 global scale applied to each dot product, SiLU(gate) * up kept unrounded, router
// weights applied in the combine, accumulated per token in the same precision, rounded once to bf16.
#include "backend/cpu/runners.h"
#include "core/error.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <thread>

namespace fp4moe::cpu {
namespace {

// Dequantizes row `n` of `m` without the global scale (exact in float).
void dequant_row(const moe_matrix &m, moe_weight_format f, std::int64_t n, std::int64_t k, float *out) {
    if (f == moe_weight_format::bf16) {
        const bf16_t *row = m.bf16 + n * k;
        for (std::int64_t i = 0; i < k; ++i) out[i] = bf16_to_float(row[i]);
        return;
    }
    static const std::array<float, 16> kE2M1 = [] {
        std::array<float, 16> t{};
        for (int c = 0; c < 16; ++c) t[c] = nvfp4::e2m1_decode(static_cast<std::uint8_t>(c));
        return t;
    }();
    const std::uint8_t *q = m.nvfp4.packed + n * (k / 2);
    const std::uint8_t *s = m.nvfp4.scales + n * (k / nvfp4::kBlock);
    for (std::int64_t b = 0; b < k / nvfp4::kBlock; ++b) {
        const float scale = nvfp4::e4m3_decode(s[b]);
        for (int j = 0; j < nvfp4::kBlock / 2; ++j) {
            const std::uint8_t byte = q[b * 8 + j];
            out[b * 16 + 2 * j] = kE2M1[byte & 0xF] * scale;
            out[b * 16 + 2 * j + 1] = kE2M1[byte >> 4] * scale;
        }
    }
}

float global_scale(const moe_matrix &m, moe_weight_format f) {
    return f == moe_weight_format::nvfp4 ? m.nvfp4.global_scale : 1.0f;
}

template <typename Acc>
class ref_runner final : public moe_runner {
public:
    std::string_view name() const override { return "cpu.ref"; }
    bool supports(const moe_desc &d, const moe_device &dev) const override { return !dev.cuda && d.validate().ok(); }
    std::vector<moe_tactic> tactics(const moe_desc &) const override {
        return {{0, sizeof(Acc) == 8 ? "fp64 accumulate" : "fp32 accumulate"}};
    }

    // Layout: acc [T, H] | x row [H] | gate [I] | up [I] | act [I] | weight row [max(H, I)]
    std::size_t workspace_size(const moe_desc &d, std::int64_t max_tokens) const override {
        const auto h = d.hidden, i = d.intermediate;
        return sizeof(Acc) * max_tokens * h + sizeof(float) * (h + 3 * i + std::max(h, i));
    }

    status run(const moe_desc &d, const moe_args &a, const moe_plan &p, const moe_tactic &,
               const moe_device &) const override {
        if (a.workspace_bytes < workspace_size(d, p.tokens))
            return {status_code::invalid_argument, fmt::format("cpu.ref: workspace of {} bytes, needs {}",
                                                               a.workspace_bytes, workspace_size(d, p.tokens))};
        const std::int64_t h = d.hidden, inter = d.intermediate;
        auto *acc = static_cast<Acc *>(a.workspace);
        float *xrow = reinterpret_cast<float *>(acc + p.tokens * h);
        float *gate = xrow + h, *up = gate + inter, *act = up + inter, *wrow = act + inter;
        std::fill_n(acc, p.tokens * h, Acc(0));

        for (std::int64_t e = 0; e < p.num_experts; ++e) {
            const std::int32_t n_rows = p.counts[e];
            for (std::int32_t i = 0; i < n_rows; ++i) {
                const std::int32_t pair =
                    d.layout == moe_layout::permuted ? p.perm[p.offsets[e] + i] : p.masked_pairs[e * p.max_tokens + i];
                const std::int64_t token = pair / p.slots;
                for (std::int64_t k = 0; k < h; ++k) xrow[k] = bf16_to_float(a.x[token * h + k]);
                matvec(a.w->gate[e], d.weights, xrow, inter, h, wrow, gate);
                matvec(a.w->up[e], d.weights, xrow, inter, h, wrow, up);
                for (std::int64_t n = 0; n < inter; ++n) {
                    const Acc g = gate[n];
                    act[n] = static_cast<float>(g / (Acc(1) + std::exp(-g)) * Acc(up[n]));
                }
                // Down projection straight into the token's accumulator, scaled by the router weight.
                const Acc wt = p.topk_weights[pair];
                const Acc gs = global_scale(a.w->down[e], d.weights);
                for (std::int64_t n = 0; n < h; ++n) {
                    dequant_row(a.w->down[e], d.weights, n, inter, wrow);
                    Acc dot = 0;
                    for (std::int64_t k = 0; k < inter; ++k) dot += Acc(act[k]) * Acc(wrow[k]);
                    acc[token * h + n] += wt * (dot * gs);
                }
            }
        }
        for (std::int64_t t = 0; t < p.tokens * h; ++t) a.out[t] = float_to_bf16(static_cast<float>(acc[t]));
        return status::success();
    }

private:
    // y[n] = global * sum_k x[k] * W[n, k], for an [rows, k] matrix.
    static void matvec(const moe_matrix &m, moe_weight_format f, const float *x, std::int64_t rows, std::int64_t k,
                       float *wrow, float *y) {
        const Acc gs = global_scale(m, f);
        for (std::int64_t n = 0; n < rows; ++n) {
            dequant_row(m, f, n, k, wrow);
            Acc dot = 0;
            for (std::int64_t i = 0; i < k; ++i) dot += Acc(x[i]) * Acc(wrow[i]);
            y[n] = static_cast<float>(dot * gs);
        }
    }
};

} // namespace

std::unique_ptr<moe_runner> make_ref_runner(bool fp64) {
    if (fp64) return std::make_unique<ref_runner<double>>();
    return std::make_unique<ref_runner<float>>();
}

moe_device cpu_device(int threads) {
    moe_device dev;
    dev.name = "cpu";
    dev.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return dev;
}

void router_logits(const moe_desc &d, const bf16_t *x, std::int64_t tokens, const float *router, float *logits) {
    for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t e = 0; e < d.experts; ++e) {
            float dot = 0.0f;
            for (std::int64_t k = 0; k < d.hidden; ++k)
                dot += bf16_to_float(x[t * d.hidden + k]) * router[e * d.hidden + k];
            logits[t * d.experts + e] = dot;
        }
}

} // namespace fp4moe::cpu
