// Launch helpers shared by the MoE layer's kernels. Programmatic dependent launch (sm_90): each kernel lets the
// next one's CTAs become resident while it runs, waits for the previous kernel's results before reading them, and
// is launched with programmatic stream serialization (in stream capture the graph gets a programmatic edge), so
// the launch gaps between the layer's kernels hide behind work. CUDA-only header (included by .cu files).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace fp4moe::cuda {

/// Let the next kernel in the stream launch (its CTAs wait in wait_for_previous_kernel).
__device__ __forceinline__ void allow_next_kernel() {
    asm volatile("griddepcontrol.launch_dependents;");
}
/// Block until the previous kernel in the stream has completed and its memory is visible.
__device__ __forceinline__ void wait_for_previous_kernel() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

/// Launches `kernel` with programmatic stream serialization, `smem` dynamic shared memory bytes, and in
/// clusters of `cluster` CTAs along x when cluster > 1. Returns the launch status.
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, int cluster,
                       cudaStream_t stream, Args... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr, cfg.numAttrs = 1;
    if (cluster > 1) {
        attr[1].id = cudaLaunchAttributeClusterDimension;
        attr[1].val.clusterDim.x = static_cast<unsigned>(cluster);
        attr[1].val.clusterDim.y = 1;
        attr[1].val.clusterDim.z = 1;
        cfg.numAttrs = 2;
    }
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/// Launches `kernel` in plain stream order: its CTAs become resident only once the previous kernel has completed
/// (wait_for_previous_kernel then returns at once). For a grid whose CTAs would otherwise sit resident, waiting, while
/// a short chain of small kernels runs before it (gate_up after routing: decode_tactic::gate_up_in_order).
template <typename... Params, typename... Args>
cudaError_t launch_in_order(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                            Args... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/// Blocks of `b` covering `a` (a >= 0, b > 0).
constexpr int ceil_div(int a, int b) {
    return (a + b - 1) / b;
}

/// SMs of the current device (132, the H100/H200's, when the query fails): sizes persistent grids and K splits.
inline int current_sm_count() {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 132;
    return n;
}

} // namespace fp4moe::cuda
