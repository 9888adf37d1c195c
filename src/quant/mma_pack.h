// The NVFP4 weight layout of the CUDA MoE runners (cuda.decode, cuda.grouped): checkpoint matrices repacked at
// load time so that one 16-byte load per lane yields the `mma.m16n8k16` A fragments of four 16x16 tiles (which
// are also wgmma's register-A fragments, four tiles per m64), and block scales re-encoded so that turning them
// into bf16 is one integer op.
//
// Tiles: 16 weight rows x 64 K ("ksteps"). K is padded to a multiple of 64 and rows to a multiple of 16 with
// zero weights. The mma sums over k, so any order of k shared by A and B gives the same product: within a
// kstep, lane L = 4 g + t (g = L / 4, t = L % 4) takes the 16 K of block t (k = 16t .. 16t + 15), so that its
// B operand (activations, row-major) is one contiguous 32-byte load, and it needs the block scales of block t
// only. Lane L owns one 32-bit word per mma k-slice q = 0..3, holding the eight E2M1 codes of its A fragment
// registers a0..a3 (two elements each), with k(q, u, c) = 16t + 4q + 2u + c:
//   a0: W[g][k(q,0,c)]   a1: W[g+8][k(q,0,c)]   a2: W[g][k(q,1,c)]   a3: W[g+8][k(q,1,c)]   (c = element 0, 1)
// (mma-k 2t + c for u = 0, 2t + 8 + c for u = 1), and the matching B words are 2q and 2q + 1 of the lane's 32
// bytes x[16t .. 16t + 15]. Bits, so that dequantization costs few instructions: a bf16 pair wants an
// element's sign at bit 15 (+16 c) and its e1 e0 m at bits 8..6 (+16 c). Register 0 is stored at exactly those
// positions (one mask), registers 1 and 2 rotated right by 10 and 13 (a funnel shift and a mask each). Register
// 3 takes the eight bits left: e0, e1, sign, m at 0, 1, 3, 4 (+16 c), which one multiply by 2^2 + 2^7 + 2^12
// spreads to their places with no carry into them (a mask, an IMAD and a mask; kernels/mma_dequant.h).
// Words of a lane are contiguous (16 bytes, little-endian), lanes contiguous (512 bytes per tile-kstep), then
// ksteps, then tiles: q[((tile * ksteps + s) * 32 + L) * 16 + 4 q + byte].
//
// Scales: per tile-kstep 64 bytes, two per lane: byte 2 L + h is the code of (row g + 8 h, block t), so a warp
// reads them with one coalesced 2-byte load per lane. Each E4M3 scale is re-encoded as an unsigned E5M3 code
// c = (e + 15) << 3 | m for a scale 2^e (1 + m / 8), e in [-9, 8] (every E4M3 value, subnormals included, is
// exact), c = 0 for a zero scale. In bf16 bits, 0x7000 | c << 4 is scale * 2^112; an E2M1 code placed in bf16
// bits as above is its value * 2^-126; their product (exact: 2 x 4 significant bits) is w * 2^-14, which the
// kernel's epilogue undoes with the fp32 global scale. A block with a zero scale gets zero codes (0 x w = 0
// either way; the kernel's code 0 is not a zero bf16). A negative scale flips the block's signs (exact).
//
// Gate/up fusion: pack_gate_up interleaves the two matrices per tile (rows 0..7 gate rows 8i..8i+7, rows 8..15
// the same up rows), so one mma accumulator holds gate and up of the same feature: SiLU(gate) * up in registers.
#pragma once

#include "fp4moe/nvfp4.h"
#include "fp4moe/status.h"

#include <cstdint>
#include <vector>

namespace fp4moe::mma_pack {

inline constexpr int kTileRows = 16;
inline constexpr int kStepK = 64;
inline constexpr int kLanes = 32;
inline constexpr int kTileStepBytes = 512;     ///< E2M1 bytes of one tile-kstep
inline constexpr int kTileStepScaleBytes = 64; ///< scale codes of one tile-kstep
inline constexpr int kScaleCodeBias = 14;      ///< the packed product is w * 2^-14

/// One repacked matrix (or a fused gate/up pair).
struct packed_matrix {
    std::int64_t tiles = 0;           ///< 16-row tiles
    std::int64_t ksteps = 0;          ///< 64-wide K steps (K padded)
    std::vector<std::uint8_t> q;      ///< tiles * ksteps * 512 bytes (32-bit words, little-endian)
    std::vector<std::uint8_t> scales; ///< tiles * ksteps * 64 codes
};

/// E5M3 code of an E4M3 scale byte's magnitude (see above); error for NaN.
result<std::uint8_t> scale_code(std::uint8_t e4m3);
/// The value a code stands for (0 for code 0).
float scale_code_value(std::uint8_t code);

/// Packs an [N, K] checkpoint matrix (K % 16 == 0). Errors name the matrix by `what` (NaN scale, shapes).
result<packed_matrix> pack_rows(const nvfp4::matrix_view &m, const char *what);
/// Packs gate [I, H] and up [I, H] interleaved per tile of 8 features: tiles = ceil(I / 8).
result<packed_matrix> pack_gate_up(const nvfp4::matrix_view &gate, const nvfp4::matrix_view &up, const char *what);

/// Element (row, k) of a packed matrix as a float (tile-local row order as packed: for gate/up tiles, rows 0..7
/// gate and 8..15 up); the global scale is not applied. For round-trip tests and debugging.
float packed_value(const packed_matrix &p, std::int64_t row, std::int64_t k);

} // namespace fp4moe::mma_pack
