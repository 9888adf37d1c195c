// Run-time CPU feature detection (GCC/Clang __builtin_cpu_supports reads CPUID and XGETBV, so a feature
// the OS does not save state for is reported absent).
#include "core/cpu_features.h"

namespace fp4moe {

cpu_isa cpu_features::best() const {
    if (avx2 && avx512f && avx512bw && avx512vl) return cpu_isa::avx512;
    if (avx2) return cpu_isa::avx2;
    return cpu_isa::scalar;
}

const cpu_features &detect_cpu_features() {
    static const cpu_features f = [] {
        cpu_features r;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
        __builtin_cpu_init();
        r.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        r.avx512f = __builtin_cpu_supports("avx512f");
        r.avx512bw = __builtin_cpu_supports("avx512bw");
        r.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
        return r;
    }();
    return f;
}

const char *cpu_isa_name(cpu_isa isa) {
    switch (isa) {
    case cpu_isa::avx512:
        return "avx512";
    case cpu_isa::avx2:
        return "avx2";
    case cpu_isa::scalar:
        break;
    }
    return "scalar";
}

} // namespace fp4moe
