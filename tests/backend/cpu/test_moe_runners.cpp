// Every CPU MoE runner (cpu.ref fp32, every tactic of cpu.fast) against the cpu.ref fp64 oracle on the routing
// rules of the supported families, both layouts, both weight formats, T = 0..64, one hot expert, empty experts,
// top_k = E; power-of-two diagonal weights with exactly known outputs; NVFP4 quality against bf16 weights.
#include "moe_case.h"

#include "backend/cpu/registry.h"
#include "core/cpu_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace fp4moe::test {
namespace {

// Tolerance against the fp64 oracle. Both sides dequantize the same weights exactly; they differ only in fp32
// vs fp64 accumulation (relative ~ sqrt(K) * 2^-24 ~ 1e-6 for K <= 256, over three chained GEMMs) and in the
// final bf16 rounding, where an element whose accumulator lies within ~1e-6 of a rounding boundary can land one
// ulp away. One bf16 ulp is at most 2^-7 of the element (8 significant bits), so one flipped element of
// magnitude |y| adds 2^-7 |y| / ||ref||; with >= 64 elements per case and ~1e-6 / 2^-8 of them flipping, the
// expected normalized error is ~1e-4 (measured: 0 in most runs, at most 3e-4). 2^-9 = 2e-3 allows a few flips
// of large elements; it still catches a 1 % error in one weight row, block scale or router weight of a pair
// (those give ~3e-3 .. 1).
constexpr double kTolVsOracle = 1.0 / 512;

struct family {
    const char *name;
    moe_desc d;
};

moe_desc base_desc(std::int64_t h, std::int64_t i, std::int64_t e, std::int64_t k, std::int64_t s) {
    moe_desc d;
    d.hidden = h;
    d.intermediate = i;
    d.experts = e;
    d.top_k = k;
    d.shared = s;
    return d;
}

std::vector<family> families() {
    std::vector<family> f;
    // Qwen3-MoE: softmax + renormalize, no shared expert.
    f.push_back({"qwen3", base_desc(128, 64, 16, 4, 0)});
    // GLM-4.5: sigmoid + correction bias, one group, routed_scaling_factor 2.5, one shared expert.
    moe_desc glm = base_desc(64, 96, 16, 4, 1);
    glm.routing = {moe_scoring::sigmoid, true, true, 1, 1, 2.5f};
    f.push_back({"glm", glm});
    // DeepSeek-V3: sigmoid + bias, 8 groups, 4 kept, scaling 2.5, one shared expert.
    moe_desc ds = base_desc(256, 32, 32, 6, 1);
    ds.routing = {moe_scoring::sigmoid, true, true, 8, 4, 2.5f};
    f.push_back({"deepseek", ds});
    return f;
}

// All runners and tactics under test: cpu.ref fp32 and every cpu.fast tactic (all ISAs this CPU has).
struct variant {
    const moe_runner *r;
    moe_tactic t;
};

class runners {
public:
    runners() : ref32_(cpu::make_ref_runner(false)), fast_(cpu::make_fast_runner(2)) {}
    std::vector<variant> all(const moe_desc &d) const {
        std::vector<variant> v;
        for (const moe_runner *r : {ref32_.get(), fast_.get()})
            for (const moe_tactic &t : r->tactics(d)) v.push_back({r, t});
        return v;
    }

private:
    std::unique_ptr<moe_runner> ref32_, fast_;
};

const runners &the_runners() {
    static const runners r;
    return r;
}

// Runs every variant on (layer, plan, x) and checks it against the fp64 oracle.
void check_all(const moe_layer &L, const moe_plan &p, const std::vector<bf16_t> &x, const std::string &what,
               double tol = kTolVsOracle) {
    const auto oracle = cpu::make_ref_runner(true);
    const std::vector<float> ref = run_poisoned(*oracle, L, p, x, oracle->tactics(L.d)[0]);
    ASSERT_EQ(first_non_finite(ref), -1) << what << ": oracle output not finite";
    for (const variant &v : the_runners().all(L.d)) {
        const std::vector<float> out = run_poisoned(*v.r, L, p, x, v.t);
        const std::string tag = fmt::format("{} [{} {}]", what, v.r->name(), v.t.name);
        const std::int64_t bad = first_non_finite(out);
        ASSERT_EQ(bad, -1) << tag << ": non-finite output at " << bad << " = " << (bad >= 0 ? out[bad] : 0.0f);
        const double err = normalized_error(out, ref);
        EXPECT_LE(err, tol) << tag;
    }
}

struct routed_case {
    int family;
    moe_layout layout;
    moe_weight_format format;
};

class MoeRunnersRouted : public ::testing::TestWithParam<routed_case> {};

TEST_P(MoeRunnersRouted, MatchOracleForEveryBatchSize) {
    const routed_case c = GetParam();
    family f = families()[c.family];
    f.d.layout = c.layout;
    f.d.weights = c.format;
    ASSERT_TRUE(f.d.validate().ok()) << f.d.validate().to_string();
    const auto L = random_layer(f.d, 1234 + c.family);
    for (std::int64_t T : {0, 1, 3, 7, 16, 64}) {
        const auto x = random_x(T, f.d.hidden, 77 + static_cast<std::uint32_t>(T));
        const moe_plan p = route(*L, x, T);
        check_all(*L, p, x, fmt::format("{} T={} {}", f.name, T, f.d.to_string()));
    }
}

std::vector<routed_case> routed_cases() {
    std::vector<routed_case> v;
    for (int f = 0; f < 3; ++f)
        for (auto l : {moe_layout::permuted, moe_layout::masked})
            for (auto w : {moe_weight_format::nvfp4, moe_weight_format::bf16}) v.push_back({f, l, w});
    return v;
}

INSTANTIATE_TEST_SUITE_P(All, MoeRunnersRouted, ::testing::ValuesIn(routed_cases()),
                         [](const ::testing::TestParamInfo<routed_case> &i) {
                             return fmt::format("{}_{}_{}", families()[i.param.family].name,
                                                i.param.layout == moe_layout::permuted ? "permuted" : "masked",
                                                i.param.format == moe_weight_format::nvfp4 ? "nvfp4" : "bf16");
                         });

// Plan from explicit ids: every token's k slots go to experts 0..k-1 (one hot expert per slot holding every
// token, the other experts empty); T = 100 spans more than one 64-token chunk of cpu.fast.
TEST(MoeRunners, HotExpertsAndEmptyExperts) {
    for (auto layout : {moe_layout::permuted, moe_layout::masked})
        for (auto fmt_ : {moe_weight_format::nvfp4, moe_weight_format::bf16}) {
            moe_desc d = base_desc(64, 48, 8, 2, 1);
            d.layout = layout;
            d.weights = fmt_;
            const auto L = random_layer(d, 99);
            for (std::int64_t T : {1, 5, 100}) {
                moe_plan p(d, T);
                p.tokens = T;
                p.topk_ids.resize(T * d.slots());
                p.topk_weights.resize(T * d.slots());
                for (std::int64_t t = 0; t < T; ++t)
                    for (std::int64_t s = 0; s < d.slots(); ++s) {
                        p.topk_ids[t * d.slots() + s] = static_cast<std::int32_t>(s < d.top_k ? s : d.experts);
                        p.topk_weights[t * d.slots() + s] = s < d.top_k ? 0.25f + 0.5f * s : 1.0f;
                    }
                moe_plan_from_ids(d, p);
                ASSERT_EQ(p.counts[0], T);
                ASSERT_EQ(p.counts[d.experts - 1], 0);
                check_all(*L, p, random_x(T, d.hidden, 5), fmt::format("hot T={} {}", T, d.to_string()));
            }
        }
}

// Every slot of every token on the same expert (the same token several times in one expert's rows; routing
// never does this, a caller's precomputed ids might). The masked layout holds max_tokens rows per expert, so
// the plan is sized for T * slots tokens (which also runs a batch smaller than the plan's capacity).
TEST(MoeRunners, OneExpertTakesEverySlot) {
    moe_desc d = base_desc(32, 32, 4, 3, 0);
    const std::int64_t T = 9;
    moe_plan p(d, T * d.slots());
    p.tokens = T;
    p.topk_ids.assign(T * d.slots(), 2);
    p.topk_weights.assign(T * d.slots(), 0.5f);
    moe_plan_from_ids(d, p);
    for (auto layout : {moe_layout::permuted, moe_layout::masked}) {
        d.layout = layout;
        const auto L = random_layer(d, 3);
        check_all(*L, p, random_x(T, d.hidden, 8), "all slots on expert 2 " + d.to_string());
    }
}

TEST(MoeRunners, TopKEqualsExperts) {
    for (auto layout : {moe_layout::permuted, moe_layout::masked}) {
        moe_desc d = base_desc(64, 32, 8, 8, 0);
        d.layout = layout;
        const auto L = random_layer(d, 11);
        for (std::int64_t T : {1, 7}) {
            const auto x = random_x(T, d.hidden, 12);
            check_all(*L, route(*L, x, T), x, fmt::format("top_k=E T={} {}", T, d.to_string()));
        }
    }
}

// bf16 weights with H and I not multiples of 16 (NVFP4 requires them; bf16 does not): the SIMD tails.
TEST(MoeRunners, Bf16OddSizes) {
    moe_desc d = base_desc(72, 40, 8, 2, 1);
    d.weights = moe_weight_format::bf16;
    const auto L = random_layer(d, 21);
    for (std::int64_t T : {1, 13}) {
        const auto x = random_x(T, d.hidden, 22);
        check_all(*L, route(*L, x, T), x, fmt::format("odd T={}", T));
    }
}

// Power-of-two diagonal weights: gate = 32 I, up = u_e I, down = d_e I (H = I), x in {1, 2, 4}, router
// weights 1/2 and 1/4. Every dot product has one non-zero term (exact); g = 32 x >= 32 so exp(-g) < 2^-46 and
// silu(g) = g / (1 + exp(-g)) is exactly g in fp32 (and within 2^-46 of it in fp64). Each slot contributes
// w * 32 x^2 u_e d_e, a power of two; the two slots' exponents differ by less than 8, so their sum is exact
// in bf16. The expected output is exact and every runner (and the oracle) must match it bit for bit.
TEST(MoeRunners, PowerOfTwoDiagonalExact) {
    for (auto fmt_ : {moe_weight_format::nvfp4, moe_weight_format::bf16})
        for (auto layout : {moe_layout::permuted, moe_layout::masked}) {
            moe_desc d = base_desc(32, 32, 4, 2, 0);
            d.weights = fmt_;
            d.layout = layout;
            auto L = std::make_unique<moe_layer>();
            L->d = d;
            L->router.assign(d.experts * d.hidden, 0.0f);
            auto u_e = [](std::int64_t e) { return std::ldexp(1.0f, static_cast<int>(e % 3) - 1); };
            auto d_e = [](std::int64_t e) { return std::ldexp(1.0f, -static_cast<int>(e % 2) - 1); };
            for (std::int64_t e = 0; e < d.experts; ++e) {
                const float diag[3] = {32.0f, u_e(e), d_e(e)};
                for (int j = 0; j < 3; ++j) {
                    std::vector<float> m(32 * 32, 0.0f);
                    for (int r = 0; r < 32; ++r) m[r * 32 + r] = diag[j];
                    L->master.push_back(std::move(m));
                }
            }
            // Powers of two quantize exactly only with a power-of-two global scale; build NVFP4 by hand:
            // value = e2m1 code x E4M3 scale x global 1. 32 = 4 (0x6) x 8 (0x50); 2^a = 1 (0x2) x 2^a.
            if (fmt_ == moe_weight_format::nvfp4) {
                for (const auto &m : L->master) {
                    nvfp4::matrix q;
                    q.rows = q.cols = 32;
                    q.global_scale = 1.0f;
                    q.packed.assign(32 * 16, 0);
                    q.scales.assign(32 * 2, 0x38); // 1.0
                    for (int r = 0; r < 32; ++r) {
                        const float v = m[r * 32 + r];
                        const std::uint8_t code = v == 32.0f ? 0x6 : 0x2;
                        const float scale = v == 32.0f ? 8.0f : v;
                        q.scales[r * 2 + r / 16] = nvfp4::e4m3_encode(scale);
                        ASSERT_EQ(nvfp4::e4m3_decode(q.scales[r * 2 + r / 16]), scale);
                        q.packed[r * 16 + r / 2] = static_cast<std::uint8_t>(r % 2 ? code << 4 : code);
                    }
                    L->q.push_back(std::move(q));
                }
                L->bind();
            } else {
                L->encode();
            }
            const std::int64_t T = 5;
            moe_plan p(d, T);
            p.tokens = T;
            std::vector<bf16_t> x(T * 32);
            for (std::int64_t t = 0; t < T; ++t)
                for (int h = 0; h < 32; ++h) x[t * 32 + h] = float_to_bf16(std::ldexp(1.0f, (h + t) % 3));
            for (std::int64_t t = 0; t < T; ++t) {
                p.topk_ids.push_back(static_cast<std::int32_t>(t % 4));
                p.topk_ids.push_back(static_cast<std::int32_t>((t + 1) % 4));
                p.topk_weights.push_back(0.5f);
                p.topk_weights.push_back(0.25f);
            }
            moe_plan_from_ids(d, p);
            std::vector<float> expect(T * 32);
            for (std::int64_t t = 0; t < T; ++t)
                for (int h = 0; h < 32; ++h) {
                    const double xv = bf16_to_float(x[t * 32 + h]);
                    double sum = 0;
                    for (int s = 0; s < 2; ++s) {
                        const std::int32_t e = p.topk_ids[t * 2 + s];
                        sum += p.topk_weights[t * 2 + s] * (32 * xv) * (u_e(e) * xv) * d_e(e);
                    }
                    expect[t * 32 + h] = static_cast<float>(sum);
                    ASSERT_EQ(bf16_to_float(float_to_bf16(expect[t * 32 + h])), expect[t * 32 + h]) << "not exact";
                }
            auto oracle = cpu::make_ref_runner(true);
            std::vector<variant> all = the_runners().all(d);
            all.push_back({oracle.get(), oracle->tactics(d)[0]});
            for (const variant &v : all) {
                const std::vector<float> out = run_poisoned(*v.r, *L, p, x, v.t);
                for (std::size_t i = 0; i < out.size(); ++i)
                    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(expect[i]))
                        << v.r->name() << " " << v.t.name << " " << d.to_string() << " element " << i << ": " << out[i]
                        << " vs " << expect[i];
            }
        }
}

// cpu.fast gives the same bits for any thread count (each output is summed by one thread in a fixed order),
// and the same bits in both layouts (the same expert-sorted pair order).
TEST(MoeRunners, FastIsDeterministicAcrossThreadsAndLayouts) {
    family f = families()[1];
    const auto L = random_layer(f.d, 5);
    const std::int64_t T = 33;
    const auto x = random_x(T, f.d.hidden, 6);
    const moe_plan p = route(*L, x, T);
    const auto fast = cpu::make_fast_runner(2);
    moe_desc dm = f.d;
    dm.layout = moe_layout::masked;
    const auto Lm = random_layer(dm, 5); // the same weights, masked layout
    for (const moe_tactic &t : fast->tactics(f.d)) {
        const auto one = run_poisoned(*fast, *L, p, x, t, 1);
        const auto two = run_poisoned(*fast, *L, p, x, t, 2);
        EXPECT_EQ(one, two) << t.name;
        EXPECT_EQ(run_poisoned(*fast, *Lm, p, x, t, 2), two) << t.name;
    }
}

TEST(MoeRunners, FastTacticsAndErrors) {
    const moe_desc d = families()[0].d;
    const auto fast = cpu::make_fast_runner();
    EXPECT_EQ(fast->name(), "cpu.fast");
    EXPECT_TRUE(fast->supports(d, cpu::cpu_device()));
    const auto tactics = fast->tactics(d);
    ASSERT_FALSE(tactics.empty());
    EXPECT_EQ(tactics[0].id, 0);
    // 2 block sizes per ISA up to the best one this CPU has.
    EXPECT_EQ(tactics.size(), 1u + 2u * (1u + static_cast<unsigned>(detect_cpu_features().best())));

    const auto L = random_layer(d, 1);
    const auto x = random_x(4, d.hidden, 2);
    const moe_plan p = route(*L, x, 4);
    std::vector<bf16_t> out(4 * d.hidden);
    std::vector<std::uint8_t> ws(fast->workspace_size(d, 4));
    moe_args a{x.data(), out.data(), &L->w, ws.data(), ws.size() - 1};
    EXPECT_EQ(fast->run(d, a, p, tactics[0], cpu::cpu_device()).code(), status_code::invalid_argument)
        << "workspace one byte short";
    a.workspace_bytes = ws.size();
    EXPECT_EQ(fast->run(d, a, p, {999, "bogus"}, cpu::cpu_device()).code(), status_code::unsupported);
    EXPECT_TRUE(fast->run(d, a, p, tactics[0], cpu::cpu_device()).ok());
}

TEST(MoeRunners, RegistryListsRefAndFast) {
    const cpu::runner_registry reg(1);
    const auto c = reg.candidates();
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].runner->name(), "cpu.ref");
    EXPECT_FALSE(c[0].autotune); // the oracle is forced by name, never tuned
    EXPECT_EQ(c[1].runner->name(), "cpu.fast");
    EXPECT_TRUE(c[1].autotune);
    EXPECT_EQ(reg.find("cpu.fast"), c[1].runner);
    EXPECT_EQ(reg.find("cuda.decode"), nullptr);
}

} // namespace
} // namespace fp4moe::test

namespace fp4moe::test {
namespace {

// NVFP4 quality: the layer with NVFP4 weights (cpu.fast, best tactic) against the same layer with the
// fp32 master weights rounded to bf16 (the oracle), both routed identically.
//
// Bound. Weights are uniform in [-a, a]; a 16-block's amax maps to E2M1 6 (the E4M3 rounding of the block
// scale moves it by at most 2^-4). Values spread uniformly over [0, 6] in code units: a third in [0, 2)
// (step 0.5), a third in [2, 4) (step 1), a third in [4, 6] (step 2); rounding to nearest leaves a uniform
// error of RMS step / sqrt(12), so MSE = (0.25 + 1 + 4) / 3 / 12 = 0.146 against a mean square of 6^2 / 3 = 12:
// a relative RMS weight error of sqrt(0.146 / 12) = 0.11. Errors of different weights are independent, so a dot
// product with random activations has the same relative error, 0.11. gate and up each carry it into
// act = silu(g) * u (silu' is ~0.5 .. 1.1 here, so gate's share is a bit smaller), and down adds its own:
// in total about sqrt(3) * 0.11 = 0.19 before averaging over experts. The slots of a token mix k + S
// independently quantized experts; the errors add in quadrature like the signals, so the ratio stays ~0.19
// (a bit lower: gate's share is damped). Measured: 0.18. Bound 0.25 leaves margin, while a wrong scale,
// nibble order or code table gives errors of 0.5 .. 1.4.
TEST(MoeRunners, Nvfp4QualityAgainstBf16) {
    moe_desc d = base_desc(256, 128, 16, 4, 1);
    d.routing = {moe_scoring::sigmoid, true, true, 1, 1, 2.5f};
    d.weights = moe_weight_format::bf16;
    const auto Lb = random_layer(d, 42);
    moe_layer Lq;
    Lq.d = d;
    Lq.d.weights = moe_weight_format::nvfp4;
    Lq.router = Lb->router;
    Lq.bias = Lb->bias;
    Lq.master = Lb->master;
    Lq.encode();
    const std::int64_t T = 32;
    const auto x = random_x(T, d.hidden, 43);
    const moe_plan p = route(*Lb, x, T);
    const auto oracle = cpu::make_ref_runner(true);
    const auto ref = run_poisoned(*oracle, *Lb, p, x, oracle->tactics(d)[0]);
    const auto fast = cpu::make_fast_runner();
    const auto out = run_poisoned(*fast, Lq, p, x, fast->tactics(Lq.d)[0]);
    ASSERT_EQ(first_non_finite(out), -1);
    const double err = normalized_error(out, ref);
    EXPECT_LE(err, 0.25);
    EXPECT_GE(err, 0.02) << "suspiciously small: are the weights quantized at all?";
}

} // namespace
} // namespace fp4moe::test
