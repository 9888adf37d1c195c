// cpu.fast: the multi-threaded SIMD MoE runner.
// Numeric path: NVFP4 weights dequantized in registers (E2M1 x E4M3 exact in fp32), bf16 activations widened
// to fp32, fp32 accumulation, global scale applied to each dot product, SiLU(gate) * up kept in fp32, down
// outputs scaled by the router weight and accumulated per token in expert order (as cpu.ref), one bf16
// rounding at the end.
//
// Work split (each weight row is read once per call, whatever the number of tokens):
//   phase 0  x -> fp32 [T, H]; expert-sorted pair list (from perm or masked_pairs) and row bases.
//   phase 1  parallel over blocks of `block_n` intermediate rows; an item walks every active expert and, for
//            each gate/up row pair of its block, applies it to all that expert's tokens (a small-M GEMM):
//            act[row, n] = silu(gate . x) * (up . x), act = [T * slots, I] fp32.
//   phase 2  parallel over blocks of `block_n` hidden rows; an item owns out[:, block]: zeroes its fp32
//            accumulator columns, walks the experts in index order adding w_pair * (down . act), rounds to
//            bf16. Every output element is summed by one thread in a fixed order: results are identical
//            for any thread count.
// Items are the same size in both phases (all experts per block), so static chunking balances even when
// one expert holds every token. A thread's items are contiguous, so it streams each matrix of each expert
// from one run of rows whatever the block: the automatic block is the kernel's row step (1 gate/up row,
// 4 down rows), which splits the rows evenly.
// With NVFP4 weights, K % 128 == 0 and an ISA that has dot_nvfp4_p128 (AVX-512), x and act are stored in the
// p128 layout (moe_fast_kernels.h), which lets the kernel decode 16 weights with one shift and one permute.
#include "backend/cpu/moe_fast_kernels.h"
#include "backend/cpu/runners.h"
#include "core/error.h"
#include "core/thread_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

namespace fp4moe::cpu {
namespace {

using fast::dot_job;
using fast::kernels;

constexpr int kChunk = 64;              // tokens per kernel call (stack arrays of pointers and outputs)
constexpr int kBlockSizes[] = {16, 64}; // block_n of the explicit tactics
constexpr std::size_t kAlign = 64;

struct tactic_params {
    cpu_isa isa = cpu_isa::scalar;
    int block_n = 0; // 0: chosen from the shape and thread count
};

const kernels &kernels_for(cpu_isa isa) {
    switch (isa) {
    case cpu_isa::avx512:
        return fast::kernels_avx512();
    case cpu_isa::avx2:
        return fast::kernels_avx2();
    case cpu_isa::scalar:
        break;
    }
    return fast::kernels_scalar();
}

// Tactic ids: 0 = best ISA, automatic block; 1 + isa * 2 + b = explicit (isa, kBlockSizes[b]).
bool decode_tactic(int id, tactic_params &out) {
    const cpu_isa best = detect_cpu_features().best();
    if (id == 0) {
        out = {best, 0};
        return true;
    }
    const int isa = (id - 1) / 2, b = (id - 1) % 2;
    if (id < 0 || isa > static_cast<int>(best)) return false;
    out = {static_cast<cpu_isa>(isa), kBlockSizes[b]};
    return true;
}

// The automatic block is the kernel's row step: a thread's items are contiguous anyway (one stream per
// matrix and expert whatever the block), so the smallest unit only evens out the split; 88 blocks of 16 rows
// left 16 threads with 5 or 6 at T=1.
constexpr int kAutoBlock1 = 1, kAutoBlock2 = 4;

std::size_t align_up(std::size_t n) {
    return (n + kAlign - 1) / kAlign * kAlign;
}

// Workspace carving, in order; every region starts on a 64-byte boundary of the aligned base.
struct layout {
    std::size_t xf = 0, act = 0, pairs = 0, base = 0, active = 0, scratch = 0, total = 0;
    layout(const moe_desc &d, std::int64_t tokens, int threads) {
        const auto t = static_cast<std::size_t>(tokens), h = static_cast<std::size_t>(d.hidden),
                   in = static_cast<std::size_t>(d.intermediate), sl = static_cast<std::size_t>(d.slots()),
                   ne = static_cast<std::size_t>(d.total_experts());
        std::size_t o = 0;
        xf = o, o += align_up(sizeof(float) * t * h);
        act = o, o += align_up(sizeof(float) * t * sl * in);
        pairs = o, o += align_up(sizeof(std::int32_t) * t * sl);
        base = o, o += align_up(sizeof(std::int32_t) * (ne + 1));
        active = o, o += align_up(sizeof(std::int32_t) * ne);
        scratch = o,
        o += align_up(sizeof(float) * fast::kScratchPerK * std::max(h, in)) * static_cast<std::size_t>(threads);
        total = o + kAlign; // slack to align the caller's pointer
    }
};

class fast_runner final : public moe_runner {
public:
    explicit fast_runner(int threads) : threads_(cpu_device(threads).threads) {}

    std::string_view name() const override { return "cpu.fast"; }
    bool supports(const moe_desc &d, const moe_device &dev) const override { return !dev.cuda && d.validate().ok(); }

    std::vector<moe_tactic> tactics(const moe_desc &) const override {
        const cpu_isa best = detect_cpu_features().best();
        std::vector<moe_tactic> t;
        t.push_back({0, fmt::format("isa={} block_n=auto", cpu_isa_name(best))});
        for (int isa = 0; isa <= static_cast<int>(best); ++isa)
            for (int b = 0; b < 2; ++b)
                t.push_back({1 + isa * 2 + b, fmt::format("isa={} block_n={}", cpu_isa_name(static_cast<cpu_isa>(isa)),
                                                          kBlockSizes[b])});
        return t;
    }

    std::size_t workspace_size(const moe_desc &d, std::int64_t max_tokens) const override {
        return layout(d, max_tokens, threads_).total;
    }

    status run(const moe_desc &d, const moe_args &a, const moe_plan &p, const moe_tactic &t,
               const moe_device &dev) const override;

private:
    thread_pool &pool() const {
        std::call_once(pool_once_, [this] { pool_ = std::make_unique<thread_pool>(threads_); });
        return *pool_;
    }

    int threads_;
    mutable std::once_flag pool_once_;
    mutable std::unique_ptr<thread_pool> pool_;
};

status check(const moe_desc &d, const moe_args &a, const moe_plan &p) {
    if (status st = d.validate(); !st.ok()) return st;
    if (p.slots != d.slots() || p.num_experts != d.total_experts() || p.tokens < 0 || p.tokens > p.max_tokens)
        return {status_code::invalid_argument, "cpu.fast: plan does not match the desc"};
    if (p.tokens > 0 && (!a.x || !a.out || !a.w || !a.workspace))
        return {status_code::invalid_argument, "cpu.fast: null x, out, weights or workspace"};
    if (a.w && (static_cast<std::int64_t>(a.w->gate.size()) != d.total_experts() ||
                a.w->up.size() != a.w->gate.size() || a.w->down.size() != a.w->gate.size()))
        return {status_code::invalid_argument, "cpu.fast: weights must have experts + shared entries"};
    return status::success();
}

void set_row(dot_job &jb, int r, const moe_matrix &m, moe_weight_format f, std::int64_t n, std::int64_t k) {
    if (f == moe_weight_format::nvfp4) {
        jb.q[r] = m.nvfp4.packed + n * (k / 2);
        jb.s[r] = m.nvfp4.scales + n * (k / 16);
    } else {
        jb.b[r] = m.bf16 + n * k;
    }
}

float global_scale(const moe_matrix &m, moe_weight_format f) {
    return f == moe_weight_format::nvfp4 ? m.nvfp4.global_scale : 1.0f;
}

status fast_runner::run(const moe_desc &d, const moe_args &a, const moe_plan &p, const moe_tactic &t,
                        const moe_device &dev) const {
    if (status st = check(d, a, p); !st.ok()) return st;
    tactic_params tp;
    if (!decode_tactic(t.id, tp))
        return {status_code::unsupported, fmt::format("cpu.fast: tactic {} not available on this CPU", t.id)};
    const layout L(d, p.tokens, threads_);
    if (p.tokens == 0) return status::success();
    if (a.workspace_bytes < L.total)
        return {status_code::invalid_argument,
                fmt::format("cpu.fast: workspace of {} bytes, needs {}", a.workspace_bytes, L.total)};

    const kernels &K = kernels_for(tp.isa);
    const bool nvfp4 = d.weights == moe_weight_format::nvfp4;
    const auto dot = nvfp4 ? K.dot_nvfp4 : K.dot_bf16;
    const std::int64_t T = p.tokens, H = d.hidden, I = d.intermediate, NE = p.num_experts, S = p.slots;
    const int threads = dev.threads > 0 ? std::min(dev.threads, threads_) : threads_;
    // p128: x (phase 1) and act (phase 2) stored in the chunk-transposed layout its kernel reads.
    const bool p1 = nvfp4 && K.dot_nvfp4_p128 && H % 128 == 0, p2 = nvfp4 && K.dot_nvfp4_p128 && I % 128 == 0;
    const auto dot1 = p1 ? K.dot_nvfp4_p128 : dot, dot2 = p2 ? K.dot_nvfp4_p128 : dot;
    const int rows2 = p2 ? 4 : 2; // down rows per kernel call

    auto *ws =
        reinterpret_cast<std::byte *>((reinterpret_cast<std::uintptr_t>(a.workspace) + kAlign - 1) / kAlign * kAlign);
    float *xf = reinterpret_cast<float *>(ws + L.xf); // phase 1: x in fp32; phase 2: the fp32 accumulator
    float *act = reinterpret_cast<float *>(ws + L.act);
    auto *pairs = reinterpret_cast<std::int32_t *>(ws + L.pairs);
    auto *base = reinterpret_cast<std::int32_t *>(ws + L.base);
    auto *active = reinterpret_cast<std::int32_t *>(ws + L.active);
    const std::size_t scratch_stride = align_up(sizeof(float) * fast::kScratchPerK * std::max(H, I)) / sizeof(float);
    float *scratch = reinterpret_cast<float *>(ws + L.scratch);

    // Phase 0: the expert-sorted pair list (the permuted layout's own order; the masked layout's rows
    // compacted) and the experts that have tokens.
    std::int64_t n_active = 0;
    std::int32_t row = 0;
    for (std::int64_t e = 0; e < NE; ++e) {
        base[e] = row;
        const std::int32_t c = p.counts[e];
        if (c == 0) continue;
        active[n_active++] = static_cast<std::int32_t>(e);
        const std::int32_t *src =
            d.layout == moe_layout::permuted ? p.perm.data() + p.offsets[e] : p.masked_pairs.data() + e * p.max_tokens;
        std::copy_n(src, c, pairs + row);
        row += c;
    }
    base[NE] = row;
    FP4MOE_ASSERT(row <= T * S);
    pool().parallel_for(
        T,
        [&](std::int64_t b, std::int64_t e) {
            if (p1) {
                for (std::int64_t tk = b; tk < e; ++tk)
                    for (std::int64_t h = 0; h < H; ++h)
                        xf[tk * H + fast::p128_index(h)] = bf16_to_float(a.x[tk * H + h]);
            } else {
                for (std::int64_t i = b * H; i < e * H; ++i) xf[i] = bf16_to_float(a.x[i]);
            }
        },
        threads);

    // Phase 1: gate/up + SiLU*up over blocks of intermediate rows.
    const int bn1 = tp.block_n > 0 ? tp.block_n : kAutoBlock1;
    pool().parallel_for((I + bn1 - 1) / bn1,
                        [&](std::int64_t ib, std::int64_t ie, int worker) {
                            const float *xs[kChunk];
                            float g[kChunk], u[kChunk];
                            dot_job jb;
                            jb.rows = 2;
                            jb.k = H;
                            jb.x = xs;
                            jb.out[0] = g;
                            jb.out[1] = u;
                            jb.scratch = scratch + worker * scratch_stride;
                            for (std::int64_t ai = 0; ai < n_active; ++ai) {
                                const std::int32_t e = active[ai];
                                const moe_matrix &wg = a.w->gate[e], &wu = a.w->up[e];
                                const float gs_g = global_scale(wg, d.weights), gs_u = global_scale(wu, d.weights);
                                for (std::int32_t r0 = base[e]; r0 < base[e + 1]; r0 += kChunk) {
                                    const int m = std::min<int>(kChunk, base[e + 1] - r0);
                                    for (int j = 0; j < m; ++j) xs[j] = xf + (pairs[r0 + j] / S) * H;
                                    jb.m = m;
                                    for (std::int64_t n = ib * bn1; n < std::min(I, ie * bn1); ++n) {
                                        set_row(jb, 0, wg, d.weights, n, H);
                                        set_row(jb, 1, wu, d.weights, n, H);
                                        dot1(jb);
                                        const std::int64_t col = p2 ? fast::p128_index(n) : n;
                                        for (int j = 0; j < m; ++j) {
                                            const float gv = g[j] * gs_g;
                                            act[(r0 + j) * I + col] = gv / (1.0f + std::exp(-gv)) * (u[j] * gs_u);
                                        }
                                    }
                                }
                            }
                        },
                        threads);

    // Phase 2: down over blocks of hidden rows, combine, round.
    const int bn2 = tp.block_n > 0 ? tp.block_n : kAutoBlock2;
    float *acc = xf;
    pool().parallel_for((H + bn2 - 1) / bn2,
                        [&](std::int64_t hb, std::int64_t he, int worker) {
                            const std::int64_t h0 = hb * bn2, h1 = std::min(H, he * bn2);
                            for (std::int64_t tk = 0; tk < T; ++tk)
                                std::fill(acc + tk * H + h0, acc + tk * H + h1, 0.0f);
                            const float *xs[kChunk];
                            float y[4][kChunk];
                            dot_job jb;
                            jb.k = I;
                            jb.x = xs;
                            jb.out[0] = y[0];
                            jb.out[1] = y[1];
                            jb.out[2] = y[2];
                            jb.out[3] = y[3];
                            jb.scratch = scratch + worker * scratch_stride;
                            for (std::int64_t ai = 0; ai < n_active; ++ai) {
                                const std::int32_t e = active[ai];
                                const moe_matrix &wd = a.w->down[e];
                                const float gs = global_scale(wd, d.weights);
                                for (std::int32_t r0 = base[e]; r0 < base[e + 1]; r0 += kChunk) {
                                    const int m = std::min<int>(kChunk, base[e + 1] - r0);
                                    for (int j = 0; j < m; ++j) xs[j] = act + (r0 + j) * I;
                                    jb.m = m;
                                    for (std::int64_t n = h0; n < h1; n += rows2) {
                                        jb.rows = static_cast<int>(std::min<std::int64_t>(rows2, h1 - n));
                                        for (int r = 0; r < jb.rows; ++r) set_row(jb, r, wd, d.weights, n + r, I);
                                        dot2(jb);
                                        for (int j = 0; j < m; ++j) {
                                            const std::int32_t pair = pairs[r0 + j];
                                            const float wt = p.topk_weights[pair];
                                            float *dst = acc + (pair / S) * H + n;
                                            for (int r = 0; r < jb.rows; ++r) dst[r] += wt * (y[r][j] * gs);
                                        }
                                    }
                                }
                            }
                            for (std::int64_t tk = 0; tk < T; ++tk)
                                for (std::int64_t n = h0; n < h1; ++n)
                                    a.out[tk * H + n] = float_to_bf16(acc[tk * H + n]);
                        },
                        threads);
    return status::success();
}

} // namespace

std::unique_ptr<moe_runner> make_fast_runner(int threads) {
    return std::make_unique<fast_runner>(threads);
}

} // namespace fp4moe::cpu
