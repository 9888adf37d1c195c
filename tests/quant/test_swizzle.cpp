// The 128x4 swizzled scale layout: hand-computed offsets, an independent reshape/permute formulation (the
// torch recipe of nvfp4.md section 3), round trips on shapes that need padding, zeroed padding.
#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace nv = fp4moe::nvfp4;

TEST(Swizzle, SizeRoundsRowsTo128AndColumnsTo4) {
    EXPECT_EQ(nv::swizzled_scales_size(1, 1), 128u * 4);
    EXPECT_EQ(nv::swizzled_scales_size(130, 5), 256u * 8);
    EXPECT_EQ(nv::swizzled_scales_size(128, 4), 512u);
    EXPECT_EQ(nv::swizzled_scales_size(257, 3), 384u * 4);
    EXPECT_EQ(nv::swizzled_scales_size(0, 0), 0u);
}

TEST(Swizzle, HandComputedOffsets) {
    // scale_cols = 5 -> Kb_pad = 8: a 128-row tile is 8 * 128 = 1024 bytes, a 4-column k-tile 512 bytes.
    EXPECT_EQ(nv::swizzled_scale_offset(0, 0, 5), 0u);
    EXPECT_EQ(nv::swizzled_scale_offset(0, 1, 5), 1u);
    EXPECT_EQ(nv::swizzled_scale_offset(1, 0, 5), 16u);           // (r % 32) * 16
    EXPECT_EQ(nv::swizzled_scale_offset(32, 0, 5), 4u);           // ((r % 128) / 32) * 4
    EXPECT_EQ(nv::swizzled_scale_offset(31, 3, 5), 31u * 16 + 3); // 499
    EXPECT_EQ(nv::swizzled_scale_offset(0, 4, 5), 512u);          // next k-tile
    EXPECT_EQ(nv::swizzled_scale_offset(127, 7, 5), 512u + 496 + 12 + 3);
    EXPECT_EQ(nv::swizzled_scale_offset(128, 0, 5), 1024u); // next row tile
    EXPECT_EQ(nv::swizzled_scale_offset(130, 4, 5), 1024u + 512 + 32);
}

TEST(Swizzle, MatchesReshapePermuteRecipe) {
    // padded [R_pad, Kb_pad] -> reshape (R_pad/128, 4, 32, Kb_pad/4, 4) -> permute (0, 3, 2, 1, 4), contiguous.
    for (auto [rows, kb] : {std::pair<std::int64_t, std::int64_t>{256, 12}, {130, 5}, {1, 1}, {257, 3}}) {
        const std::int64_t kb_pad = (kb + 3) / 4 * 4, k_tiles = kb_pad / 4;
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < kb; ++c) {
                const std::int64_t rt = r / 128, m4 = (r % 128) / 32, m32 = r % 32, kt = c / 4, k4 = c % 4;
                const std::int64_t expected = (((rt * k_tiles + kt) * 32 + m32) * 4 + m4) * 4 + k4;
                ASSERT_EQ(nv::swizzled_scale_offset(r, c, kb), static_cast<std::size_t>(expected)) << r << "," << c;
            }
        }
    }
}

TEST(Swizzle, RoundTripAndZeroPadding) {
    for (auto [rows, kb] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {130, 5}, {257, 3}, {128, 4}, {3, 64}}) {
        std::vector<std::uint8_t> linear(static_cast<std::size_t>(rows * kb));
        for (std::size_t i = 0; i < linear.size(); ++i) linear[i] = static_cast<std::uint8_t>(1 + i % 251); // never 0
        std::vector<std::uint8_t> sw(nv::swizzled_scales_size(rows, kb), 0xD5);
        ASSERT_TRUE(nv::swizzle_scales_128x4(linear, rows, kb, sw).ok());
        std::size_t nonzero = 0;
        for (std::uint8_t b : sw) nonzero += b != 0;
        EXPECT_EQ(nonzero, linear.size()) << "every padding byte is 0, every data byte lands somewhere distinct";
        std::vector<std::uint8_t> back(linear.size(), 0xD5);
        ASSERT_TRUE(nv::unswizzle_scales_128x4(sw, rows, kb, back).ok());
        EXPECT_EQ(back, linear) << rows << "x" << kb;
    }
}

TEST(Swizzle, RejectsSmallBuffers) {
    std::vector<std::uint8_t> linear(130 * 5), sw(nv::swizzled_scales_size(130, 5) - 1);
    EXPECT_FALSE(nv::swizzle_scales_128x4(linear, 130, 5, sw).ok());
    EXPECT_FALSE(nv::unswizzle_scales_128x4(sw, 130, 5, linear).ok());
    sw.resize(sw.size() + 1);
    EXPECT_FALSE(nv::swizzle_scales_128x4(std::span<const std::uint8_t>(linear).first(10), 130, 5, sw).ok());
    EXPECT_FALSE(nv::swizzle_scales_128x4(linear, -1, 5, sw).ok());
}
