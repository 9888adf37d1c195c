// ModelOpt NVFP4 quantize / dequantize. Hand-computed vectors spell out the expected bytes from the recipe
// (nvfp4.md 1.5); random data checks a derived error bound and the bf16 path.
#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace nv = fp4moe::nvfp4;
using fp4moe::status_code;

namespace {

std::uint32_t bits(float f) {
    return std::bit_cast<std::uint32_t>(f);
}

nv::matrix quantize_ok(const std::vector<float> &w, std::int64_t rows, std::int64_t cols, float amax = -1.0f) {
    auto r = nv::quantize(w, rows, cols, amax);
    EXPECT_TRUE(r.ok()) << r.get_status().to_string();
    return r.ok() ? r.value() : nv::matrix{};
}

std::vector<float> dequantize_ok(const nv::matrix &m) {
    std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols), -1.0f);
    const fp4moe::status st = nv::dequantize(nv::view(m), out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return out;
}

} // namespace

// amax = 2688 makes ws2 = 2688 / 2688 = 1 exactly, so s = bamx / 6 = 448 -> byte 0x7E and y = w / 448.
TEST(Quantize, EveryCodeOnceWithUnitGlobal) {
    const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    std::vector<float> w(16);
    for (int i = 0; i < 16; ++i) w[i] = 448.0f * e2m1[i];
    const nv::matrix m = quantize_ok(w, 1, 16);
    EXPECT_EQ(m.global_scale, 1.0f);
    ASSERT_EQ(m.scales.size(), 1u);
    EXPECT_EQ(m.scales[0], 0x7E);
    // Codes 0..7, then -0.0 -> 0x0 (ModelOpt's sign bit is y < 0), 0x9..0xF; element 2j in the low nibble.
    const std::vector<std::uint8_t> packed = {0x10, 0x32, 0x54, 0x76, 0x90, 0xBA, 0xDC, 0xFE};
    EXPECT_EQ(m.packed, packed);
    const std::vector<float> back = dequantize_ok(m);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], i == 8 ? 0.0f : w[i]) << i;
    EXPECT_EQ(bits(back[8]), bits(0.0f)) << "-0.0 comes back as +0.0";
}

TEST(Quantize, RoundedBlockScaleTiesAndSaturation) {
    // Block 0: bamx = 2688 = amax -> ws2 = 1, s = 448 (0x7E); y = w / 448.
    //   2688 -> 6 (0x7), 1120 -> 2.5 tie -> 2.0 (0x4), -2240 -> -5 tie -> -4.0 (0xE), 336 -> 0.75 tie -> 1.0 (0x2).
    // Block 1: bamx = 10, s = fp32(10 / 6) = 1.6666666 between E4M3 1.625 (0x3D) and 1.75 (0x3E) -> 0x3D;
    //   y = w / 1.625: 10 -> 6.15 saturates (0x7); 4.0625 -> 2.5 tie (0x4); 0.40625 -> 0.25 tie -> 0 (0x0);
    //   2.84375 -> 1.75 tie -> 2.0 (0x4); -5.6875 -> -3.5 tie -> -4.0 (0xE); -0.1 -> -0.06 -> -0 (0x8).
    std::vector<float> w(32, 0.0f);
    w[0] = 2688.0f, w[1] = 1120.0f, w[2] = -2240.0f, w[3] = 336.0f;
    w[16] = 10.0f, w[17] = 4.0625f, w[18] = 0.40625f, w[19] = 2.84375f, w[20] = -5.6875f, w[21] = -0.1f;
    const nv::matrix m = quantize_ok(w, 1, 32);
    EXPECT_EQ(m.global_scale, 1.0f);
    EXPECT_EQ(m.scales, (std::vector<std::uint8_t>{0x7E, 0x3D}));
    const std::vector<std::uint8_t> packed = {0x47, 0x2E, 0, 0, 0, 0, 0, 0, 0x47, 0x40, 0x8E, 0, 0, 0, 0, 0};
    EXPECT_EQ(m.packed, packed);
    const std::vector<float> back = dequantize_ok(m);
    EXPECT_EQ(back[0], 2688.0f);
    EXPECT_EQ(back[1], 896.0f);
    EXPECT_EQ(back[2], -1792.0f);
    EXPECT_EQ(back[3], 448.0f);
    EXPECT_EQ(back[16], 6 * 1.625f);
    EXPECT_EQ(back[18], 0.0f);
    EXPECT_EQ(back[20], -4 * 1.625f);
    EXPECT_EQ(bits(back[21]), bits(-0.0f));
}

TEST(Quantize, GeneralGlobalScale) {
    // amax = 1: ws2 = fp32(1 / 2688); s = 1 / (6 ws2) is 448 within an ulp -> 0x7E; y(1) ~ 6 -> 0x7;
    // y(0.5) ~ 3 -> 0x5; y(0.25) ~ 1.5 -> 0x3.
    std::vector<float> w(16, 0.0f);
    w[0] = 1.0f, w[1] = 0.5f, w[2] = 0.25f;
    const nv::matrix m = quantize_ok(w, 1, 16);
    EXPECT_EQ(bits(m.global_scale), bits(1.0f / 2688.0f));
    EXPECT_EQ(m.scales[0], 0x7E);
    EXPECT_EQ(m.packed[0], 0x57);
    EXPECT_EQ(m.packed[1], 0x03);
    const std::vector<float> back = dequantize_ok(m);
    // Dequantization order: (e2m1 * e4m3) exact, then one rounding by the global scale.
    EXPECT_EQ(bits(back[0]), bits(2688.0f * m.global_scale));
    EXPECT_EQ(bits(back[1]), bits(1344.0f * m.global_scale));
}

TEST(Quantize, AmaxOverride) {
    std::vector<float> w(16, 0.0f);
    w[0] = 448.0f; // own amax 448; override 2688 -> ws2 = 1, s = 448 / 6 = 74.67.
    // E4M3 around 74.67: 2^6 (biased exponent 13 = 0b1101), mantissa step 8: 72 (0x69), 80 (0x6A); nearer 72.
    // y = 448 / 72 = 6.22 -> saturates to 6 (0x7).
    const nv::matrix m = quantize_ok(w, 1, 16, 2688.0f);
    EXPECT_EQ(m.global_scale, 1.0f);
    EXPECT_EQ(m.scales[0], 0x69);
    EXPECT_EQ(m.packed[0], 0x07);
    auto bad = nv::quantize(w, 1, 16, 100.0f);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.get_status().code(), status_code::invalid_argument);
    EXPECT_FALSE(nv::quantize(w, 1, 16, std::numeric_limits<float>::infinity()).ok());
}

TEST(Quantize, AllZeroBlocksGetScaleOne) {
    std::vector<float> w(48, 0.0f);
    w[16] = 3.0f; // block 1 only; blocks 0 and 2 are zero (one of them with -0.0)
    w[40] = -0.0f;
    const nv::matrix m = quantize_ok(w, 1, 48);
    EXPECT_EQ(m.scales[0], 0x38);
    EXPECT_EQ(m.scales[1], 0x7E);
    EXPECT_EQ(m.scales[2], 0x38);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(m.packed[j], 0) << j;
    for (int j = 16; j < 24; ++j) EXPECT_EQ(m.packed[j], 0) << j;
}

TEST(Quantize, ZeroMatrixGivesExactZeros) {
    const std::vector<float> w(64, 0.0f);
    const nv::matrix m = quantize_ok(w, 2, 32);
    EXPECT_EQ(bits(m.global_scale), bits(0.0f)) << "ws2 = amax / 2688 = 0";
    EXPECT_EQ(m.scales, std::vector<std::uint8_t>(4, 0x38));
    EXPECT_EQ(m.packed, std::vector<std::uint8_t>(32, 0));
    for (float v : dequantize_ok(m)) EXPECT_EQ(bits(v), bits(0.0f));
}

TEST(Quantize, EmptyMatrix) {
    const nv::matrix m = quantize_ok({}, 0, 32);
    EXPECT_TRUE(m.packed.empty());
    EXPECT_TRUE(m.scales.empty());
}

TEST(Quantize, RejectsKNotMultipleOf16) {
    const std::vector<float> w(24, 1.0f);
    auto r = nv::quantize(w, 1, 24);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.get_status().code(), status_code::invalid_argument);
    EXPECT_NE(r.get_status().message().find("K (cols) = 24"), std::string::npos) << r.get_status().message();
}

TEST(Quantize, RejectsBadShapes) {
    const std::vector<float> w(32, 1.0f);
    EXPECT_EQ(nv::quantize(w, 1, 16).get_status().code(), status_code::invalid_argument) << "size mismatch";
    EXPECT_EQ(nv::quantize(w, -2, -16).get_status().code(), status_code::invalid_argument);
}

TEST(Quantize, RejectsNonFiniteNamingRowAndColumn) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        std::vector<float> w(64, 1.0f);
        w[1 * 32 + 5] = bad;
        auto r = nv::quantize(w, 2, 32);
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.get_status().code(), status_code::invalid_argument);
        EXPECT_NE(r.get_status().message().find("row 1, column 5"), std::string::npos) << r.get_status().message();
    }
}

// Error bound. Per block with amax b: sf * ws2 = d, where sf = e4m3(b / (6 ws2)) is within 2^-4 relative of
// b / (6 ws2) when it is an E4M3 normal, so d <= b (1 + 2^-4) / 6 (1 + 2^-22) < 0.1771 b. With y = w / d:
//  - |y| < 1: E2M1 step is 0.5, RNE error <= 0.25 = 0.25 * max(|y|, 1);
//  - 1 <= |y| <= 6: step 0.5 on [1, 2), 1 on [2, 4), 2 on [4, 6], error <= half a step <= 0.25 |y|;
//  - 6 < |y| <= 6 (1 + 2^-4) / (1 - 2^-4) = 6.8: saturation error |y| - 6 < 0.25 |y|.
// So |w - w_hat| <= 0.25 max(|w|, d) plus two fp32 roundings (y and the dequant product): we allow 1e-6.
TEST(Quantize, RoundTripErrorWithinDerivedBound) {
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> expo(-4.0f, 4.0f);
    const std::int64_t rows = 37, cols = 256;
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        const float row_scale = std::exp2(expo(rng)); // rows of very different magnitude share one global
        for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(r * cols + c)] = normal(rng) * row_scale;
    }
    const nv::matrix m = quantize_ok(w, rows, cols);
    const std::vector<float> back = dequantize_ok(m);
    double worst = 0.0;
    for (std::size_t blk = 0; blk < w.size() / 16; ++blk) {
        ASSERT_GE(m.scales[blk], 0x08) << "the bound assumes E4M3-normal block scales";
        const double d = static_cast<double>(nv::e4m3_decode(m.scales[blk])) * m.global_scale;
        double b = 0.0;
        for (int i = 0; i < 16; ++i) b = std::max(b, std::fabs(static_cast<double>(w[blk * 16 + i])));
        ASSERT_LT(d, 0.1771 * b);
        for (int i = 0; i < 16; ++i) {
            const std::size_t k = blk * 16 + i;
            const double err = std::fabs(static_cast<double>(w[k]) - back[k]);
            const double bound = 0.25 * std::max(std::fabs(static_cast<double>(w[k])), d) * (1 + 1e-6);
            EXPECT_LE(err, bound) << "element " << k;
            worst = std::max(worst, err / bound);
        }
    }
    EXPECT_GT(worst, 0.5) << "the bound should be nearly tight on random data";
}

TEST(Quantize, Bf16PathEqualsFp32Path) {
    std::mt19937 rng(99);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const std::int64_t rows = 19, cols = 96;
    std::vector<fp4moe::bf16_t> wb(static_cast<std::size_t>(rows * cols));
    std::vector<float> wf(wb.size());
    for (std::size_t i = 0; i < wb.size(); ++i) {
        wb[i] = fp4moe::float_to_bf16(i % 50 == 0 ? 0.0f : normal(rng));
        wf[i] = fp4moe::bf16_to_float(wb[i]);
    }
    for (float amax : {-1.0f, 40.0f}) {
        auto a = nv::quantize(std::span<const fp4moe::bf16_t>(wb), rows, cols, amax);
        auto b = nv::quantize(std::span<const float>(wf), rows, cols, amax);
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_EQ(bits(a.value().global_scale), bits(b.value().global_scale));
        EXPECT_EQ(a.value().scales, b.value().scales);
        EXPECT_EQ(a.value().packed, b.value().packed);
    }
    wb[7].bits = 0x7FC0; // NaN
    auto bad = nv::quantize(std::span<const fp4moe::bf16_t>(wb), rows, cols);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.get_status().message().find("row 0, column 7"), std::string::npos);
}

TEST(Dequantize, RejectsSmallOutputAndNullData) {
    const nv::matrix m = quantize_ok(std::vector<float>(32, 1.0f), 2, 16);
    std::vector<float> out(31);
    EXPECT_EQ(nv::dequantize(nv::view(m), out).code(), status_code::invalid_argument);
    nv::matrix_view v = nv::view(m);
    v.packed = nullptr;
    out.resize(32);
    EXPECT_EQ(nv::dequantize(v, out).code(), status_code::invalid_argument);
}
