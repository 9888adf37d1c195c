// Repack of NVFP4 checkpoint matrices into the mma fragment layout of the CUDA MoE runners (mma_pack.h).
#include "quant/mma_pack.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

namespace fp4moe::mma_pack {
namespace {

// Where element (tile row 0..15, k within the 64-wide kstep) goes: lane 4g + t owns K block t of the kstep
// (k = 16t .. 16t + 15); in its word q (the mma's k-slice), physical k = 16t + 4q + 2u + c is mma-k 2t + 8u + c:
// register j = 2u + (row >= 8) of the A fragment, element c of the pair.
struct slot {
    int lane, word, reg, elem;
};
slot slot_of(int row, int pk) {
    const int hi = row / 8;
    const int t = pk / 16, q = (pk % 16) / 4, u = (pk % 4) / 2, c = pk % 2;
    return {4 * (row % 8) + t, q, u * 2 + hi, c};
}
// Bit positions in the 32-bit word of an E2M1 code's bits (m, e0, e1, sign) for register j, element c (see
// mma_pack.h): register 0 at its bf16 positions, registers 1 and 2 rotated right by 10 and 13, register 3 in the
// bits left (m, e0, e1, sign at 4, 0, 1, 3; kernels/mma_dequant.h moves them with one multiply).
void bit_positions(int reg, int elem, int (&pos)[4]) {
    const int base = 16 * elem;
    if (reg < 3) {
        static constexpr int kRotate[3] = {0, 10, 13};
        const int target[4] = {base + 6, base + 7, base + 8, base + 15}; // m, e0, e1, sign in bf16
        for (int bit = 0; bit < 4; ++bit) pos[bit] = (target[bit] - kRotate[reg] + 32) % 32;
    } else {
        pos[0] = base + 4, pos[1] = base + 0, pos[2] = base + 1, pos[3] = base + 3;
    }
}
// Byte of the scale code of (tile row, K block t of the kstep) within the tile-kstep's 64 bytes.
int scale_byte(int row, int t) {
    return (4 * (row % 8) + t) * 2 + row / 8;
}

std::uint32_t &word_at(std::vector<std::uint8_t> &q, std::size_t off) {
    return *reinterpret_cast<std::uint32_t *>(q.data() + off);
}

std::uint8_t code_at(const nvfp4::matrix_view &m, std::int64_t row, std::int64_t k) {
    const std::uint8_t b = m.packed[row * (m.cols / 2) + k / 2];
    return (k % 2) ? b >> 4 : b & 0xF;
}

// Fills tile `tile` of `out` from a source row function: row_of(r) gives the (matrix, row) of tile row r or a
// null matrix for padding.
template <typename RowOf>
status fill_tile(packed_matrix &out, std::int64_t tile, std::int64_t k_total, RowOf row_of, const char *what) {
    for (int r = 0; r < kTileRows; ++r) {
        const auto [m, row] = row_of(r);
        if (!m) continue;
        for (std::int64_t blk = 0; blk < k_total / nvfp4::kBlock; ++blk) {
            const std::uint8_t raw = m->scales[row * (k_total / nvfp4::kBlock) + blk];
            auto code = scale_code(raw);
            if (!code.ok())
                return {status_code::invalid_argument,
                        fmt::format("{}: row {} block {}: {}", what, row, blk, code.get_status().message())};
            const bool negative = (raw & 0x80) != 0;
            const std::int64_t s = blk / 4;
            const int t = static_cast<int>(blk % 4);
            const std::size_t sbase = static_cast<std::size_t>(tile * out.ksteps + s) * kTileStepScaleBytes;
            out.scales[sbase + scale_byte(r, t)] = code.value();
            const std::size_t qbase = static_cast<std::size_t>(tile * out.ksteps + s) * kTileStepBytes;
            for (int kk = 0; kk < 16; ++kk) {
                std::uint8_t c = code.value() == 0 ? 0 : code_at(*m, row, blk * 16 + kk);
                if (negative) c ^= 0x8;
                const slot sl = slot_of(r, t * 16 + kk);
                int pos[4];
                bit_positions(sl.reg, sl.elem, pos);
                std::uint32_t &word = word_at(out.q, qbase + sl.lane * 16 + sl.word * 4);
                for (int bit = 0; bit < 4; ++bit) word |= static_cast<std::uint32_t>((c >> bit) & 1) << pos[bit];
            }
        }
    }
    return status::success();
}

packed_matrix sized(std::int64_t tiles, std::int64_t k) {
    packed_matrix p;
    p.tiles = tiles;
    p.ksteps = (k + kStepK - 1) / kStepK;
    p.q.assign(static_cast<std::size_t>(tiles * p.ksteps) * kTileStepBytes, 0);
    p.scales.assign(static_cast<std::size_t>(tiles * p.ksteps) * kTileStepScaleBytes, 0);
    return p;
}

status check(const nvfp4::matrix_view &m, const char *what) {
    if (m.rows <= 0 || m.cols <= 0 || m.cols % nvfp4::kBlock != 0 || !m.packed || !m.scales)
        return {status_code::invalid_argument,
                fmt::format("{}: [{}, {}] is not a packable NVFP4 matrix (K must be a positive multiple of 16)", what,
                            m.rows, m.cols)};
    return status::success();
}

} // namespace

result<std::uint8_t> scale_code(std::uint8_t e4m3) {
    const float v = std::fabs(nvfp4::e4m3_decode(e4m3));
    if (std::isnan(v)) return status{status_code::invalid_argument, fmt::format("E4M3 scale 0x{:02X} is NaN", e4m3)};
    if (v == 0.0f) return std::uint8_t{0};
    int exp = 0;
    const float frac = std::frexp(v, &exp); // v = frac * 2^exp, frac in [0.5, 1)
    const int e = exp - 1;                  // v = (2 frac) * 2^e
    const int m = static_cast<int>((2.0f * frac - 1.0f) * 8.0f);
    return static_cast<std::uint8_t>((e + 15) << 3 | m);
}

float scale_code_value(std::uint8_t code) {
    if (code == 0) return 0.0f;
    return std::ldexp(1.0f + static_cast<float>(code & 7) / 8.0f, (code >> 3) - 15);
}

result<packed_matrix> pack_rows(const nvfp4::matrix_view &m, const char *what) {
    if (auto st = check(m, what); !st.ok()) return st;
    packed_matrix p = sized((m.rows + kTileRows - 1) / kTileRows, m.cols);
    for (std::int64_t tile = 0; tile < p.tiles; ++tile) {
        auto st = fill_tile(
            p, tile, m.cols,
            [&](int r) -> std::pair<const nvfp4::matrix_view *, std::int64_t> {
                const std::int64_t row = tile * kTileRows + r;
                return {row < m.rows ? &m : nullptr, row};
            },
            what);
        if (!st.ok()) return st;
    }
    return p;
}

result<packed_matrix> pack_gate_up(const nvfp4::matrix_view &gate, const nvfp4::matrix_view &up, const char *what) {
    if (auto st = check(gate, what); !st.ok()) return st;
    if (auto st = check(up, what); !st.ok()) return st;
    if (gate.rows != up.rows || gate.cols != up.cols)
        return status{status_code::invalid_argument, fmt::format("{}: gate [{}, {}] and up [{}, {}] differ", what,
                                                                 gate.rows, gate.cols, up.rows, up.cols)};
    packed_matrix p = sized((gate.rows + 7) / 8, gate.cols);
    for (std::int64_t tile = 0; tile < p.tiles; ++tile) {
        auto st = fill_tile(
            p, tile, gate.cols,
            [&](int r) -> std::pair<const nvfp4::matrix_view *, std::int64_t> {
                const std::int64_t row = tile * 8 + r % 8;
                if (row >= gate.rows) return {nullptr, 0};
                return {r < 8 ? &gate : &up, row};
            },
            what);
        if (!st.ok()) return st;
    }
    return p;
}

float packed_value(const packed_matrix &p, std::int64_t row, std::int64_t k) {
    const std::int64_t tile = row / kTileRows, s = k / kStepK;
    const int r = static_cast<int>(row % kTileRows), pk = static_cast<int>(k % kStepK);
    const slot sl = slot_of(r, pk);
    const std::size_t qbase = static_cast<std::size_t>(tile * p.ksteps + s) * kTileStepBytes;
    std::uint32_t word;
    std::memcpy(&word, p.q.data() + qbase + sl.lane * 16 + sl.word * 4, 4);
    int pos[4];
    bit_positions(sl.reg, sl.elem, pos);
    std::uint8_t c = 0;
    for (int bit = 0; bit < 4; ++bit) c |= static_cast<std::uint8_t>(((word >> pos[bit]) & 1) << bit);
    const std::size_t sbase = static_cast<std::size_t>(tile * p.ksteps + s) * kTileStepScaleBytes;
    return nvfp4::e2m1_decode(c) * scale_code_value(p.scales[sbase + scale_byte(r, pk / 16)]);
}

} // namespace fp4moe::mma_pack
