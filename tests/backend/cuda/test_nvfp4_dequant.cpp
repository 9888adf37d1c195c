// The NVFP4 dequant kernel against the CPU reference fp4moe::nvfp4::dequantize:
// fp32 output bit-exact, bf16 output equal to the RNE rounding of the CPU fp32
// value. Outputs are poisoned with 0xD5 before each run.
#include "cuda_test_util.h"
#include "device.h"
#include "kernels/nvfp4_dequant.h"

#include "fp4moe/nvfp4.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace nv = fp4moe::nvfp4;

namespace {

using fp4moe::test::device_buffer;

// Quantized random weights (rows of very different magnitudes, some all-zero
// blocks).
nv::matrix quantized_random(std::int64_t rows, std::int64_t cols, std::mt19937 &rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> expo(-5.0f, 5.0f);
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        const float scale = std::exp2(expo(rng));
        for (std::int64_t c = 0; c < cols; ++c)
            w[static_cast<std::size_t>(r * cols + c)] = (c / 16) % 7 == 3 ? 0.0f : normal(rng) * scale;
    }
    auto q = nv::quantize(w, rows, cols);
    EXPECT_TRUE(q.ok()) << q.get_status().to_string();
    return q.value();
}

// Arbitrary bytes: every code in every position, subnormal and zero scales
// (0x7F / 0xFF NaN scales excluded), an awkward global scale, so rounding by
// the global actually happens.
nv::matrix raw_random(std::int64_t rows, std::int64_t cols, std::mt19937 &rng) {
    nv::matrix m;
    m.rows = rows;
    m.cols = cols;
    m.packed.resize(static_cast<std::size_t>(rows * cols / 2));
    m.scales.resize(static_cast<std::size_t>(rows * cols / 16));
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto &b : m.packed) b = static_cast<std::uint8_t>(byte(rng));
    for (auto &s : m.scales) {
        do s = static_cast<std::uint8_t>(byte(rng));
        while ((s & 0x7F) == 0x7F);
    }
    m.global_scale = 0.0123456789f;
    return m;
}

void check_against_cpu(const nv::matrix &m) {
    SCOPED_TRACE(std::to_string(m.rows) + " x " + std::to_string(m.cols));
    const auto n = static_cast<std::size_t>(m.rows * m.cols);
    std::vector<float> want(n);
    ASSERT_TRUE(nv::dequantize(nv::view(m), want).ok());

    device_buffer<std::uint8_t> packed(m.packed.size()), scales(m.scales.size());
    device_buffer<float> out32(n);
    device_buffer<std::uint16_t> out16(n);
    FP4MOE_CUDA_CHECK(cudaMemcpy(packed.ptr, m.packed.data(), m.packed.size(), cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemcpy(scales.ptr, m.scales.data(), m.scales.size(), cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemset(out32.ptr, 0xD5, n * sizeof(float)));
    FP4MOE_CUDA_CHECK(cudaMemset(out16.ptr, 0xD5, n * sizeof(std::uint16_t)));

    ASSERT_EQ(
        fp4moe::cuda::nvfp4_dequant_f32(packed.ptr, scales.ptr, m.global_scale, m.rows, m.cols, out32.ptr, nullptr),
        cudaSuccess);
    ASSERT_EQ(
        fp4moe::cuda::nvfp4_dequant_bf16(packed.ptr, scales.ptr, m.global_scale, m.rows, m.cols, out16.ptr, nullptr),
        cudaSuccess);
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> got32(n);
    std::vector<std::uint16_t> got16(n);
    FP4MOE_CUDA_CHECK(cudaMemcpy(got32.data(), out32.ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
    FP4MOE_CUDA_CHECK(cudaMemcpy(got16.data(), out16.ptr, n * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (std::size_t i = 0; i < n && bad < 10; ++i) {
        const std::uint32_t w32 = std::bit_cast<std::uint32_t>(want[i]), g32 = std::bit_cast<std::uint32_t>(got32[i]);
        const std::uint16_t w16 = fp4moe::float_to_bf16(want[i]).bits;
        if (w32 != g32 || w16 != got16[i]) ++bad;
        EXPECT_EQ(g32, w32) << "fp32 element " << i << ": got " << got32[i] << ", want " << want[i];
        EXPECT_EQ(got16[i], w16) << "bf16 element " << i << " (want " << want[i] << ")";
    }
}

} // namespace

TEST(CudaNvfp4Dequant, QuantizedWeightsBitExact) {
    SKIP_WITHOUT_GPU();
    std::mt19937 rng(7);
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 16},
                              {1, 4096},
                              {3, 16},
                              {130, 48},
                              {257, 160},
                              {1000, 2880},
                              {4096, 4096}})
        check_against_cpu(quantized_random(rows, cols, rng));
}

TEST(CudaNvfp4Dequant, ArbitraryBytesBitExact) {
    SKIP_WITHOUT_GPU();
    std::mt19937 rng(8);
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 16}, {129, 32}, {2048, 1024}})
        check_against_cpu(raw_random(rows, cols, rng));
}

TEST(CudaNvfp4Dequant, RejectsBadArguments) {
    SKIP_WITHOUT_GPU();
    device_buffer<std::uint8_t> buf(1024);
    device_buffer<float> out(1024);
    using fp4moe::cuda::nvfp4_dequant_f32;
    EXPECT_EQ(nvfp4_dequant_f32(buf.ptr, buf.ptr, 1.0f, 1, 24, out.ptr, nullptr), cudaErrorInvalidValue) << "K % 16";
    EXPECT_EQ(nvfp4_dequant_f32(buf.ptr, buf.ptr, 1.0f, -1, 16, out.ptr, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(nvfp4_dequant_f32(buf.ptr + 1, buf.ptr, 1.0f, 1, 16, out.ptr, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(nvfp4_dequant_f32(buf.ptr, buf.ptr, 1.0f, 1, 16, out.ptr + 1, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(nvfp4_dequant_f32(nullptr, nullptr, 1.0f, 0, 16, nullptr, nullptr), cudaSuccess) << "empty";
}
