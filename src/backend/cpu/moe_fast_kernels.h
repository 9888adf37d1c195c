// Private to cpu.fast: the per-ISA row-dot kernels (scalar, AVX2, AVX-512), chosen at run time.
//
// A kernel computes, for R = 1 or 2 weight rows of one [N, K] matrix and m activation rows (fp32, K floats
// each), out[r][j] = sum_k w_r[k] * x_j[k] with w the dequantized weight *without* the global scale
// (E2M1 x E4M3 is exact in fp32), fp32 accumulation. Weights are dequantized in registers, one 16-element
// block at a time; when m exceeds the kernel's token tile the rows are first dequantized once into
// `scratch` so that each weight byte is decoded once per call. The result for one (row, token) depends only
// on K and the ISA, never on m, the tile or the thread: cpu.fast is deterministic for any thread count.
#pragma once

#include "core/cpu_features.h"
#include "fp4moe/bf16.h"

#include <cstdint>

namespace fp4moe::cpu::fast {

struct dot_job {
    int rows = 1;                    ///< R: 1 or 2 (1 to 4 for dot_nvfp4_p128)
    const std::uint8_t *q[4] = {};   ///< nvfp4: packed E2M1 row (K/2 bytes)
    const std::uint8_t *s[4] = {};   ///< nvfp4: E4M3 block scales of the row (K/16 bytes)
    const bf16_t *b[2] = {};         ///< bf16: the row (K values)
    std::int64_t k = 0;              ///< K (a multiple of 16 for nvfp4, of 128 for dot_nvfp4_p128)
    const float *const *x = nullptr; ///< m activation rows of K floats (any alignment)
    int m = 0;                       ///< tokens
    float *out[4] = {};              ///< out[r][j], j < m
    float *scratch = nullptr;        ///< kScratchPerK * K floats, used when m > the kernel's token tile
};

/// Scratch floats per unit of K that every kernel may use.
constexpr std::int64_t kScratchPerK = 3;

struct kernels {
    cpu_isa isa = cpu_isa::scalar;
    int tile_m = 1; ///< tokens per register tile
    void (*dot_nvfp4)(const dot_job &) = nullptr;
    void (*dot_bf16)(const dot_job &) = nullptr;
    /// NVFP4 with x in the p128 layout (K % 128 == 0); null where the ISA has none. Same contract otherwise,
    /// a different (fixed) summation order.
    void (*dot_nvfp4_p128)(const dot_job &) = nullptr;
};

/// The p128 layout of activations: within each 128-element chunk, element 8l + k (l < 16, k < 8) is stored at
/// k * 16 + l, so that nibble k of the 16 dwords of a chunk's 64 packed bytes meets one vector of x.
constexpr std::int64_t p128_index(std::int64_t i) {
    return (i & ~std::int64_t{127}) | ((i & 7) << 4) | ((i >> 3) & 15);
}

/// Kernels of one ISA (which the caller has checked the CPU supports).
const kernels &kernels_scalar();
const kernels &kernels_avx2();
const kernels &kernels_avx512();

/// E4M3 byte -> float for all 256 codes (0x7F / 0xFF are NaN); a constant-initialized table.
const float *e4m3_table();

} // namespace fp4moe::cpu::fast
