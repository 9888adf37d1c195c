# Warning and sanitizer flags shared by every C++ target of the project.
add_library(fp4moe_flags INTERFACE)
target_compile_options(fp4moe_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FP4MOE_WERROR}>>:-Werror>
    # GCC 12 reports std::string copies at -O3 as overlapping memcpy (a false positive, GCC bug 105329).
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
target_include_directories(fp4moe_flags INTERFACE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)

if(FP4MOE_SANITIZE)
    message(STATUS "fp4moe: sanitizers ${FP4MOE_SANITIZE}")
    target_compile_options(fp4moe_flags INTERFACE
        $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${FP4MOE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
    target_link_options(fp4moe_flags INTERFACE -fsanitize=${FP4MOE_SANITIZE})
endif()
