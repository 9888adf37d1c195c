// Counter-based random fills (random_fill.h).
#include "kernels/random_fill.h"

#include <cuda_bf16.h>

namespace fp4moe::cuda {
namespace {

__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float unit(std::uint64_t seed, std::size_t i) { // [-1, 1)
    return static_cast<float>(mix(seed * 0x100000001B3ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void bytes_kernel(std::uint8_t *p, std::size_t n, std::uint64_t seed, unsigned lo, unsigned span) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        p[i] = static_cast<std::uint8_t>(lo + mix(seed * 0x100000001B3ull + i) % span);
}
__global__ void floats_kernel(float *p, std::size_t n, std::uint64_t seed, float scale, bool constant, bool bf16) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const float v = constant ? scale : scale * unit(seed, i);
        p[i] = bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
    }
}
__global__ void bf16_kernel(std::uint16_t *p, std::size_t n, std::uint64_t seed, float scale) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const __nv_bfloat16 b = __float2bfloat16_rn(scale * unit(seed, i));
        p[i] = *reinterpret_cast<const std::uint16_t *>(&b);
    }
}

unsigned blocks_for(std::size_t n) {
    return static_cast<unsigned>(n / 256 + 1 < 8192 ? n / 256 + 1 : 8192);
}

} // namespace

cudaError_t fill_random_bytes(std::uint8_t *bytes, std::size_t n, std::uint64_t seed, std::uint8_t lo, std::uint8_t hi,
                              cudaStream_t stream) {
    if (hi < lo) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    bytes_kernel<<<blocks_for(n), 256, 0, stream>>>(bytes, n, seed, lo, static_cast<unsigned>(hi - lo) + 1);
    return cudaGetLastError();
}
cudaError_t fill_random_floats(float *v, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream,
                               bool bf16_values) {
    if (n == 0) return cudaSuccess;
    floats_kernel<<<blocks_for(n), 256, 0, stream>>>(v, n, seed, scale, false, bf16_values);
    return cudaGetLastError();
}
cudaError_t fill_floats(float *v, std::size_t n, float value, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    floats_kernel<<<blocks_for(n), 256, 0, stream>>>(v, n, 0, value, true, false);
    return cudaGetLastError();
}
cudaError_t fill_random_bf16(std::uint16_t *v, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    bf16_kernel<<<blocks_for(n), 256, 0, stream>>>(v, n, seed, scale);
    return cudaGetLastError();
}

} // namespace fp4moe::cuda
