// The mma fragment repack of the CUDA runners (src/quant/mma_pack.h): every E4M3 byte's E5M3 code, round trips
// of random matrices (raw bytes, so every code and scale occurs, subnormal and negative scales included)
// against the checkpoint dequantization, padding left zero, and hand-computed fragment positions.
#include "quant/mma_pack.h"

#include "backend/cuda/kernels/grouped_layout.h"
#include "backend/cuda/kernels/mma_dequant.h"

#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace nv = fp4moe::nvfp4;
namespace mp = fp4moe::mma_pack;

namespace {

struct raw_matrix {
    std::int64_t rows, cols;
    std::vector<std::uint8_t> packed, scales;
    nv::matrix_view view() const { return {rows, cols, packed.data(), scales.data(), 1.0f}; }
};

// Arbitrary codes and scales; NaN scale bytes (0x7F, 0xFF) replaced, the rest of the byte range kept.
raw_matrix random_matrix(std::int64_t rows, std::int64_t cols, std::mt19937 &rng) {
    raw_matrix m{rows, cols, std::vector<std::uint8_t>(rows * cols / 2), std::vector<std::uint8_t>(rows * cols / 16)};
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto &b : m.packed) b = static_cast<std::uint8_t>(byte(rng));
    for (auto &s : m.scales) {
        s = static_cast<std::uint8_t>(byte(rng));
        if ((s & 0x7F) == 0x7F) s = 0x38;
    }
    return m;
}

float checkpoint_value(const raw_matrix &m, std::int64_t r, std::int64_t k) {
    const std::uint8_t b = m.packed[r * (m.cols / 2) + k / 2];
    return nv::e2m1_decode(k % 2 ? b >> 4 : b & 0xF) * nv::e4m3_decode(m.scales[r * (m.cols / 16) + k / 16]);
}

// Element `half` of a bf16x2 register as a float.
float bf16_value(std::uint32_t pair, int half) {
    const std::uint32_t bits = (half ? pair >> 16 : pair & 0xFFFF) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Register `reg` (0..3) of an A fragment from a packed word, through the kernels' bit tricks.
std::uint32_t fragment_register(std::uint32_t w, int reg) {
    namespace cu = fp4moe::cuda;
    return reg == 0   ? cu::e2m1x2_to_bf16x2<0>(w)
           : reg == 1 ? cu::e2m1x2_to_bf16x2<1>(w)
           : reg == 2 ? cu::e2m1x2_to_bf16x2<2>(w)
                      : cu::e2m1x2_to_bf16x2<3>(w);
}

} // namespace

TEST(MmaPack, ScaleCodeIsExactForEveryE4M3Byte) {
    for (int b = 0; b < 256; ++b) {
        const float v = std::fabs(nv::e4m3_decode(static_cast<std::uint8_t>(b)));
        auto c = mp::scale_code(static_cast<std::uint8_t>(b));
        if (std::isnan(v)) {
            EXPECT_FALSE(c.ok()) << b;
            continue;
        }
        ASSERT_TRUE(c.ok()) << b;
        EXPECT_EQ(mp::scale_code_value(c.value()), v) << "byte 0x" << std::hex << b;
        // The kernel's bf16 pattern 0x7000 | c << 4 must be the value times 2^112 (zero handled by zeroed codes).
        if (v != 0.0f) {
            const std::uint32_t bits = (0x7000u | static_cast<std::uint32_t>(c.value()) << 4) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            EXPECT_EQ(f, std::ldexp(v, 112)) << b;
        }
    }
}

TEST(MmaPack, RowsRoundTripAgainstTheCheckpoint) {
    std::random_device rd;
    const unsigned seed = rd();
    std::mt19937 rng(seed);
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{16, 64}, {33, 48}, {1, 16}, {64, 4096 + 80}}) {
        const auto m = random_matrix(rows, cols, rng);
        auto p = mp::pack_rows(m.view(), "w");
        ASSERT_TRUE(p.ok()) << p.get_status().message();
        EXPECT_EQ(p.value().tiles, (rows + 15) / 16);
        EXPECT_EQ(p.value().ksteps, (cols + 63) / 64);
        for (std::int64_t r = 0; r < p.value().tiles * 16; ++r)
            for (std::int64_t k = 0; k < p.value().ksteps * 64; ++k) {
                const float want = (r < rows && k < cols) ? checkpoint_value(m, r, k) : 0.0f;
                const float got = mp::packed_value(p.value(), r, k);
                ASSERT_EQ(got == 0.0f ? 0.0f : got, want == 0.0f ? 0.0f : want)
                    << "seed " << seed << " [" << rows << "x" << cols << "] row " << r << " k " << k;
            }
    }
}

TEST(MmaPack, GateUpInterleavesEightFeaturesPerTile) {
    std::random_device rd;
    const unsigned seed = rd();
    std::mt19937 rng(seed);
    const std::int64_t inter = 20, hidden = 80;
    const auto gate = random_matrix(inter, hidden, rng), up = random_matrix(inter, hidden, rng);
    auto p = mp::pack_gate_up(gate.view(), up.view(), "gate_up");
    ASSERT_TRUE(p.ok()) << p.get_status().message();
    ASSERT_EQ(p.value().tiles, 3);
    for (std::int64_t tile = 0; tile < 3; ++tile)
        for (int r = 0; r < 16; ++r)
            for (std::int64_t k = 0; k < 128; ++k) {
                const std::int64_t feature = tile * 8 + r % 8;
                const auto &src = r < 8 ? gate : up;
                const float want = (feature < inter && k < hidden) ? checkpoint_value(src, feature, k) : 0.0f;
                const float got = mp::packed_value(p.value(), tile * 16 + r, k);
                ASSERT_EQ(got == 0.0f ? 0.0f : got, want == 0.0f ? 0.0f : want)
                    << "seed " << seed << " tile " << tile << " row " << r << " k " << k;
            }
}

TEST(MmaPack, FragmentPositionsByHand) {
    // One tile, K = 64: element (row 9, k 16 + 11) is in K block t = 1 -> lane 4 * (9 % 8) + 1 = 5; within the
    // block 11 = 4q + 2u + c with q = 2, u = 1, c = 1 -> word 2, register a3 (row g + 8, upper k half), element 1.
    // Register 3 keeps e0, e1, the sign, m at bits 0, 1, 3, 4 (+16 for element 1): code 5 (0101: m = 1, e1 = 1)
    // sets bits 20 and 17 -> word 0x00120000 -> byte 2 of word 2 of lane 5: 5 * 16 + 2 * 4 + 2 = 90.
    std::vector<std::uint8_t> packed(16 * 32, 0), scales(16 * 4, 0x38); // scale 1.0
    packed[9 * 32 + (16 + 11) / 2] = 0x50;                              // k odd -> high nibble: code 5 (3.0)
    auto p = mp::pack_rows({16, 64, packed.data(), scales.data(), 1.0f}, "w");
    ASSERT_TRUE(p.ok());
    const auto &q = p.value().q;
    for (std::size_t i = 0; i < q.size(); ++i) EXPECT_EQ(q[i], i == 90u ? 0x12 : 0) << "byte " << i;
    // Scale code of (row 9, block 1): byte 2 * lane 5 + h 1 = 11; 1.0 = 2^0 -> (0 + 15) << 3.
    for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(p.value().scales[i], 15 << 3) << i;
    EXPECT_EQ(mp::packed_value(p.value(), 9, 27), 3.0f);
}

// Register 3's multiply (kernels/mma_dequant.h) for all 256 values of its eight bits, with every other bit of the
// word set and clear: each code bit lands on its bf16 place (e0, e1, sign, m at 0, 1, 3, 4 -> 7, 8, 15, 6; +16 for
// element 1), nothing else survives the mask, and no carry reaches a kept bit.
TEST(MmaPack, RegisterThreeSpreadIsExactForEveryCodePair) {
    namespace cu = fp4moe::cuda;
    const int from[4] = {0, 1, 3, 4}, to[4] = {7, 8, 15, 6};
    for (std::uint32_t v = 0; v < 256; ++v) {
        std::uint32_t bits = 0, want = 0;
        for (int i = 0; i < 8; ++i)
            if (v >> i & 1) bits |= 1u << (from[i % 4] + 16 * (i / 4)), want |= 1u << (to[i % 4] + 16 * (i / 4));
        EXPECT_EQ(cu::e2m1x2_to_bf16x2<3>(bits), want) << "bits 0x" << std::hex << bits;
        EXPECT_EQ(cu::e2m1x2_to_bf16x2<3>(bits | ~cu::kRegister3Bits), want) << "bits 0x" << std::hex << bits;
    }
}

// The kernels' bit tricks (kernels/mma_dequant.h, compiled here for the host) applied to packed words give every
// element's value x 2^-14 exactly: E2M1 placement, scale codes, and the fragment positions of the layout.
TEST(MmaPack, KernelDequantizationOfEveryFragmentElement) {
    std::random_device rd;
    const unsigned seed = rd();
    std::mt19937 rng(seed);
    const auto m = random_matrix(32, 128, rng);
    auto p = mp::pack_rows(m.view(), "w");
    ASSERT_TRUE(p.ok());
    for (std::int64_t tile = 0; tile < 2; ++tile)
        for (std::int64_t ks = 0; ks < 2; ++ks)
            for (int row = 0; row < 16; ++row)
                for (int pk = 0; pk < 64; ++pk) {
                    const int lane = 4 * (row % 8) + pk / 16, word = (pk % 16) / 4, u = (pk % 4) / 2, c = pk % 2;
                    const int reg = 2 * u + row / 8;
                    const std::size_t base = static_cast<std::size_t>(tile * 2 + ks);
                    std::uint32_t w, codes = 0;
                    std::memcpy(&w, p.value().q.data() + base * 512 + lane * 16 + word * 4, 4);
                    std::memcpy(&codes, p.value().scales.data() + base * 64 + lane * 2, 2);
                    const std::uint32_t pair = fragment_register(w, reg);
                    const std::uint32_t sc = row < 8 ? fp4moe::cuda::scale_code_to_bf16x2<0>(codes)
                                                     : fp4moe::cuda::scale_code_to_bf16x2<1>(codes);
                    const float code_value = mp::scale_code_value(static_cast<std::uint8_t>(codes >> (8 * (row / 8))));
                    const float got = bf16_value(pair, c) * (code_value == 0.0f ? 0.0f : bf16_value(sc, c));
                    const float want = std::ldexp(checkpoint_value(m, tile * 16 + row, ks * 64 + pk), -14);
                    ASSERT_EQ(got == 0.0f ? 0.0f : got, want == 0.0f ? 0.0f : want)
                        << "seed " << seed << " tile " << tile << " kstep " << ks << " row " << row << " k " << pk;
                }
}

// cuda.grouped's token tiles (kernels/grouped_layout.h): the gather's permutation of a 64-wide K chunk puts
// activation k at the position gate_up's epilogue computes, and a wgmma k-step over the permuted chunk with the
// packed A fragments (read the way a warp of the warpgroup holds them: lane 4 g + t, word q, register 2 u + row
// / 8, element c at mma-k 8 u + 2 t + c) is the dot product of the checkpoint rows with x.
TEST(MmaPack, GroupedTokenLayoutFeedsTheFragmentsInOrder) {
    namespace cu = fp4moe::cuda;
    std::random_device rd;
    const unsigned seed = rd();
    std::mt19937 rng(seed);
    const auto m = random_matrix(16, 64, rng);
    auto p = mp::pack_rows(m.view(), "w");
    ASSERT_TRUE(p.ok());
    std::uniform_int_distribution<int> small(-64, 64);
    float x[64];
    for (float &v : x) v = static_cast<float>(small(rng)) / 16.0f; // exact in bf16
    // The gather: 16-byte vector i of the permuted chunk holds, in its word w, the natural chunk's bf16 pair
    // grouped_vector_source_pair(i, w).
    float chunk[64];
    for (int i = 0; i < 8; ++i)
        for (int w = 0; w < 4; ++w)
            for (int c = 0; c < 2; ++c) chunk[8 * i + 2 * w + c] = x[2 * cu::grouped_vector_source_pair(i, w) + c];
    std::vector<int> seen(64, 0);
    for (int k = 0; k < 64; ++k) {
        const int pos = cu::grouped_k_position(k);
        ASSERT_TRUE(pos >= 0 && pos < 64) << k;
        ++seen[pos];
        EXPECT_EQ(chunk[pos], x[k]) << "the epilogue's position of k " << k << " is not where the gather put it";
    }
    for (int pos = 0; pos < 64; ++pos) EXPECT_EQ(seen[pos], 1) << "position " << pos;
    for (int row = 0; row < 16; ++row) {
        double mma = 0.0, want = 0.0;
        for (int q = 0; q < 4; ++q)
            for (int mk = 0; mk < 16; ++mk) {
                const int t = (mk % 8) / 2, u = mk / 8, c = mk % 2, lane = 4 * (row % 8) + t, reg = 2 * u + row / 8;
                std::uint32_t w, codes = 0;
                std::memcpy(&w, p.value().q.data() + lane * 16 + q * 4, 4);
                std::memcpy(&codes, p.value().scales.data() + lane * 2, 2);
                const std::uint32_t pair = fragment_register(w, reg);
                const std::uint8_t code = static_cast<std::uint8_t>(codes >> (8 * (row / 8)));
                const std::uint32_t sc =
                    row < 8 ? cu::scale_code_to_bf16x2<0>(codes) : cu::scale_code_to_bf16x2<1>(codes);
                const double a = code == 0 ? 0.0 : double(bf16_value(pair, c)) * bf16_value(sc, c);
                mma += a * chunk[16 * q + mk];
            }
        for (int k = 0; k < 64; ++k) want += std::ldexp(double(checkpoint_value(m, row, k)), -14) * x[k];
        EXPECT_NEAR(mma, want, 1e-9 * (1.0 + std::abs(want))) << "seed " << seed << " row " << row;
    }
}

// A gate_up CTA of 96 act features (three warpgroups) stages them by half chunk and stores 8-byte units: each
// feature must land where the 64-feature CTAs put it, (f / 64) 64 + grouped_k_position(f % 64), and the staging
// slots of a CTA must be distinct.
TEST(MmaPack, HalfChunkUnitsPlaceEveryFeatureWhereDownReadsIt) {
    namespace cu = fp4moe::cuda;
    for (int first = 0; first < 8 * 96; first += 96) {
        std::vector<int> staged(96, 0);
        for (int fl = 0; fl < 96; ++fl) {
            const int f = first + fl, s = cu::grouped_half_chunk_staging(fl, f);
            ASSERT_TRUE(s >= 0 && s < 96) << "feature " << f;
            ++staged[s];
            const int lh = s / 32, j = (s % 32) / 4, e = s % 4;
            EXPECT_EQ(cu::grouped_half_chunk_slot(first / 32 + lh, j) + e,
                      (f / 64) * 64 + cu::grouped_k_position(f % 64))
                << "feature " << f << " of the CTA starting at " << first;
        }
        for (int s = 0; s < 96; ++s) EXPECT_EQ(staged[s], 1) << "staging slot " << s << " of the CTA at " << first;
    }
}

// gate_up split in two launches (grouped_tactic::tail): the wide launch's blocks and the tail launch's block cover
// each of an expert's rows exactly once, every block within its launch's bn and not empty; and the unsplit launch
// does the same alone.
TEST(MmaPack, TailAndWideLaunchesCoverEveryRowOnce) {
    namespace cu = fp4moe::cuda;
    for (int split_bn : {64, 128, 192, 256})
        for (int tail_rows : {16, 32, 64})
            for (int c = 0; c <= 3 * split_bn + 1; ++c) {
                std::vector<int> seen(c, 0);
                auto cover = [&](int part, int bn) {
                    const cu::grouped_split s{part, split_bn, tail_rows};
                    for (int m = 0; m < cu::grouped_blocks(s, c, bn); ++m) {
                        int row0 = -1, rows = -1;
                        cu::grouped_block_rows(s, c, bn, m, row0, rows);
                        ASSERT_TRUE(rows > 0 && rows <= bn && row0 >= 0 && row0 + rows <= c)
                            << "part " << part << " c " << c << " block " << m << ": rows " << row0 << " + " << rows;
                        for (int r = row0; r < row0 + rows; ++r) ++seen[r];
                    }
                };
                SCOPED_TRACE(::testing::Message() << "split_bn " << split_bn << " tail_rows " << tail_rows);
                cover(cu::grouped_part_wide, split_bn);
                cover(cu::grouped_part_tail, tail_rows);
                for (int r = 0; r < c; ++r) ASSERT_EQ(seen[r], 1) << "row " << r << " of an expert of " << c;
                std::fill(seen.begin(), seen.end(), 0);
                cover(cu::grouped_part_all, split_bn);
                for (int r = 0; r < c; ++r) ASSERT_EQ(seen[r], 1) << "unsplit: row " << r << " of " << c;
            }
}

TEST(MmaPack, ZeroAndNegativeScales) {
    std::vector<std::uint8_t> packed(16 * 8, 0x22), scales(16, 0x38); // codes 2 (1.0) everywhere
    scales[0] = 0x00;                                                 // row 0: zero scale -> codes cleared
    scales[1] = 0xB8;                                                 // row 1: -1.0 -> signs flipped
    auto p = mp::pack_rows({16, 16, packed.data(), scales.data(), 1.0f}, "w");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(mp::packed_value(p.value(), 0, 3), 0.0f);
    EXPECT_EQ(mp::packed_value(p.value(), 1, 3), -1.0f);
    EXPECT_EQ(mp::packed_value(p.value(), 2, 3), 1.0f);
    std::vector<std::uint8_t> nan_scales(16, 0x7F);
    auto bad = mp::pack_rows({16, 16, packed.data(), nan_scales.data(), 1.0f}, "layers.3.mlp.experts.7.down_proj");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.get_status().message().find("layers.3.mlp.experts.7.down_proj"), std::string::npos);
    EXPECT_NE(bad.get_status().message().find("NaN"), std::string::npos);
}
