// CUDA context helpers for the engine side: error checking and device discovery.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace fp4moe::cuda {

/// Aborts with file, line, call and the CUDA error string when `call` fails (programmer/environment error).
void check(cudaError_t err, const char *call, const char *file, int line);

/// Number of usable CUDA devices; 0 when there is no driver or no GPU (never aborts).
int device_count();

/// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for device `dev`.
std::string device_description(int dev);

} // namespace fp4moe::cuda

#define FP4MOE_CUDA_CHECK(call) ::fp4moe::cuda::check((call), #call, __FILE__, __LINE__)
