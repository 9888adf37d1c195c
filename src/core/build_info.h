// What this binary is: version, commit, build type, CUDA and its architectures (for `--version`).
#pragma once

namespace fp4moe {

struct build_info {
    const char *version;
    const char *commit;     ///< short git hash, "-dirty" when built from uncommitted changes
    const char *build_type; ///< CMAKE_BUILD_TYPE
    bool cuda;              ///< compiled with the CUDA backend
    const char *cuda_archs; ///< comma-separated CMake architecture list, empty without CUDA
    const char *sanitize;   ///< FP4MOE_SANITIZE, empty when none
};

const build_info &get_build_info();

} // namespace fp4moe
