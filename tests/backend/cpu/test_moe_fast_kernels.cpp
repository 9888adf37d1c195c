// The private row-dot kernels of cpu.fast, every ISA this CPU has, against the scalar NVFP4 codecs: every E2M1
// code under every E4M3 scale code, through the register path (few tokens) and the scratch path (many).
#include "backend/cpu/moe_fast_kernels.h"
#include "fp4moe/nvfp4.h"

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
    std::vector<float> onehot(2 * K, 0.0f), scratch(2 * K);
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
            std::vector<float> xv(K, 1.0f), scratch(2 * K);
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
