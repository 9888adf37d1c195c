// The KV block allocator: allocation order, all-or-nothing growth, exhaustion, release, double-free detection,
// and the free-list invariant under a random workload.
#include "runtime/kv_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace fp4moe;

TEST(KvBlocks, BlocksFor) {
    kv_blocks kv(8, 16);
    EXPECT_EQ(kv.blocks_for(0), 0);
    EXPECT_EQ(kv.blocks_for(1), 1);
    EXPECT_EQ(kv.blocks_for(16), 1);
    EXPECT_EQ(kv.blocks_for(17), 2);
    block_table t;
    ASSERT_TRUE(kv.reserve(t, 17));
    EXPECT_EQ(kv.capacity(t), 32);
}

TEST(KvBlocks, AllocatesInOrderAndGrowsLazily) {
    kv_blocks kv(4, 4);
    block_table a;
    ASSERT_TRUE(kv.reserve(a, 5));
    EXPECT_EQ(a, (block_table{0, 1}));
    ASSERT_TRUE(kv.reserve(a, 8)); // still fits
    EXPECT_EQ(a.size(), 2u);
    ASSERT_TRUE(kv.reserve(a, 9));
    EXPECT_EQ(a, (block_table{0, 1, 2}));
    ASSERT_TRUE(kv.reserve(a, 1)); // never shrinks
    EXPECT_EQ(a.size(), 3u);
    EXPECT_EQ(kv.used_blocks(), 3);
    EXPECT_EQ(kv.free_blocks(), 1);
    EXPECT_TRUE(kv.check());
}

TEST(KvBlocks, ExhaustionIsAllOrNothing) {
    kv_blocks kv(3, 2);
    block_table a, b;
    ASSERT_TRUE(kv.reserve(a, 4));
    EXPECT_FALSE(kv.reserve(b, 3)); // needs 2, 1 free
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(kv.free_blocks(), 1);
    ASSERT_TRUE(kv.reserve(b, 2));
    EXPECT_EQ(kv.free_blocks(), 0);
    EXPECT_FALSE(kv.reserve(a, 5));
    EXPECT_EQ(a.size(), 2u);
    EXPECT_TRUE(kv.check());
}

TEST(KvBlocks, ReleaseReturnsEveryBlockAndReusesLifo) {
    kv_blocks kv(4, 1);
    block_table a, b;
    ASSERT_TRUE(kv.reserve(a, 2)); // 0 1
    ASSERT_TRUE(kv.reserve(b, 2)); // 2 3
    kv.release(a);
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(kv.free_blocks(), 2);
    EXPECT_EQ(kv.peak_used_blocks(), 4);
    block_table c;
    ASSERT_TRUE(kv.reserve(c, 1));
    EXPECT_EQ(c[0], 1); // the last block released comes back first
    kv.release(b);
    kv.release(c);
    EXPECT_EQ(kv.used_blocks(), 0);
    EXPECT_TRUE(kv.check());
}

TEST(KvBlocksDeathTest, DoubleFreeAborts) {
    kv_blocks kv(2, 4);
    block_table a;
    ASSERT_TRUE(kv.reserve(a, 1));
    block_table copy = a;
    kv.release(a);
    EXPECT_DEATH(kv.release(copy), "");
    block_table bogus{7};
    EXPECT_DEATH(kv.release(bogus), "");
}

TEST(KvBlocks, RandomWorkloadKeepsInvariant) {
    kv_blocks kv(64, 4);
    std::vector<block_table> tables(10);
    std::vector<std::int64_t> len(10, 0);
    std::mt19937 rng(7);
    for (int it = 0; it < 2000; ++it) {
        const auto i = rng() % tables.size();
        if (rng() % 4 == 0) {
            kv.release(tables[i]);
            len[i] = 0;
        } else {
            const std::int64_t want = len[i] + 1 + static_cast<std::int64_t>(rng() % 9);
            const auto before = tables[i];
            if (kv.reserve(tables[i], want)) {
                len[i] = want;
                EXPECT_GE(kv.capacity(tables[i]), want);
            } else {
                EXPECT_EQ(tables[i], before);
            }
        }
        std::int64_t owned = 0;
        for (const auto &t : tables) owned += static_cast<std::int64_t>(t.size());
        ASSERT_EQ(owned, kv.used_blocks());
    }
    ASSERT_TRUE(kv.check());
    std::vector<std::int32_t> all;
    for (const auto &t : tables) all.insert(all.end(), t.begin(), t.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a block is owned twice";
    for (auto &t : tables) kv.release(t);
    EXPECT_EQ(kv.used_blocks(), 0);
    EXPECT_TRUE(kv.check());
}
