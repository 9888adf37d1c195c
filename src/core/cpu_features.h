// Instruction-set extensions of the CPU this process runs on, detected at run time, so one x86-64 binary
// carries AVX2 and AVX-512 kernels (compiled with per-function target attributes) and picks among them.
#pragma once

namespace fp4moe {

/// SIMD levels the CPU kernels are written for, lowest first.
enum class cpu_isa : int {
    scalar = 0, ///< portable C++ (any architecture)
    avx2 = 1,   ///< AVX2 + FMA
    avx512 = 2, ///< AVX-512 F + BW + VL (+ AVX2/FMA)
};

struct cpu_features {
    bool avx2 = false; ///< AVX2 and FMA both present
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;

    /// Best level every flag of which is present.
    cpu_isa best() const;
};

/// The features of this CPU, detected once (thread-safe) with __builtin_cpu_supports; all false off x86.
const cpu_features &detect_cpu_features();

/// "scalar", "avx2" or "avx512".
const char *cpu_isa_name(cpu_isa isa);

} // namespace fp4moe
