// Launchers for the NVFP4 -> fp32 / bf16 dequantization kernel (nvfp4_dequant.cu). Host-includable: plain
// C++ compilers see only cuda_runtime_api.h types.
//
// Input is the checkpoint layout of include/fp4moe/nvfp4.h, in device memory:
//   packed [rows, cols/2] u8, element 2j in the low nibble of byte j;
//   scales [rows, cols/16] E4M3 bytes, linear row-major (not swizzled);
//   global_scale: the decode scale (ModelOpt weight_scale_2).
// Output [rows, cols] row-major: out = (e2m1 * e4m3) * global_scale in fp32, the same expression and order as
// fp4moe::nvfp4::dequantize, so the fp32 result matches it bit for bit; the bf16 variant is that fp32 value
// rounded to nearest even.
//
// Requirements (else cudaErrorInvalidValue, nothing launched): cols % 16 == 0, rows and cols >= 0, packed
// 4-byte aligned, out 16-byte aligned (cudaMalloc pointers are). rows * cols == 0 launches nothing. The
// launch is asynchronous on `stream`; the return value is the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp4moe::cuda {

cudaError_t nvfp4_dequant_f32(const std::uint8_t *packed, const std::uint8_t *scales, float global_scale,
                              std::int64_t rows, std::int64_t cols, float *out, cudaStream_t stream);

/// As nvfp4_dequant_f32; `out` receives bf16 bit patterns (__nv_bfloat16 layout).
cudaError_t nvfp4_dequant_bf16(const std::uint8_t *packed, const std::uint8_t *scales, float global_scale,
                               std::int64_t rows, std::int64_t cols, std::uint16_t *out, cudaStream_t stream);

} // namespace fp4moe::cuda
