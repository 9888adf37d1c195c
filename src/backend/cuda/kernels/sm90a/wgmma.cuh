// wgmma (sm_90a) with the A operand in registers, bf16 x bf16 -> fp32, m64 x N x k16, B from shared memory
// through a descriptor, for every token width N = 8 .. 256 in steps of 8 (the
// grouped runner's narrow widths serve an expert's last, partly filled token block). CUDA-only header, sm_90a only.
//
// Register layouts (PTX ISA, "Register fragments and shared memory matrix layouts" for wgmma .m64nNk16):
// A: warp w of the warpgroup holds rows 16 w .. 16 w + 15 in the mma.m16n8k16 A-fragment layout (lane 4 g + t:
// a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)). D: d[4 j + i] is row
// 16 w + g + 8 (i / 2), column 8 j + 2 t + i % 2.
#pragma once

#include <cstdint>

namespace fp4moe::cuda::wgmma {

__device__ __forceinline__ void fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/// Pins accumulator registers in program order (the compiler must not move their reads across a wait).
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// Shared-memory descriptor of a K-major bf16 tile written by TMA with 128-byte swizzle: rows of 64 K (128 bytes),
/// 8-row groups 1024 bytes apart (the tile 1024-byte aligned). Step k16 slice q by adding 2 q (32 bytes >> 4).
__device__ __forceinline__ std::uint64_t desc_k_major_sw128(std::uint32_t smem_addr) {
    std::uint64_t d = 0;
    d |= static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4);
    d |= static_cast<std::uint64_t>(1) << 16;         // leading byte offset (unused for swizzled K-major)
    d |= static_cast<std::uint64_t>(1024 >> 4) << 32; // stride byte offset: 8 rows x 128 bytes
    d |= static_cast<std::uint64_t>(1) << 62;         // 128-byte swizzle
    return d;
}

/// d (+)= A x B: `accumulate` false overwrites d. All four warps of the warpgroup call it together.
template <int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b_desc,
                                       bool accumulate);

// The specializations, one per N (every multiple of 8, as PTX allows), from one macro: inline PTX names its
// operands %0, %1, ... in a string literal, so the accumulator lists (FP4MOE_WG_REGS_r: "%0,...,%(r-1)" for
// r = N / 2 registers) and operand lists (FP4MOE_WG_D_r: d[0] .. d[r-1]) are spelled out in pieces of 4 and the
// numbers of the A, descriptor and predicate operands (r .. r + 5) are passed in.
#define FP4MOE_WG_R4(a, b, c, d) "%" #a ",%" #b ",%" #c ",%" #d
#define FP4MOE_WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FP4MOE_WG_REGS_4 FP4MOE_WG_R4(0, 1, 2, 3)
#define FP4MOE_WG_D_4 FP4MOE_WG_D4(0)
#define FP4MOE_WG_REGS_8 FP4MOE_WG_REGS_4 "," FP4MOE_WG_R4(4, 5, 6, 7)
#define FP4MOE_WG_D_8 FP4MOE_WG_D_4, FP4MOE_WG_D4(4)
#define FP4MOE_WG_REGS_12 FP4MOE_WG_REGS_8 "," FP4MOE_WG_R4(8, 9, 10, 11)
#define FP4MOE_WG_D_12 FP4MOE_WG_D_8, FP4MOE_WG_D4(8)
#define FP4MOE_WG_REGS_16 FP4MOE_WG_REGS_12 "," FP4MOE_WG_R4(12, 13, 14, 15)
#define FP4MOE_WG_D_16 FP4MOE_WG_D_12, FP4MOE_WG_D4(12)
#define FP4MOE_WG_REGS_20 FP4MOE_WG_REGS_16 "," FP4MOE_WG_R4(16, 17, 18, 19)
#define FP4MOE_WG_D_20 FP4MOE_WG_D_16, FP4MOE_WG_D4(16)
#define FP4MOE_WG_REGS_24 FP4MOE_WG_REGS_20 "," FP4MOE_WG_R4(20, 21, 22, 23)
#define FP4MOE_WG_D_24 FP4MOE_WG_D_20, FP4MOE_WG_D4(20)
#define FP4MOE_WG_REGS_28 FP4MOE_WG_REGS_24 "," FP4MOE_WG_R4(24, 25, 26, 27)
#define FP4MOE_WG_D_28 FP4MOE_WG_D_24, FP4MOE_WG_D4(24)
#define FP4MOE_WG_REGS_32 FP4MOE_WG_REGS_28 "," FP4MOE_WG_R4(28, 29, 30, 31)
#define FP4MOE_WG_D_32 FP4MOE_WG_D_28, FP4MOE_WG_D4(28)
#define FP4MOE_WG_REGS_36 FP4MOE_WG_REGS_32 "," FP4MOE_WG_R4(32, 33, 34, 35)
#define FP4MOE_WG_D_36 FP4MOE_WG_D_32, FP4MOE_WG_D4(32)
#define FP4MOE_WG_REGS_40 FP4MOE_WG_REGS_36 "," FP4MOE_WG_R4(36, 37, 38, 39)
#define FP4MOE_WG_D_40 FP4MOE_WG_D_36, FP4MOE_WG_D4(36)
#define FP4MOE_WG_REGS_44 FP4MOE_WG_REGS_40 "," FP4MOE_WG_R4(40, 41, 42, 43)
#define FP4MOE_WG_D_44 FP4MOE_WG_D_40, FP4MOE_WG_D4(40)
#define FP4MOE_WG_REGS_48 FP4MOE_WG_REGS_44 "," FP4MOE_WG_R4(44, 45, 46, 47)
#define FP4MOE_WG_D_48 FP4MOE_WG_D_44, FP4MOE_WG_D4(44)
#define FP4MOE_WG_REGS_52 FP4MOE_WG_REGS_48 "," FP4MOE_WG_R4(48, 49, 50, 51)
#define FP4MOE_WG_D_52 FP4MOE_WG_D_48, FP4MOE_WG_D4(48)
#define FP4MOE_WG_REGS_56 FP4MOE_WG_REGS_52 "," FP4MOE_WG_R4(52, 53, 54, 55)
#define FP4MOE_WG_D_56 FP4MOE_WG_D_52, FP4MOE_WG_D4(52)
#define FP4MOE_WG_REGS_60 FP4MOE_WG_REGS_56 "," FP4MOE_WG_R4(56, 57, 58, 59)
#define FP4MOE_WG_D_60 FP4MOE_WG_D_56, FP4MOE_WG_D4(56)
#define FP4MOE_WG_REGS_64 FP4MOE_WG_REGS_60 "," FP4MOE_WG_R4(60, 61, 62, 63)
#define FP4MOE_WG_D_64 FP4MOE_WG_D_60, FP4MOE_WG_D4(60)
#define FP4MOE_WG_REGS_68 FP4MOE_WG_REGS_64 "," FP4MOE_WG_R4(64, 65, 66, 67)
#define FP4MOE_WG_D_68 FP4MOE_WG_D_64, FP4MOE_WG_D4(64)
#define FP4MOE_WG_REGS_72 FP4MOE_WG_REGS_68 "," FP4MOE_WG_R4(68, 69, 70, 71)
#define FP4MOE_WG_D_72 FP4MOE_WG_D_68, FP4MOE_WG_D4(68)
#define FP4MOE_WG_REGS_76 FP4MOE_WG_REGS_72 "," FP4MOE_WG_R4(72, 73, 74, 75)
#define FP4MOE_WG_D_76 FP4MOE_WG_D_72, FP4MOE_WG_D4(72)
#define FP4MOE_WG_REGS_80 FP4MOE_WG_REGS_76 "," FP4MOE_WG_R4(76, 77, 78, 79)
#define FP4MOE_WG_D_80 FP4MOE_WG_D_76, FP4MOE_WG_D4(76)
#define FP4MOE_WG_REGS_84 FP4MOE_WG_REGS_80 "," FP4MOE_WG_R4(80, 81, 82, 83)
#define FP4MOE_WG_D_84 FP4MOE_WG_D_80, FP4MOE_WG_D4(80)
#define FP4MOE_WG_REGS_88 FP4MOE_WG_REGS_84 "," FP4MOE_WG_R4(84, 85, 86, 87)
#define FP4MOE_WG_D_88 FP4MOE_WG_D_84, FP4MOE_WG_D4(84)
#define FP4MOE_WG_REGS_92 FP4MOE_WG_REGS_88 "," FP4MOE_WG_R4(88, 89, 90, 91)
#define FP4MOE_WG_D_92 FP4MOE_WG_D_88, FP4MOE_WG_D4(88)
#define FP4MOE_WG_REGS_96 FP4MOE_WG_REGS_92 "," FP4MOE_WG_R4(92, 93, 94, 95)
#define FP4MOE_WG_D_96 FP4MOE_WG_D_92, FP4MOE_WG_D4(92)
#define FP4MOE_WG_REGS_100 FP4MOE_WG_REGS_96 "," FP4MOE_WG_R4(96, 97, 98, 99)
#define FP4MOE_WG_D_100 FP4MOE_WG_D_96, FP4MOE_WG_D4(96)
#define FP4MOE_WG_REGS_104 FP4MOE_WG_REGS_100 "," FP4MOE_WG_R4(100, 101, 102, 103)
#define FP4MOE_WG_D_104 FP4MOE_WG_D_100, FP4MOE_WG_D4(100)
#define FP4MOE_WG_REGS_108 FP4MOE_WG_REGS_104 "," FP4MOE_WG_R4(104, 105, 106, 107)
#define FP4MOE_WG_D_108 FP4MOE_WG_D_104, FP4MOE_WG_D4(104)
#define FP4MOE_WG_REGS_112 FP4MOE_WG_REGS_108 "," FP4MOE_WG_R4(108, 109, 110, 111)
#define FP4MOE_WG_D_112 FP4MOE_WG_D_108, FP4MOE_WG_D4(108)
#define FP4MOE_WG_REGS_116 FP4MOE_WG_REGS_112 "," FP4MOE_WG_R4(112, 113, 114, 115)
#define FP4MOE_WG_D_116 FP4MOE_WG_D_112, FP4MOE_WG_D4(112)
#define FP4MOE_WG_REGS_120 FP4MOE_WG_REGS_116 "," FP4MOE_WG_R4(116, 117, 118, 119)
#define FP4MOE_WG_D_120 FP4MOE_WG_D_116, FP4MOE_WG_D4(116)
#define FP4MOE_WG_REGS_124 FP4MOE_WG_REGS_120 "," FP4MOE_WG_R4(120, 121, 122, 123)
#define FP4MOE_WG_D_124 FP4MOE_WG_D_120, FP4MOE_WG_D4(120)
#define FP4MOE_WG_REGS_128 FP4MOE_WG_REGS_124 "," FP4MOE_WG_R4(124, 125, 126, 127)
#define FP4MOE_WG_D_128 FP4MOE_WG_D_124, FP4MOE_WG_D4(124)

#define FP4MOE_WGMMA_RS(N, R, A0, A1, A2, A3, DESC, PRED)                                                              \
    template <>                                                                                                        \
    __device__ __forceinline__ void mma_rs<N>(float(&d)[R], const std::uint32_t(&a)[4], std::uint64_t b_desc,          \
                                              bool accumulate) {                                                       \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #PRED ", 0;\n"                                               \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" FP4MOE_WG_REGS_##R                   \
                     "}, {%" #A0 ",%" #A1 ",%" #A2 ",%" #A3 "}, %" #DESC ", p, 1, 1, 0;\n}\n"                          \
                     : FP4MOE_WG_D_##R                                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)));    \
    }
FP4MOE_WGMMA_RS(8, 4, 4, 5, 6, 7, 8, 9)
FP4MOE_WGMMA_RS(16, 8, 8, 9, 10, 11, 12, 13)
FP4MOE_WGMMA_RS(24, 12, 12, 13, 14, 15, 16, 17)
FP4MOE_WGMMA_RS(32, 16, 16, 17, 18, 19, 20, 21)
FP4MOE_WGMMA_RS(40, 20, 20, 21, 22, 23, 24, 25)
FP4MOE_WGMMA_RS(48, 24, 24, 25, 26, 27, 28, 29)
FP4MOE_WGMMA_RS(56, 28, 28, 29, 30, 31, 32, 33)
FP4MOE_WGMMA_RS(64, 32, 32, 33, 34, 35, 36, 37)
FP4MOE_WGMMA_RS(72, 36, 36, 37, 38, 39, 40, 41)
FP4MOE_WGMMA_RS(80, 40, 40, 41, 42, 43, 44, 45)
FP4MOE_WGMMA_RS(88, 44, 44, 45, 46, 47, 48, 49)
FP4MOE_WGMMA_RS(96, 48, 48, 49, 50, 51, 52, 53)
FP4MOE_WGMMA_RS(104, 52, 52, 53, 54, 55, 56, 57)
FP4MOE_WGMMA_RS(112, 56, 56, 57, 58, 59, 60, 61)
FP4MOE_WGMMA_RS(120, 60, 60, 61, 62, 63, 64, 65)
FP4MOE_WGMMA_RS(128, 64, 64, 65, 66, 67, 68, 69)
FP4MOE_WGMMA_RS(136, 68, 68, 69, 70, 71, 72, 73)
FP4MOE_WGMMA_RS(144, 72, 72, 73, 74, 75, 76, 77)
FP4MOE_WGMMA_RS(152, 76, 76, 77, 78, 79, 80, 81)
FP4MOE_WGMMA_RS(160, 80, 80, 81, 82, 83, 84, 85)
FP4MOE_WGMMA_RS(168, 84, 84, 85, 86, 87, 88, 89)
FP4MOE_WGMMA_RS(176, 88, 88, 89, 90, 91, 92, 93)
FP4MOE_WGMMA_RS(184, 92, 92, 93, 94, 95, 96, 97)
FP4MOE_WGMMA_RS(192, 96, 96, 97, 98, 99, 100, 101)
FP4MOE_WGMMA_RS(200, 100, 100, 101, 102, 103, 104, 105)
FP4MOE_WGMMA_RS(208, 104, 104, 105, 106, 107, 108, 109)
FP4MOE_WGMMA_RS(216, 108, 108, 109, 110, 111, 112, 113)
FP4MOE_WGMMA_RS(224, 112, 112, 113, 114, 115, 116, 117)
FP4MOE_WGMMA_RS(232, 116, 116, 117, 118, 119, 120, 121)
FP4MOE_WGMMA_RS(240, 120, 120, 121, 122, 123, 124, 125)
FP4MOE_WGMMA_RS(248, 124, 124, 125, 126, 127, 128, 129)
FP4MOE_WGMMA_RS(256, 128, 128, 129, 130, 131, 132, 133)
#undef FP4MOE_WGMMA_RS

} // namespace fp4moe::cuda::wgmma
