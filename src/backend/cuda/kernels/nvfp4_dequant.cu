// NVFP4 weights -> fp32 or bf16, one thread per 8 elements (one u32 of packed codes, half a scale block).
//
// Numeric path: E2M1 nibble -> fp16 bits -> fp32 (exact) times 2^14; E4M3 scale -> fp16 by the hardware
// converter (exact: every E4M3 value is an fp16 normal) -> fp32; (e2m1 * e4m3) in fp32 is exact (<= 6
// significant bits); one rounding by the global scale; bf16 output rounds that fp32 value once more (RNE).
// Memory bound: 4 bytes of codes and 1/2 byte of scale in, 32 (fp32) or 16 (bf16) bytes out per thread.
#include "kernels/nvfp4_dequant.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace fp4moe::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;

// E2M1 (s e1 e0 m) placed as fp16 s | 0 0 0 e1 e0 | m 0..0: the fp16 value is the E2M1 value times 2^-14
// (bias 15 vs 1), the code 0.5 landing on an fp16 subnormal; the fp16 -> fp32 conversion is exact and the
// product by 2^14 is exact, with no dependence on fp32 denormal flushing.
__device__ __forceinline__ float e2m1_to_float(unsigned nibble) {
    __half_raw h;
    h.x = static_cast<unsigned short>(((nibble & 0x8u) << 12) | ((nibble & 0x7u) << 9));
    return __half2float(__half(h)) * 16384.0f;
}

__device__ __forceinline__ float e4m3_to_float(std::uint8_t code) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

__device__ __forceinline__ void store8(float *out, const float (&v)[kPerThread]) {
    auto *o = reinterpret_cast<float4 *>(out);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ __forceinline__ void store8(__nv_bfloat16 *out, const float (&v)[kPerThread]) {
    uint4 packed;
    unsigned *w = &packed.x;
    for (int i = 0; i < kPerThread / 2; ++i) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]); // .x = low half
        w[i] = *reinterpret_cast<const unsigned *>(&pair);
    }
    *reinterpret_cast<uint4 *>(out) = packed;
}

// Group g covers elements [8g, 8g + 8) of the row-major matrix: packed word g, scale g / 2 (16 | cols, so a
// group never straddles rows or blocks).
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    nvfp4_dequant_kernel(const std::uint32_t *__restrict__ packed, const std::uint8_t *__restrict__ scales,
                         float global_scale, std::int64_t groups, Out *__restrict__ out) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
        const std::uint32_t q = __ldg(packed + g);
        const float s = e4m3_to_float(__ldg(scales + g / 2));
        float v[kPerThread];
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) v[i] = __fmul_rn(e2m1_to_float((q >> (4 * i)) & 0xFu) * s, global_scale);
        store8(out + g * kPerThread, v);
    }
}

template <typename Out>
cudaError_t launch(const std::uint8_t *packed, const std::uint8_t *scales, float global_scale, std::int64_t rows,
                   std::int64_t cols, Out *out, cudaStream_t stream) {
    if (rows < 0 || cols < 0 || cols % 16 != 0) return cudaErrorInvalidValue;
    if (rows == 0 || cols == 0) return cudaSuccess;
    if (packed == nullptr || scales == nullptr || out == nullptr) return cudaErrorInvalidValue;
    if (reinterpret_cast<std::uintptr_t>(packed) % 4 != 0 || reinterpret_cast<std::uintptr_t>(out) % 16 != 0)
        return cudaErrorInvalidValue;
    const std::int64_t groups = rows * cols / kPerThread;
    // NOTE: a grid-stride loop, so the grid is capped; 1 << 20 blocks of 256 saturate any current GPU.
    const std::int64_t blocks = std::min<std::int64_t>((groups + kThreads - 1) / kThreads, std::int64_t{1} << 20);
    nvfp4_dequant_kernel<Out><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        reinterpret_cast<const std::uint32_t *>(packed), scales, global_scale, groups, out);
    return cudaGetLastError();
}

} // namespace

cudaError_t nvfp4_dequant_f32(const std::uint8_t *packed, const std::uint8_t *scales, float global_scale,
                              std::int64_t rows, std::int64_t cols, float *out, cudaStream_t stream) {
    return launch(packed, scales, global_scale, rows, cols, out, stream);
}

cudaError_t nvfp4_dequant_bf16(const std::uint8_t *packed, const std::uint8_t *scales, float global_scale,
                               std::int64_t rows, std::int64_t cols, std::uint16_t *out, cudaStream_t stream) {
    return launch(packed, scales, global_scale, rows, cols, reinterpret_cast<__nv_bfloat16 *>(out), stream);
}

} // namespace fp4moe::cuda
