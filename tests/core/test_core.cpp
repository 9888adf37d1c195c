// core: status/result, dtype table, bf16 conversion, the error tiers.
#include "core/error.h"
#include "fp4moe/bf16.h"
#include "fp4moe/dtype.h"
#include "fp4moe/status.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

using namespace fp4moe;

TEST(Status, OkAndError) {
    status s;
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(s.to_string(), "ok");
    status e{status_code::corrupt, "x.safetensors: bad header"};
    EXPECT_FALSE(e.ok());
    EXPECT_EQ(e.code(), status_code::corrupt);
    EXPECT_EQ(e.to_string(), "corrupt: x.safetensors: bad header");
}

TEST(Status, ResultHoldsValueOrStatus) {
    result<int> r = 7;
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), 7);
    EXPECT_TRUE(r.get_status().ok());
    result<int> bad = status{status_code::not_found, "nope"};
    EXPECT_FALSE(bad.ok());
    EXPECT_EQ(bad.get_status().code(), status_code::not_found);
}

TEST(Status, CatchStatusConvertsErrors) {
    auto s = catch_status([] { fail(status_code::invalid_argument, "tensor '{}' has {} dims", "w", 3); });
    EXPECT_EQ(s.code(), status_code::invalid_argument);
    EXPECT_EQ(s.message(), "tensor 'w' has 3 dims");
    EXPECT_TRUE(catch_status([] {}).ok());
    auto std_err = catch_status([] { throw std::runtime_error("boom"); });
    EXPECT_EQ(std_err.code(), status_code::internal);
}

TEST(Dtype, NamesSizesRoundTrip) {
    const std::pair<dtype, std::size_t> expect[] = {
        {dtype::f64, 8},     {dtype::f32, 4}, {dtype::f16, 2}, {dtype::bf16, 2}, {dtype::f8_e4m3, 1},
        {dtype::f8_e5m2, 1}, {dtype::i64, 8}, {dtype::i32, 4}, {dtype::i16, 2},  {dtype::i8, 1},
        {dtype::u64, 8},     {dtype::u32, 4}, {dtype::u16, 2}, {dtype::u8, 1},   {dtype::boolean, 1}};
    for (auto [t, size] : expect) {
        EXPECT_EQ(dtype_size(t), size) << dtype_name(t);
        auto back = dtype_from_name(dtype_name(t));
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(*back, t);
    }
    EXPECT_EQ(dtype_name(dtype::f8_e4m3), "F8_E4M3");
    EXPECT_EQ(dtype_name(dtype::boolean), "BOOL");
    EXPECT_FALSE(dtype_from_name("F4").has_value());
    EXPECT_FALSE(dtype_from_name("f32").has_value()); // names are case-sensitive, as in safetensors
}

TEST(Bf16, ExactValuesAndRounding) {
    EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3F80);
    EXPECT_EQ(float_to_bf16(-2.0f).bits, 0xC000);
    EXPECT_EQ(float_to_bf16(0.0f).bits, 0x0000);
    EXPECT_EQ(float_to_bf16(-0.0f).bits, 0x8000);
    // 1 + 2^-8 is exactly halfway between bf16 1.0 (even) and 1 + 2^-7: ties to even -> 1.0.
    EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f).bits, 0x3F80);
    // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd mantissa) and 1 + 2^-6 (even): rounds up.
    EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f).bits, 0x3F82);
    // Just above the tie rounds up.
    EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)).bits, 0x3F81);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7F80);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()).bits, 0x7F80); // rounds to +inf
    const bf16_t nan = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
    // A signalling NaN whose payload lives only in the low 16 bits must stay NaN, not become infinity.
    const float snan = std::bit_cast<float>(0x7F800001u);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(snan))));
}

TEST(Bf16, EveryBf16RoundTripsThroughFloat) {
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        const bf16_t v{static_cast<std::uint16_t>(b)};
        const float f = bf16_to_float(v);
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16(f).bits, v.bits) << "bits 0x" << std::hex << b;
    }
}
