// Device-side random fills for benchmarks and tests: a counter-based hash (splitmix64 of seed + index), so the
// values do not depend on the launch shape and gigabytes fill at memory speed with no host pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp4moe::cuda {

/// bytes[i] uniform in [lo, hi].
cudaError_t fill_random_bytes(std::uint8_t *bytes, std::size_t n, std::uint64_t seed, std::uint8_t lo, std::uint8_t hi,
                              cudaStream_t stream);
/// v[i] uniform in [-scale, scale); with `bf16_values`, each rounded to the nearest bf16 (stored as fp32).
cudaError_t fill_random_floats(float *v, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream,
                               bool bf16_values = false);
/// v[i] = value.
cudaError_t fill_floats(float *v, std::size_t n, float value, cudaStream_t stream);
/// bf16 bit patterns uniform in [-scale, scale).
cudaError_t fill_random_bf16(std::uint16_t *v, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream);

} // namespace fp4moe::cuda
