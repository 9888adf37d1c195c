// cpu.fast kernels, portable C++: 8-lane float structs the compiler may vectorize for the baseline ISA.
#include "backend/cpu/moe_fast_kernels.h"

#include "fp4moe/nvfp4.h"

#include <array>
#include <limits>

namespace fp4moe::cpu::fast {
namespace {

constexpr std::array<float, 256> make_e4m3_table() {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) {
        const int e = (c >> 3) & 0xF, m = c & 7;
        float v;
        if (e == 0xF && m == 7) {
            v = std::numeric_limits<float>::quiet_NaN();
        } else {
            // Normal: (8 + m) * 2^(e - 10); subnormal (e = 0): m * 2^-9.
            v = e == 0 ? static_cast<float>(m) : static_cast<float>(8 + m);
            int p = e == 0 ? -9 : e - 10;
            for (; p > 0; --p) v *= 2.0f;
            for (; p < 0; ++p) v *= 0.5f;
        }
        t[c] = (c & 0x80) ? -v : v;
    }
    return t;
}

constexpr std::array<float, 256> kE4M3 = make_e4m3_table();
constexpr float kE2M1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; // 2 * e2m1

#define FP4MOE_TARGET
constexpr int kLanes = 8;
constexpr int kTileM = 4;
struct vf {
    float v[kLanes];
};
inline vf vzero() {
    return vf{};
}
inline vf vload(const float *p) {
    vf r;
    for (int i = 0; i < kLanes; ++i) r.v[i] = p[i];
    return r;
}
inline void vstore(float *p, vf a) {
    for (int i = 0; i < kLanes; ++i) p[i] = a.v[i];
}
inline vf vfma(vf a, vf b, vf c) {
    for (int i = 0; i < kLanes; ++i) c.v[i] += a.v[i] * b.v[i];
    return c;
}
inline float vreduce(vf a) {
    float s = 0.0f;
    for (int i = 0; i < kLanes; ++i) s += a.v[i];
    return s;
}
inline void dq_scales16(const std::uint8_t *s, float *out) {
    for (int i = 0; i < 16; ++i) out[i] = 0.5f * kE4M3[s[i]];
}
inline void dq_nvfp4(const std::uint8_t *q, float half_scale, vf *w) {
    for (int i = 0; i < 8; ++i) {
        w[i / 4].v[(2 * i) % kLanes] = kE2M1x2[q[i] & 0xF] * half_scale;
        w[i / 4].v[(2 * i + 1) % kLanes] = kE2M1x2[q[i] >> 4] * half_scale;
    }
}
inline void dq_bf16(const bf16_t *p, vf *w) {
    for (int i = 0; i < 16; ++i) w[i / kLanes].v[i % kLanes] = bf16_to_float(p[i]);
}

#include "backend/cpu/moe_fast_tile.inc"

#undef FP4MOE_TARGET

} // namespace

const float *e4m3_table() {
    return kE4M3.data();
}

const kernels &kernels_scalar() {
    static const kernels k{cpu_isa::scalar, kTileM, dot_nvfp4, dot_bf16};
    return k;
}

} // namespace fp4moe::cpu::fast
