#include "device.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace fp4moe::cuda {

void check(cudaError_t err, const char *call, const char *file, int line) {
    if (err == cudaSuccess) return;
    std::fprintf(stderr, "fp4moe: CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(err), cudaGetErrorString(err),
                 call, file, line);
    std::abort();
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); // clear the sticky "no driver" error so later probes start clean
        return 0;
    }
    return n;
}

std::string device_description(int dev) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "unknown device";
    return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                       static_cast<double>(p.totalGlobalMem) / (1ull << 30));
}

} // namespace fp4moe::cuda
