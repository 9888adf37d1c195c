// Test helpers for the CPU MoE runners: a random layer (fp32 master weights -> NVFP4 or bf16), a routed
// plan, poisoned runs, and the normalized error.
#pragma once

#include "backend/cpu/runners.h"
#include "fp4moe/moe.h"
#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace fp4moe::test {

constexpr std::uint8_t kPoison = 0xD5;

/// One MoE layer that owns its weights. `master` keeps the fp32 weights the formats were made from.
struct moe_layer {
    moe_desc d;
    std::vector<float> router, bias;
    std::vector<std::vector<float>> master; // [3 * NE]: gate e, up e, down e
    std::vector<nvfp4::matrix> q;           // nvfp4 storage
    std::vector<std::vector<bf16_t>> b;     // bf16 storage
    std::vector<moe_matrix> gate, up, down;
    moe_weights w;

    void bind() {
        const std::int64_t ne = d.total_experts();
        gate.assign(ne, {});
        up.assign(ne, {});
        down.assign(ne, {});
        for (std::int64_t e = 0; e < ne; ++e) {
            moe_matrix *m[3] = {&gate[e], &up[e], &down[e]};
            for (int j = 0; j < 3; ++j) {
                if (d.weights == moe_weight_format::nvfp4)
                    m[j]->nvfp4 = nvfp4::view(q[3 * e + j]);
                else
                    m[j]->bf16 = b[3 * e + j].data();
            }
        }
        w.router = router.data();
        w.correction_bias = bias.empty() ? nullptr : bias.data();
        w.gate = gate;
        w.up = up;
        w.down = down;
    }

    /// Stores `master` in the desc's weight format.
    void encode() {
        q.clear();
        b.clear();
        for (std::size_t i = 0; i < master.size(); ++i) {
            const bool is_down = i % 3 == 2;
            const std::int64_t rows = is_down ? d.hidden : d.intermediate, cols = is_down ? d.intermediate : d.hidden;
            if (d.weights == moe_weight_format::nvfp4) {
                auto r = nvfp4::quantize(master[i], rows, cols);
                EXPECT_TRUE(r.ok()) << r.get_status().to_string();
                q.push_back(r.ok() ? r.value() : nvfp4::matrix{});
            } else {
                std::vector<bf16_t> v(master[i].size());
                for (std::size_t k = 0; k < v.size(); ++k) v[k] = float_to_bf16(master[i][k]);
                b.push_back(std::move(v));
            }
        }
        bind();
    }
};

/// Random layer: weights uniform in [-1, 1] / sqrt(K) (outputs of order one), router N(0, 1) / sqrt(H).
inline std::unique_ptr<moe_layer> random_layer(const moe_desc &d, std::uint32_t seed) {
    auto L = std::make_unique<moe_layer>();
    L->d = d;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::normal_distribution<float> n(0.0f, 1.0f);
    L->router.resize(d.experts * d.hidden);
    for (auto &v : L->router) v = n(rng) / std::sqrt(static_cast<float>(d.hidden));
    if (d.routing.correction_bias) {
        L->bias.resize(d.experts);
        for (auto &v : L->bias) v = 0.1f * u(rng);
    }
    for (std::int64_t e = 0; e < d.total_experts(); ++e)
        for (int j = 0; j < 3; ++j) {
            const std::int64_t rows = j == 2 ? d.hidden : d.intermediate, cols = j == 2 ? d.intermediate : d.hidden;
            std::vector<float> m(rows * cols);
            const float s = 1.0f / std::sqrt(static_cast<float>(cols));
            for (auto &v : m) v = s * u(rng);
            L->master.push_back(std::move(m));
        }
    L->encode();
    return L;
}

inline std::vector<bf16_t> random_x(std::int64_t tokens, std::int64_t hidden, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<bf16_t> x(tokens * hidden);
    for (auto &v : x) v = float_to_bf16(u(rng));
    return x;
}

/// Routes x through the layer's router into a plan sized for exactly `tokens`.
inline moe_plan route(const moe_layer &L, const std::vector<bf16_t> &x, std::int64_t tokens) {
    moe_plan p(L.d, tokens);
    std::vector<float> logits(tokens * L.d.experts);
    cpu::router_logits(L.d, x.data(), tokens, L.router.data(), logits.data());
    const status st = moe_route(L.d, logits, L.w.correction_bias, tokens, p);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return p;
}

/// Runs `r` with poisoned output and workspace; returns the output as floats.
inline std::vector<float> run_poisoned(const moe_runner &r, const moe_layer &L, const moe_plan &p,
                                       const std::vector<bf16_t> &x, const moe_tactic &t, int threads = 0) {
    const std::size_t ws_bytes = r.workspace_size(L.d, p.max_tokens);
    std::vector<std::uint8_t> ws(ws_bytes + 1, kPoison);
    std::vector<bf16_t> out(p.tokens * L.d.hidden, bf16_t{kPoison * 0x101}); // 0xD5D5 bytes
    moe_args a;
    a.x = x.data();
    a.out = out.data();
    a.w = &L.w;
    // cpu.fast aligns its workspace itself: give it an odd address (cpu.ref needs an aligned one).
    a.workspace = ws.data() + (r.name() == "cpu.fast" ? 1 : 0);
    a.workspace_bytes = ws_bytes;
    const status st = r.run(L.d, a, p, t, cpu::cpu_device(threads));
    EXPECT_TRUE(st.ok()) << r.name() << " " << t.name << ": " << st.to_string();
    std::vector<float> f(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) f[i] = bf16_to_float(out[i]);
    return f;
}

/// ||a - b|| / ||b|| (0 when both are empty or b is zero and a equals it).
inline double normalized_error(const std::vector<float> &a, const std::vector<float> &b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Index of the first NaN or Inf, or -1.
inline std::int64_t first_non_finite(const std::vector<float> &v) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i])) return static_cast<std::int64_t>(i);
    return -1;
}

} // namespace fp4moe::test
