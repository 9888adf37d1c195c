# build_info.cpp is regenerated at every build (only rewritten when the commit changes), so `--version`
# names the commit the binary was built from, not the one CMake was configured at.
set(FP4MOE_BUILD_INFO_CPP ${PROJECT_BINARY_DIR}/generated/build_info.cpp)
if(FP4MOE_HAVE_CUDA)
    set(_fp4moe_archs "${FP4MOE_CUDA_ARCHS},${FP4MOE_CUDA_ARCH_HOPPER}")
    string(REPLACE ";" "," _fp4moe_archs "${_fp4moe_archs}")
else()
    set(_fp4moe_archs "")
endif()
add_custom_target(fp4moe_build_info
    COMMAND ${CMAKE_COMMAND}
        -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${FP4MOE_BUILD_INFO_CPP}
        -DVERSION=${PROJECT_VERSION} -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
        -DCUDA=${FP4MOE_HAVE_CUDA} "-DARCHS=${_fp4moe_archs}" "-DSANITIZE=${FP4MOE_SANITIZE}"
        -P ${PROJECT_SOURCE_DIR}/cmake/write_build_info.cmake
    BYPRODUCTS ${FP4MOE_BUILD_INFO_CPP}
    COMMENT "fp4moe build info"
    VERBATIM)
