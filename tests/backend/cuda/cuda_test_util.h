// Helpers of the GPU tests: skip cleanly without a GPU, and an owning device buffer with upload, download and
// poisoning (float outputs with 0xFF bytes = NaN, integer outputs with 0xD5: -1 is a value the plan writes).
#pragma once

#include "device.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

/// Skips the test, saying why, when no CUDA device can be used.
#define SKIP_WITHOUT_GPU()                                                                                             \
    do {                                                                                                               \
        if (fp4moe::cuda::device_count() == 0) {                                                                       \
            int n = 0;                                                                                                 \
            const cudaError_t e = cudaGetDeviceCount(&n);                                                              \
            (void)cudaGetLastError();                                                                                  \
            GTEST_SKIP() << "no CUDA device: " << (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));            \
        }                                                                                                              \
    } while (0)

namespace fp4moe::test {

/// `count` elements of T on the current device (at least one allocated), freed on destruction.
template <typename T>
struct device_buffer {
    T *ptr = nullptr;
    std::size_t n = 0;
    explicit device_buffer(std::size_t count) : n(count) {
        FP4MOE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&ptr), std::max<std::size_t>(n, 1) * sizeof(T)));
    }
    explicit device_buffer(const std::vector<T> &v) : device_buffer(v.size()) { upload(v); }
    ~device_buffer() { cudaFree(ptr); }
    device_buffer(const device_buffer &) = delete;
    device_buffer &operator=(const device_buffer &) = delete;
    void upload(const std::vector<T> &v) {
        FP4MOE_CUDA_CHECK(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> v(n);
        FP4MOE_CUDA_CHECK(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
        return v;
    }
    void poison(cudaStream_t s = nullptr) {
        const int byte = std::is_floating_point_v<T> ? 0xFF : 0xD5;
        FP4MOE_CUDA_CHECK(cudaMemsetAsync(ptr, byte, std::max<std::size_t>(n, 1) * sizeof(T), s));
    }
};

} // namespace fp4moe::test
