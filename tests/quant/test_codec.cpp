// E2M1 and E4M3fn scalar codecs: every code, every rounding tie, saturation and subnormals. Expected values
// are written out or come from the format's formula, never from the code under test.
#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nv = fp4moe::nvfp4;

namespace {

std::uint32_t bits(float f) {
    return std::bit_cast<std::uint32_t>(f);
}
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// value = (-1)^s * 2^(e-7) * (1 + m/8); e == 0: (-1)^s * 2^-6 * m/8; 0x7F / 0xFF: NaN.
float e4m3_formula(int c) {
    const int s = c >> 7, e = (c >> 3) & 0xF, m = c & 7;
    const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    return static_cast<float>(s ? -mag : mag);
}

} // namespace

TEST(E2M1, DecodesEveryCode) {
    const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    for (int c = 0; c < 16; ++c) EXPECT_EQ(bits(nv::e2m1_decode(static_cast<std::uint8_t>(c))), bits(expected[c])) << c;
    EXPECT_EQ(nv::e2m1_decode(0xF3), 1.5f) << "only the low 4 bits count";
}

TEST(E2M1, EncodeOfDecodeIsIdentity) {
    for (int c = 0; c < 16; ++c) EXPECT_EQ(nv::e2m1_encode(nv::e2m1_decode(static_cast<std::uint8_t>(c))), c) << c;
}

TEST(E2M1, TiesGoToEvenCode) {
    struct tie {
        float x;
        std::uint8_t code;
    };
    // 0.25 between 0 (0x0) and 0.5 (0x1) -> 0x0; 0.75 between 0.5 and 1.0 -> 1.0 (0x2); and so on.
    const tie ties[] = {{0.25f, 0x0}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4}, {2.5f, 0x4}, {3.5f, 0x6}, {5.0f, 0x6}};
    for (const tie &t : ties) {
        EXPECT_EQ(nv::e2m1_encode(t.x), t.code) << t.x;
        EXPECT_EQ(nv::e2m1_encode(-t.x), t.code | 0x8) << -t.x;
    }
}

TEST(E2M1, JustOffTiesGoToNearest) {
    const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const std::uint8_t below[] = {0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6};
    for (int i = 0; i < 7; ++i) {
        const float up = std::nextafter(ties[i], kInf), down = std::nextafter(ties[i], 0.0f);
        EXPECT_EQ(nv::e2m1_encode(down), below[i]) << down;
        EXPECT_EQ(nv::e2m1_encode(up), below[i] + 1) << up;
        EXPECT_EQ(nv::e2m1_encode(-down), below[i] | 0x8) << -down;
        EXPECT_EQ(nv::e2m1_encode(-up), (below[i] + 1) | 0x8) << -up;
    }
}

TEST(E2M1, SaturatesAndHandlesSpecials) {
    for (float x : {6.0f, 6.1f, 7.0f, 100.0f, 1e9f, 3.4e38f, kInf}) {
        EXPECT_EQ(nv::e2m1_encode(x), 0x7) << x;
        EXPECT_EQ(nv::e2m1_encode(-x), 0xF) << -x;
    }
    EXPECT_EQ(nv::e2m1_encode(kNaN), 0x7);
    EXPECT_EQ(nv::e2m1_encode(-kNaN), 0x7);
    // The scalar codec keeps the sign of zero results (cvt.rn.satfinite semantics); quantize() does not.
    EXPECT_EQ(nv::e2m1_encode(0.0f), 0x0);
    EXPECT_EQ(nv::e2m1_encode(-0.0f), 0x8);
    EXPECT_EQ(nv::e2m1_encode(-0.1f), 0x8);
    EXPECT_EQ(nv::e2m1_encode(1e-40f), 0x0);
}

TEST(E4M3, DecodesEveryCode) {
    for (int c = 0; c < 256; ++c) {
        const float got = nv::e4m3_decode(static_cast<std::uint8_t>(c));
        if ((c & 0x7F) == 0x7F) {
            EXPECT_TRUE(std::isnan(got)) << c;
            EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
            continue;
        }
        EXPECT_EQ(bits(got), bits(e4m3_formula(c))) << "code " << c;
    }
    // A few spelled out.
    EXPECT_EQ(nv::e4m3_decode(0x38), 1.0f);
    EXPECT_EQ(nv::e4m3_decode(0x7E), 448.0f);
    EXPECT_EQ(nv::e4m3_decode(0xFE), -448.0f);
    EXPECT_EQ(nv::e4m3_decode(0x01), 0x1p-9f);
    EXPECT_EQ(nv::e4m3_decode(0x07), 7 * 0x1p-9f);
    EXPECT_EQ(nv::e4m3_decode(0x08), 0x1p-6f);
    EXPECT_EQ(nv::e4m3_decode(0x3D), 1.625f);
    EXPECT_EQ(nv::e4m3_decode(0x40), 2.0f);
    EXPECT_EQ(bits(nv::e4m3_decode(0x80)), bits(-0.0f));
}

TEST(E4M3, EncodeOfDecodeIsIdentity) {
    // Every non-NaN code, -0 (0x80) included: the codec keeps the sign of zero.
    for (int c = 0; c < 256; ++c) {
        if ((c & 0x7F) == 0x7F) continue;
        EXPECT_EQ(nv::e4m3_encode(nv::e4m3_decode(static_cast<std::uint8_t>(c))), c) << c;
    }
}

TEST(E4M3, MidpointsTieToEvenCodeAndNeighboursRoundToNearest) {
    // Adjacent positive codes c, c + 1 are adjacent values (0x00 .. 0x7E); the even code has an even mantissa.
    for (int c = 0; c < 0x7E; ++c) {
        const float lo = e4m3_formula(c), hi = e4m3_formula(c + 1);
        const float mid = (lo + hi) / 2; // exact: both have at most 4 significant bits
        ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
        const int even = (c % 2 == 0) ? c : c + 1;
        EXPECT_EQ(nv::e4m3_encode(mid), even) << "midpoint of " << c << " and " << c + 1;
        EXPECT_EQ(nv::e4m3_encode(-mid), even | 0x80) << "midpoint of " << c << " and " << c + 1;
        EXPECT_EQ(nv::e4m3_encode(std::nextafter(mid, 0.0f)), c) << mid;
        EXPECT_EQ(nv::e4m3_encode(std::nextafter(mid, kInf)), c + 1) << mid;
        EXPECT_EQ(nv::e4m3_encode(-std::nextafter(mid, kInf)), (c + 1) | 0x80) << mid;
    }
}

TEST(E4M3, SaturatesAndHandlesSpecials) {
    for (float x : {448.0f, 449.0f, 463.9f, 464.0f, 465.0f, 480.0f, 1e9f, 3.4e38f, kInf}) {
        EXPECT_EQ(nv::e4m3_encode(x), 0x7E) << x;
        EXPECT_EQ(nv::e4m3_encode(-x), 0xFE) << -x;
    }
    EXPECT_EQ(nv::e4m3_encode(kNaN), 0x7F);
    EXPECT_EQ(nv::e4m3_encode(-kNaN), 0xFF);
    EXPECT_EQ(nv::e4m3_encode(447.0f), 0x7E) << "416 (0x7D) < 447 < 448 (0x7E), nearer 448";
    EXPECT_EQ(nv::e4m3_encode(432.0f), 0x7E) << "tie between 416 (0x7D) and 448 (0x7E): even";
    EXPECT_EQ(nv::e4m3_encode(424.0f), 0x7D);
}

TEST(E4M3, Subnormals) {
    EXPECT_EQ(nv::e4m3_encode(0x1p-9f), 0x01) << "smallest subnormal";
    EXPECT_EQ(nv::e4m3_encode(0x1p-10f), 0x00) << "half the smallest subnormal ties to 0";
    EXPECT_EQ(nv::e4m3_encode(-0x1p-10f), 0x80);
    EXPECT_EQ(nv::e4m3_encode(std::nextafter(0x1p-10f, 1.0f)), 0x01);
    EXPECT_EQ(nv::e4m3_encode(3 * 0x1p-10f), 0x02) << "1.5 quanta ties to 2";
    EXPECT_EQ(nv::e4m3_encode(5 * 0x1p-10f), 0x02) << "2.5 quanta ties to 2";
    EXPECT_EQ(nv::e4m3_encode(15 * 0x1p-10f), 0x08) << "7.5 quanta ties to 8 = 2^-6, the smallest normal";
    EXPECT_EQ(nv::e4m3_encode(0x1p-11f), 0x00);
    EXPECT_EQ(nv::e4m3_encode(1e-30f), 0x00);
    EXPECT_EQ(nv::e4m3_encode(-1e-30f), 0x80);
    EXPECT_EQ(nv::e4m3_encode(std::numeric_limits<float>::denorm_min()), 0x00);
    EXPECT_EQ(nv::e4m3_encode(0.0f), 0x00);
    EXPECT_EQ(nv::e4m3_encode(-0.0f), 0x80);
}
