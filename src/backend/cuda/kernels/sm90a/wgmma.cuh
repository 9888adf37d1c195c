// wgmma (sm_90a) with the A operand in registers, bf16 x bf16 -> fp32, m64 x N x k16, B from shared memory
// through a descriptor, for the token widths the grouped runner compiles (N = 16 and the multiples of 32 up to 256;
// the narrow ones for an expert's last, partly filled token block). CUDA-only header, sm_90a only.
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

// The specializations, one per N, from one macro: inline PTX names its operands %0, %1, ... in a string literal,
// so the accumulator lists (FP4MOE_WG_REGS_n: "%0,...,%(n-1)") and operand lists (FP4MOE_WG_D_n: d[0] .. d[n-1])
// are spelled out in pieces of 8 and the numbers of the A, descriptor and predicate operands (n .. n + 5) are
// passed in.
#define FP4MOE_WG_R8_0 "%0,%1,%2,%3,%4,%5,%6,%7"
#define FP4MOE_WG_R8_1 "%8,%9,%10,%11,%12,%13,%14,%15"
#define FP4MOE_WG_R8_2 "%16,%17,%18,%19,%20,%21,%22,%23"
#define FP4MOE_WG_R8_3 "%24,%25,%26,%27,%28,%29,%30,%31"
#define FP4MOE_WG_R8_4 "%32,%33,%34,%35,%36,%37,%38,%39"
#define FP4MOE_WG_R8_5 "%40,%41,%42,%43,%44,%45,%46,%47"
#define FP4MOE_WG_R8_6 "%48,%49,%50,%51,%52,%53,%54,%55"
#define FP4MOE_WG_R8_7 "%56,%57,%58,%59,%60,%61,%62,%63"
#define FP4MOE_WG_R8_8 "%64,%65,%66,%67,%68,%69,%70,%71"
#define FP4MOE_WG_R8_9 "%72,%73,%74,%75,%76,%77,%78,%79"
#define FP4MOE_WG_R8_10 "%80,%81,%82,%83,%84,%85,%86,%87"
#define FP4MOE_WG_R8_11 "%88,%89,%90,%91,%92,%93,%94,%95"
#define FP4MOE_WG_R8_12 "%96,%97,%98,%99,%100,%101,%102,%103"
#define FP4MOE_WG_R8_13 "%104,%105,%106,%107,%108,%109,%110,%111"
#define FP4MOE_WG_R8_14 "%112,%113,%114,%115,%116,%117,%118,%119"
#define FP4MOE_WG_R8_15 "%120,%121,%122,%123,%124,%125,%126,%127"
#define FP4MOE_WG_D8(i)                                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),        \
        "+f"(d[i + 7])
#define FP4MOE_WG_REGS_8 FP4MOE_WG_R8_0
#define FP4MOE_WG_D_8 FP4MOE_WG_D8(0)
#define FP4MOE_WG_REGS_16 FP4MOE_WG_REGS_8 "," FP4MOE_WG_R8_1
#define FP4MOE_WG_D_16 FP4MOE_WG_D_8, FP4MOE_WG_D8(8)
#define FP4MOE_WG_REGS_32 FP4MOE_WG_REGS_16 "," FP4MOE_WG_R8_2 "," FP4MOE_WG_R8_3
#define FP4MOE_WG_D_32 FP4MOE_WG_D_16, FP4MOE_WG_D8(16), FP4MOE_WG_D8(24)
#define FP4MOE_WG_REGS_48 FP4MOE_WG_REGS_32 "," FP4MOE_WG_R8_4 "," FP4MOE_WG_R8_5
#define FP4MOE_WG_D_48 FP4MOE_WG_D_32, FP4MOE_WG_D8(32), FP4MOE_WG_D8(40)
#define FP4MOE_WG_REGS_64 FP4MOE_WG_REGS_48 "," FP4MOE_WG_R8_6 "," FP4MOE_WG_R8_7
#define FP4MOE_WG_D_64 FP4MOE_WG_D_48, FP4MOE_WG_D8(48), FP4MOE_WG_D8(56)
#define FP4MOE_WG_REGS_80 FP4MOE_WG_REGS_64 "," FP4MOE_WG_R8_8 "," FP4MOE_WG_R8_9
#define FP4MOE_WG_D_80 FP4MOE_WG_D_64, FP4MOE_WG_D8(64), FP4MOE_WG_D8(72)
#define FP4MOE_WG_REGS_96 FP4MOE_WG_REGS_80 "," FP4MOE_WG_R8_10 "," FP4MOE_WG_R8_11
#define FP4MOE_WG_D_96 FP4MOE_WG_D_80, FP4MOE_WG_D8(80), FP4MOE_WG_D8(88)
#define FP4MOE_WG_REGS_112 FP4MOE_WG_REGS_96 "," FP4MOE_WG_R8_12 "," FP4MOE_WG_R8_13
#define FP4MOE_WG_D_112 FP4MOE_WG_D_96, FP4MOE_WG_D8(96), FP4MOE_WG_D8(104)
#define FP4MOE_WG_REGS_128 FP4MOE_WG_REGS_112 "," FP4MOE_WG_R8_14 "," FP4MOE_WG_R8_15
#define FP4MOE_WG_D_128 FP4MOE_WG_D_112, FP4MOE_WG_D8(112), FP4MOE_WG_D8(120)
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
FP4MOE_WGMMA_RS(16, 8, 8, 9, 10, 11, 12, 13)
FP4MOE_WGMMA_RS(32, 16, 16, 17, 18, 19, 20, 21)
FP4MOE_WGMMA_RS(64, 32, 32, 33, 34, 35, 36, 37)
FP4MOE_WGMMA_RS(96, 48, 48, 49, 50, 51, 52, 53)
FP4MOE_WGMMA_RS(128, 64, 64, 65, 66, 67, 68, 69)
FP4MOE_WGMMA_RS(160, 80, 80, 81, 82, 83, 84, 85)
FP4MOE_WGMMA_RS(192, 96, 96, 97, 98, 99, 100, 101)
FP4MOE_WGMMA_RS(224, 112, 112, 113, 114, 115, 116, 117)
FP4MOE_WGMMA_RS(256, 128, 128, 129, 130, 131, 132, 133)
#undef FP4MOE_WGMMA_RS

} // namespace fp4moe::cuda::wgmma
