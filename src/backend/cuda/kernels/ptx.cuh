// Thin wrappers of sm_90 PTX the kernels share: streaming loads that bypass L1, the bf16 mma.sync, and bulk
// copies (the copy engine) into shared memory completing on mbarriers. CUDA-only header.
#pragma once

#include <cstdint>

namespace fp4moe::cuda::ptx {

/// 16 bytes of a stream read once: not kept in L1.
__device__ __forceinline__ uint4 load_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ std::uint32_t load_stream2(const void *p) {
    unsigned short v;
    asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

/// Four floats of a stream read once: not kept in L1.
__device__ __forceinline__ float4 load_stream_f4(const float *p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
}

/// c += a * b on the tensor cores: mma.sync m16n8k16, bf16 operands (a: 4 registers of the 16 x 16 row-major
/// fragment, b0/b1: the 16 x 8 column-major fragment), fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Bulk copies: the copy engine streams chunks into shared memory, completing on an mbarrier, so the bytes in
// flight do not cost registers.
__device__ __forceinline__ std::uint32_t smem_addr(const void *p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
/// True in exactly one lane of the (converged) warp. Guarding a bulk copy with it, rather than with a lane test,
/// lets ptxas issue the copy once: with `lane == 0` it wraps each copy in a loop over the active lanes.
__device__ __forceinline__ bool elect_one() {
    std::uint32_t elected;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "elect.sync _|p, 0xffffffff;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(elected));
    return elected != 0;
}
__device__ __forceinline__ void mbar_init(std::uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
/// Arrive once on `bar`, expecting `bytes` more of asynchronous copies in this phase.
__device__ __forceinline__ void mbar_expect_tx(std::uint64_t *bar, std::uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t *bar, std::uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n"
                 "}\n" ::"r"(smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, std::uint32_t bytes, std::uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void *p, std::uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
/// Our generic-proxy reads of shared memory are ordered before the async proxy's next writes to it.
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

} // namespace fp4moe::cuda::ptx
