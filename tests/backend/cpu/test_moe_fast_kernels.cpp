// The private row-dot kernels of cpu.fast, every ISA this CPU has, against the scalar NVFP4 codecs: every E2M1
// code under every E4M3 scale code, through the register path (few tokens) and the scratch path (many).
#include "backend/cpu/moe_fast_kernels.h"
#include "fp4moe/nvfp4.h"
#include "moe_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fp4moe::cpu::fast {
namespace {

std::vector<const kernels *> available() {
    std::vector<const kernels *> k = {&kernels_scalar()};
    const cpu_isa best = detect_cpu_features().best();
    if (best >= cpu_isa::avx2) k.push_back(&kernels_avx2());
    if (best >= cpu_isa::avx512) k.push_back(&kernels_avx512());
    return k;
}

// One row of K = 4096: block b has scale byte b (NaN codes 0x7F / 0xFF replaced by 0x00), element i of a block
// has E2M1 code (i + b) % 16. Token x_p is one-hot at p, so dot(row, x_p) is the dequantized element p.
TEST(MoeFastKernels, EveryCodeUnderEveryScale) {
    constexpr std::int64_t K = 4096;
    std::vector<std::uint8_t> q(K / 2), s(K / 16);
    std::vector<float> expect(K);
    for (int b = 0; b < 256; ++b) {
        s[b] = (b & 0x7F) == 0x7F ? 0x00 : static_cast<std::uint8_t>(b);
        for (int i = 0; i < 16; ++i) {
            const int code = (i + b) % 16;
            q[b * 8 + i / 2] |= static_cast<std::uint8_t>(i % 2 ? code << 4 : code);
            expect[b * 16 + i] = nvfp4::e2m1_decode(static_cast<std::uint8_t>(code)) * nvfp4::e4m3_decode(s[b]);
        }
    }
    std::vector<float> onehot(2 * K, 0.0f), scratch(kScratchPerK * K);
    onehot[K] = 1.0f; // x_p = onehot + K - p
    for (const kernels *kn : available()) {
        for (int m : {1, 3, 16}) {
            for (std::int64_t p0 = 0; p0 < K; p0 += m) {
                const int mm = static_cast<int>(std::min<std::int64_t>(m, K - p0));
                const float *x[16];
                float out0[16], out1[16];
                for (int j = 0; j < mm; ++j) x[j] = onehot.data() + K - (p0 + j);
                dot_job jb;
                jb.rows = 2; // the same row twice: both outputs must agree
                jb.q[0] = jb.q[1] = q.data();
                jb.s[0] = jb.s[1] = s.data();
                jb.k = K;
                jb.x = x;
                jb.m = mm;
                jb.out[0] = out0;
                jb.out[1] = out1;
                jb.scratch = scratch.data();
                kn->dot_nvfp4(jb);
                for (int j = 0; j < mm; ++j) {
                    ASSERT_EQ(out0[j], expect[p0 + j]) << cpu_isa_name(kn->isa) << " m=" << m << " p=" << p0 + j;
                    ASSERT_EQ(out1[j], expect[p0 + j]) << cpu_isa_name(kn->isa) << " m=" << m << " p=" << p0 + j;
                }
            }
        }
    }
}

TEST(MoeFastKernels, NanScaleGivesNan) {
    constexpr std::int64_t K = 256; // 16 blocks: the vector scale decode
    for (std::uint8_t nan_code : {std::uint8_t{0x7F}, std::uint8_t{0xFF}})
        for (const kernels *kn : available()) {
            std::vector<std::uint8_t> q(K / 2, 0x22), s(K / 16, 0x38);
            s[5] = nan_code;
            std::vector<float> xv(K, 1.0f), scratch(kScratchPerK * K);
            const float *x[1] = {xv.data()};
            float out[1] = {0.0f};
            dot_job jb;
            jb.q[0] = q.data();
            jb.s[0] = s.data();
            jb.k = K;
            jb.x = x;
            jb.m = 1;
            jb.out[0] = out;
            jb.scratch = scratch.data();
            kn->dot_nvfp4(jb);
            EXPECT_TRUE(std::isnan(out[0])) << cpu_isa_name(kn->isa) << " " << int(nan_code);
        }
}

std::vector<const kernels *> with_p128() {
    std::vector<const kernels *> k;
    for (const kernels *kn : available())
        if (kn->dot_nvfp4_p128) k.push_back(kn);
    return k;
}

// The p128 path: the same one-hot check with x in the p128 layout, for 1 to 4 rows (the same row each time)
// and token counts on both sides of the register tile.
TEST(MoeFastKernels, P128EveryCodeUnderEveryScale) {
    constexpr std::int64_t K = 4096;
    std::vector<std::uint8_t> q(K / 2), s(K / 16);
    std::vector<float> expect(K);
    for (int b = 0; b < 256; ++b) {
        s[b] = (b & 0x7F) == 0x7F ? 0x00 : static_cast<std::uint8_t>(b);
        for (int i = 0; i < 16; ++i) {
            const int code = (i * 7 + b) % 16;
            q[b * 8 + i / 2] |= static_cast<std::uint8_t>(i % 2 ? code << 4 : code);
            expect[b * 16 + i] = nvfp4::e2m1_decode(static_cast<std::uint8_t>(code)) * nvfp4::e4m3_decode(s[b]);
        }
    }
    std::vector<float> onehot(2 * K, 0.0f), scratch(kScratchPerK * K);
    onehot[K] = 1.0f;
    for (const kernels *kn : with_p128()) {
        for (int rows : {1, 2, 3, 4})
            for (int m : {1, 2, 3, 4, 16}) {
                for (std::int64_t p0 = 0; p0 < K; p0 += m) {
                    const int mm = static_cast<int>(std::min<std::int64_t>(m, K - p0));
                    const float *x[16];
                    float out[4][16];
                    for (int j = 0; j < mm; ++j) x[j] = onehot.data() + K - p128_index(p0 + j);
                    dot_job jb;
                    jb.rows = rows;
                    for (int r = 0; r < rows; ++r) jb.q[r] = q.data(), jb.s[r] = s.data(), jb.out[r] = out[r];
                    jb.k = K;
                    jb.x = x;
                    jb.m = mm;
                    jb.scratch = scratch.data();
                    kn->dot_nvfp4_p128(jb);
                    for (int r = 0; r < rows; ++r)
                        for (int j = 0; j < mm; ++j)
                            ASSERT_EQ(out[r][j], expect[p0 + j])
                                << cpu_isa_name(kn->isa) << " rows=" << rows << " m=" << m << " p=" << p0 + j;
                }
            }
    }
}

// Random rows and activations: the p128 path agrees with the per-block path (to fp32 rounding) and gives the
// same bits for any token count and row grouping; K = 1408 has an odd chunk count (a lone last chunk).
TEST(MoeFastKernels, P128MatchesBlockPathAndIgnoresTiling) {
    for (std::int64_t K : {std::int64_t{1408}, std::int64_t{4096}})
        for (const kernels *kn : with_p128()) {
            std::uint64_t rng = 12345 + static_cast<std::uint64_t>(K);
            auto next = [&] { return static_cast<std::uint32_t>((rng = rng * 6364136223846793005ull + 1) >> 33); };
            constexpr int R = 4, M = 9;
            std::vector<std::uint8_t> q(R * K / 2), s(R * K / 16);
            for (auto &v : q) v = static_cast<std::uint8_t>(next());
            for (auto &v : s) v = static_cast<std::uint8_t>(0x30 + next() % 0x10); // 0.5 .. 1.875
            std::vector<float> x(M * K), xp(M * K), scratch(kScratchPerK * K);
            for (int j = 0; j < M; ++j)
                for (std::int64_t i = 0; i < K; ++i) {
                    x[j * K + i] = static_cast<float>(next() % 2001) / 1000.0f - 1.0f;
                    xp[j * K + p128_index(i)] = x[j * K + i];
                }
            const float *xs[M], *xps[M];
            for (int j = 0; j < M; ++j) xs[j] = x.data() + j * K, xps[j] = xp.data() + j * K;
            float ref[R][M], all[R][M], one[R][M];
            for (int r = 0; r < R; ++r) {
                dot_job jb;
                jb.q[0] = q.data() + r * K / 2;
                jb.s[0] = s.data() + r * K / 16;
                jb.k = K;
                jb.x = xs;
                jb.m = M;
                jb.out[0] = ref[r];
                jb.scratch = scratch.data();
                kn->dot_nvfp4(jb);
            }
            dot_job jb;
            jb.rows = R;
            for (int r = 0; r < R; ++r) jb.q[r] = q.data() + r * K / 2, jb.s[r] = s.data() + r * K / 16;
            jb.k = K;
            jb.scratch = scratch.data();
            jb.x = xps;
            jb.m = M;
            for (int r = 0; r < R; ++r) jb.out[r] = all[r];
            kn->dot_nvfp4_p128(jb); // scratch path, rows in pairs
            for (int j = 0; j < M; ++j) {
                dot_job j1 = jb; // register path, one token, 4 rows at once
                j1.x = xps + j;
                j1.m = 1;
                for (int r = 0; r < R; ++r) j1.out[r] = one[r] + j;
                kn->dot_nvfp4_p128(j1);
            }
            for (int r = 0; r < R; ++r)
                for (int j = 0; j < M; ++j) {
                    EXPECT_EQ(all[r][j], one[r][j]) << "K=" << K << " r=" << r << " j=" << j;
                    EXPECT_NEAR(all[r][j], ref[r][j], 2e-3f + 1e-4f * std::fabs(ref[r][j]))
                        << "K=" << K << " r=" << r << " j=" << j;
                }
        }
}

TEST(MoeFastKernels, P128NanScaleGivesNan) {
    constexpr std::int64_t K = 384; // 3 chunks: a chunk pair and a lone last chunk
    for (int block : {5, 17, 23})
        for (std::uint8_t nan_code : {std::uint8_t{0x7F}, std::uint8_t{0xFF}})
            for (const kernels *kn : with_p128()) {
                std::vector<std::uint8_t> q(K / 2, 0x22), s(K / 16, 0x38);
                s[block] = nan_code;
                std::vector<float> xv(K, 1.0f), scratch(kScratchPerK * K);
                const float *x[1] = {xv.data()};
                float out[1] = {0.0f};
                dot_job jb;
                jb.q[0] = q.data();
                jb.s[0] = s.data();
                jb.k = K;
                jb.x = x;
                jb.m = 1;
                jb.out[0] = out;
                jb.scratch = scratch.data();
                kn->dot_nvfp4_p128(jb);
                EXPECT_TRUE(std::isnan(out[0])) << cpu_isa_name(kn->isa) << " " << int(nan_code) << " " << block;
            }
}

TEST(MoeFastKernels, P128IndexIsAPermutation) {
    std::vector<int> seen(256, 0);
    for (std::int64_t i = 0; i < 256; ++i) ++seen[p128_index(i)];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 256);
    EXPECT_EQ(p128_index(8 * 3 + 5), 5 * 16 + 3);
    EXPECT_EQ(p128_index(128 + 1), 128 + 16);
}

TEST(MoeFastKernels, E4M3TableMatchesCodec) {
    for (int c = 0; c < 256; ++c) {
        const float a = e4m3_table()[c], b = nvfp4::e4m3_decode(static_cast<std::uint8_t>(c));
        if (std::isnan(b))
            EXPECT_TRUE(std::isnan(a)) << c;
        else
            EXPECT_EQ(a, b) << c;
    }
}

} // namespace
} // namespace fp4moe::cpu::fast

namespace fp4moe::test {
namespace {

// A shape where both phases take the p128 path (H and I multiples of 128) where the CPU has it: every tactic
// matches the fp64 oracle and gives the same bits for 1, 2 and 3 threads and both layouts, T on both sides
// of the register tile.
TEST(MoeFastKernels, P128RunnerMatchesOracleAndIsDeterministic) {
    moe_desc d;
    d.hidden = 256;
    d.intermediate = 384;
    d.experts = 8;
    d.top_k = 2;
    d.shared = 1;
    d.routing = {moe_scoring::sigmoid, true, true, 1, 1, 2.5f};
    ASSERT_TRUE(d.validate().ok());
    moe_desc dm = d;
    dm.layout = moe_layout::masked;
    const auto L = random_layer(d, 9), Lm = random_layer(dm, 9);
    const auto fast = cpu::make_fast_runner(3);
    const auto oracle = cpu::make_ref_runner(true);
    for (std::int64_t T : {1, 2, 5, 40}) {
        const auto x = random_x(T, d.hidden, 10 + static_cast<std::uint32_t>(T));
        const moe_plan p = route(*L, x, T);
        const auto ref = run_poisoned(*oracle, *L, p, x, oracle->tactics(d)[0]);
        for (const moe_tactic &t : fast->tactics(d)) {
            const auto one = run_poisoned(*fast, *L, p, x, t, 1);
            ASSERT_EQ(first_non_finite(one), -1) << t.name << " T=" << T;
            EXPECT_LT(normalized_error(one, ref), 1.0 / 512) << t.name << " T=" << T;
            EXPECT_EQ(run_poisoned(*fast, *L, p, x, t, 2), one) << t.name << " T=" << T;
            EXPECT_EQ(run_poisoned(*fast, *L, p, x, t, 3), one) << t.name << " T=" << T;
            EXPECT_EQ(run_poisoned(*fast, *Lm, p, x, t, 3), one) << t.name << " T=" << T;
        }
    }
}

} // namespace
} // namespace fp4moe::test
