// The Hopper-only pieces the sm_90a kernels share: TMA tensor maps and 2D tensor copies, the mbarrier arrive that
// releases a ring slot, register reallocation between warpgroups (setmaxnreg), and the runtime check that the
// device and driver can run them. CUDA-only header, sm_90a only.
#pragma once

#include "kernels/ptx.cuh"
#include "kernels/sm90a/wgmma.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp4moe::cuda::sm90 {

/// The driver's cuTensorMapEncodeTiled (through the runtime: no libcuda link), or null when the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

/// True when the current device is sm_90 (what these kernels are compiled for) and tensor maps can be encoded.
inline bool device_supported() {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    return major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
}

/// Map of a [rows, k] bf16 matrix (row pitch k elements, k % 8 == 0) read in boxes of 64 K x `box_rows` rows with
/// the 128-byte swizzle (wgmma::desc_k_major_sw128's layout); reads past either edge fill zeros.
inline cudaError_t make_k_major_map(CUtensorMap &map, const std::uint16_t *base, int rows, int k, int box_rows) {
    auto encode = tensor_map_encoder();
    if (!encode) return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
    const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t elem[2] = {1, 1};
    const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<std::uint16_t *>(base), dims,
                              strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/// One box of `map` at (x = K, y = row) into shared memory, completing `bar`'s transaction bytes.
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, std::uint64_t *bar, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];" ::"r"(ptx::smem_addr(dst)),
                 "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(ptx::smem_addr(bar))
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ptx::smem_addr(bar)) : "memory");
}
template <int Regs>
__device__ __forceinline__ void set_max_regs_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void set_max_regs_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

/// A consumer warpgroup's place in a ring of ST TMA stages (full barriers filled by a producer, empty barriers
/// with one arrival per consumer warp) and the release of a step's stage once its wgmma are done. Depth-1
/// pipelining releases the previous step's stage after this step's wgmma are issued (wait_group 1); depth 0
/// waits for this step's and releases its own.
template <int ST>
struct ring_cursor {
    int stage = 0, phase = 0, prev = -1; // prev: the pipelined step still to be released (-1: none)

    /// After a step's wgmma are committed: wait and release as described, then move to the next stage.
    template <bool Pipelined>
    __device__ __forceinline__ void release(std::uint64_t *empty, int lane) {
        if constexpr (Pipelined) {
            wgmma::wait<1>();
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
            prev = stage;
        } else {
            wgmma::wait<0>();
            if (lane == 0) mbar_arrive(&empty[stage]);
        }
        if (++stage == ST) stage = 0, phase ^= 1;
    }
    /// After the last pipelined step: wait for its wgmma and release its stage.
    __device__ __forceinline__ void drain(std::uint64_t *empty, int lane) {
        wgmma::wait<0>();
        if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
        prev = -1;
    }
};

} // namespace fp4moe::cuda::sm90
