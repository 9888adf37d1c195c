# CUDA is optional. AUTO enables it when a CUDA compiler is found. Hopper kernels that use wgmma/TMA build
# for sm_90a (FP4MOE_CUDA_ARCH_HOPPER); the others for FP4MOE_CUDA_ARCHS (sm_90 plus PTX). cudart is linked
# statically so a binary built here runs on a GPU machine with a compatible driver.
set(FP4MOE_CUDA_ARCHS "90" CACHE STRING "CUDA architectures for generic kernels (CMake CUDA_ARCHITECTURES form)")
set(FP4MOE_CUDA_ARCH_HOPPER "90a" CACHE STRING "Architecture for wgmma/TMA kernels")

set(FP4MOE_HAVE_CUDA OFF)
if(NOT FP4MOE_CUDA STREQUAL "OFF")
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        set(CMAKE_CUDA_ARCHITECTURES ${FP4MOE_CUDA_ARCHS})
        enable_language(CUDA)
        # CMake 3.25 knows no C++20 flag for nvcc (added in 3.26): name it ourselves.
        if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
            set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
            set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
        endif()
        set(CMAKE_CUDA_STANDARD 20)
        set(CMAKE_CUDA_STANDARD_REQUIRED ON)
        set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
        find_package(CUDAToolkit REQUIRED)
        set(FP4MOE_HAVE_CUDA ON)
    elseif(FP4MOE_CUDA STREQUAL "ON")
        message(FATAL_ERROR "FP4MOE_CUDA=ON but no CUDA compiler was found (is nvcc on PATH?)")
    endif()
endif()
message(STATUS "fp4moe: CUDA ${FP4MOE_HAVE_CUDA} (archs: ${FP4MOE_CUDA_ARCHS}; hopper: ${FP4MOE_CUDA_ARCH_HOPPER})")
