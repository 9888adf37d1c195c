// The MoE layer on a CUDA device (moe_gpu.h): weight upload, the layer forward, the cuda.decode and cuda.grouped
// runners.
#include "moe_gpu.h"

#include "kernels/moe_grouped.h"
#include "kernels/moe_route.h"
#include "kernels/random_fill.h"
#include "quant/mma_pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fp4moe::cuda {
namespace {

std::size_t align256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

status cuda_error(cudaError_t e, const char *what) {
    return {status_code::internal,
            fmt::format("{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e))};
}

// Device workspace of the layer forward: routing and plan first, then the runners' scratch (one runs at a time,
// so they share it).
struct region {
    std::size_t ids, weights, counts, offsets, perm, inv_perm, masked, plan_scratch, logits, runner, total;
};
region make_region(const moe_desc &d, std::int64_t max_tokens) {
    const std::size_t pairs = static_cast<std::size_t>(max_tokens * d.slots()), ne = d.total_experts();
    region r{};
    std::size_t off = 0;
    auto take = [&](std::size_t bytes) {
        const std::size_t at = off;
        off += align256(bytes);
        return at;
    };
    r.ids = take(4 * pairs), r.weights = take(4 * pairs), r.counts = take(4 * ne), r.offsets = take(4 * (ne + 1));
    r.perm = take(4 * pairs), r.inv_perm = take(4 * pairs), r.masked = take(4 * ne * max_tokens);
    r.plan_scratch = take(
        4 * moe_plan_scratch_ints(static_cast<int>(max_tokens), static_cast<int>(d.slots()), static_cast<int>(ne)));
    r.logits = take(4 * static_cast<std::size_t>(max_tokens * d.experts));
    const int h = static_cast<int>(d.hidden), i = static_cast<int>(d.intermediate), e = static_cast<int>(ne);
    const int k = static_cast<int>(d.slots()), t = static_cast<int>(max_tokens);
    r.runner = take(std::max(moe_decode_workspace(h, i, e, k, t), moe_grouped_workspace(h, i, e, k, t)));
    r.total = off;
    return r;
}

template <typename T>
T *at(void *base, std::size_t off) {
    return reinterpret_cast<T *>(static_cast<std::uint8_t *>(base) + off);
}

status check_desc(const moe_desc &d) {
    if (auto st = d.validate(); !st.ok()) return st;
    if (d.weights != moe_weight_format::nvfp4)
        return {status_code::unsupported, "cuda: only NVFP4 expert weights are supported on the GPU"};
    if (d.total_experts() >= 1024) return {status_code::unsupported, "cuda: at most 1023 experts (+ shared slots)"};
    return status::success();
}

const char *runner_name(gpu_runner r) {
    return r == gpu_runner::decode ? "cuda.decode" : "cuda.grouped";
}

// Runs the runner's kernels on a plan already in the workspace region.
status run_experts(const moe_desc &d, const gpu_moe_weights &w, const bf16_t *x, bf16_t *out, std::int64_t tokens,
                   std::int64_t max_tokens, void *ws, gpu_tactic t, cudaStream_t stream) {
    const region r = make_region(d, max_tokens);
    decode_batch b;
    b.hidden = static_cast<int>(d.hidden), b.inter = static_cast<int>(d.intermediate);
    b.num_experts = static_cast<int>(d.total_experts()), b.slots = static_cast<int>(d.slots());
    b.shared = static_cast<int>(d.shared);
    b.tokens = static_cast<int>(tokens), b.max_tokens = static_cast<int>(max_tokens);
    b.masked = d.layout == moe_layout::masked;
    b.x = reinterpret_cast<const std::uint16_t *>(x), b.out = reinterpret_cast<std::uint16_t *>(out);
    b.topk_ids = at<std::int32_t>(ws, r.ids), b.topk_weights = at<float>(ws, r.weights);
    b.counts = at<std::int32_t>(ws, r.counts), b.offsets = at<std::int32_t>(ws, r.offsets);
    b.perm = at<std::int32_t>(ws, r.perm), b.masked_pairs = at<std::int32_t>(ws, r.masked);
    b.workspace = at<void>(ws, r.runner);
    const cudaError_t e = t.runner == gpu_runner::decode
                              ? moe_decode_run(w.decode(), b, kDecodeTactics[t.id], stream)
                              : moe_grouped_run(w.decode(), b, kGroupedTactics[t.id], stream);
    if (e != cudaSuccess) return cuda_error(e, runner_name(t.runner));
    return status::success();
}

status check_tactic(gpu_tactic t) {
    if (t.id < 0 || t.id >= gpu_tactic_count(t.runner))
        return {status_code::invalid_argument, fmt::format("{}: no tactic {}", runner_name(t.runner), t.id)};
    if (t.runner == gpu_runner::grouped && !moe_grouped_supported())
        return {status_code::unsupported, "cuda.grouped: needs an sm_90 GPU (Hopper: wgmma and TMA)"};
    return status::success();
}

// The two runners differ in name, tactics and the devices they accept; both take a host plan, upload it into
// the workspace's plan region and run their kernels.
class gpu_runner_impl final : public moe_runner {
public:
    explicit gpu_runner_impl(gpu_runner kind) : kind_(kind) {}
    std::string_view name() const override { return runner_name(kind_); }
    bool supports(const moe_desc &d, const moe_device &dev) const override {
        return dev.cuda && check_desc(d).ok() && (kind_ == gpu_runner::decode || moe_grouped_supported());
    }
    std::vector<moe_tactic> tactics(const moe_desc &) const override {
        std::vector<moe_tactic> v;
        for (int i = 0; i < gpu_tactic_count(kind_); ++i) v.push_back({i, gpu_tactic_name({kind_, i})});
        return v;
    }
    std::size_t workspace_size(const moe_desc &d, std::int64_t max_tokens) const override {
        return make_region(d, max_tokens).total;
    }
    status run(const moe_desc &d, const moe_args &a, const moe_plan &p, const moe_tactic &t,
               const moe_device &dev) const override {
        const char *what = runner_name(kind_);
        if (auto st = check_desc(d); !st.ok()) return st;
        if (!a.device_weights)
            return {status_code::invalid_argument, fmt::format("{}: no device weights (moe_args)", what)};
        if (auto st = check_tactic({kind_, t.id}); !st.ok()) return st;
        if (a.workspace_bytes < workspace_size(d, p.max_tokens))
            return {status_code::invalid_argument, fmt::format("{}: workspace of {} bytes, needs {}", what,
                                                               a.workspace_bytes, workspace_size(d, p.max_tokens))};
        auto stream = static_cast<cudaStream_t>(dev.stream);
        const region r = make_region(d, p.max_tokens);
        const std::size_t pairs = static_cast<std::size_t>(p.tokens * p.slots);
        auto up = [&](std::size_t off, const void *src, std::size_t bytes) {
            return bytes ? cudaMemcpyAsync(at<void>(a.workspace, off), src, bytes, cudaMemcpyHostToDevice, stream)
                         : cudaSuccess;
        };
        for (auto e :
             {up(r.ids, p.topk_ids.data(), 4 * pairs), up(r.weights, p.topk_weights.data(), 4 * pairs),
              up(r.counts, p.counts.data(), 4 * p.counts.size()), up(r.offsets, p.offsets.data(), 4 * p.offsets.size()),
              up(r.perm, p.perm.data(), 4 * pairs), up(r.masked, p.masked_pairs.data(), 4 * p.masked_pairs.size())})
            if (e != cudaSuccess) return cuda_error(e, fmt::format("{}: plan upload", what).c_str());
        return run_experts(d, *static_cast<const gpu_moe_weights *>(a.device_weights), a.x, a.out, p.tokens,
                           p.max_tokens, a.workspace, {kind_, t.id}, stream);
    }

private:
    gpu_runner kind_;
};

} // namespace

int gpu_tactic_count(gpu_runner r) {
    return r == gpu_runner::decode ? kDecodeTacticCount : kGroupedTacticCount;
}

std::string gpu_tactic_name(gpu_tactic t) {
    if (t.runner == gpu_runner::grouped) {
        auto gemm_name = [](const grouped_gemm_tactic &k) {
            const int rows = 64 * k.mt * k.wg; // weight rows per CTA
            std::string name = fmt::format("bn={} stages={}", k.bn, k.stages);
            if (rows != 128) name += fmt::format(" rows={}", rows);
            if (k.wg != 2) name += fmt::format(" wg={}", k.wg);
            return name;
        };
        const grouped_tactic &k = kGroupedTactics[t.id];
        std::string name = k.gate_up == k.down
                               ? gemm_name(k.gate_up)
                               : fmt::format("gate_up {}, down {}", gemm_name(k.gate_up), gemm_name(k.down));
        if (k.tail.bn) name += fmt::format(", tails <= {} rows {}", k.tail.bn, gemm_name(k.tail));
        return name;
    }
    const decode_tactic &k = kDecodeTactics[t.id];
    std::string name = k.stages ? fmt::format("nt={} ksplit={} bulk {}x{} ksteps", k.nt, k.ksplit, k.stages, k.inflight)
                                : fmt::format("nt={} ksplit={} regs {} ksteps", k.nt, k.ksplit, k.inflight);
    if (k.down_ksplit > 0) name += fmt::format(", down ksplit={}", k.down_ksplit);
    if (k.mt > 1) name += fmt::format(", {} tiles per warp", k.mt);
    if (k.min_ctas > 1) name += fmt::format(", {} CTAs per SM", k.min_ctas);
    if (k.combine_kernel) name += ", combine kernel";
    if (k.warps != 4) name += fmt::format(", {} warps per CTA", k.warps);
    if (k.shared_nt > k.nt) name += fmt::format(", shared nt={}", k.shared_nt);
    if (k.gate_up_in_order) name += ", gate_up in stream order";
    return name;
}

std::unique_ptr<moe_runner> make_gpu_runner(gpu_runner kind) {
    return std::make_unique<gpu_runner_impl>(kind);
}
std::unique_ptr<moe_runner> make_decode_runner() {
    return make_gpu_runner(gpu_runner::decode);
}

// ---- weights -------------------------------------------------------------------------------------------

gpu_moe_weights::~gpu_moe_weights() {
    if (mem_) cudaFree(mem_);
}

result<std::unique_ptr<gpu_moe_weights>> gpu_moe_weights::allocate(const moe_desc &d) {
    if (auto st = check_desc(d); !st.ok()) return st;
    std::unique_ptr<gpu_moe_weights> w(new gpu_moe_weights);
    const int h = static_cast<int>(d.hidden), i = static_cast<int>(d.intermediate);
    const std::size_t ne = d.total_experts();
    w->dw_.tiles_gu = (i + 7) / 8, w->dw_.ksteps_gu = (h + 63) / 64;
    w->dw_.tiles_down = (h + 15) / 16, w->dw_.ksteps_down = (i + 63) / 64;
    const std::size_t gu = static_cast<std::size_t>(w->dw_.tiles_gu) * w->dw_.ksteps_gu;
    const std::size_t dn = static_cast<std::size_t>(w->dw_.tiles_down) * w->dw_.ksteps_down;
    std::size_t off = 0;
    auto take = [&](std::size_t bytes) {
        const std::size_t o = off;
        off += align256(bytes);
        return o;
    };
    const std::size_t o_guq = take(ne * gu * 512), o_gus = take(ne * gu * 64), o_dq = take(ne * dn * 512),
                      o_ds = take(ne * dn * 64), o_gs = take(3 * 4 * ne), o_router = take(4 * d.experts * d.hidden),
                      o_bias = take(4 * d.experts);
    if (auto e = cudaMalloc(&w->mem_, off); e != cudaSuccess)
        return cuda_error(e, fmt::format("cuda: allocating {:.2f} GB of MoE weights", off / 1e9).c_str());
    w->bytes_ = off;
    auto *base = static_cast<std::uint8_t *>(w->mem_);
    w->dw_.gate_up_q = base + o_guq, w->dw_.gate_up_s = base + o_gus;
    w->dw_.down_q = base + o_dq, w->dw_.down_s = base + o_ds;
    auto *gs = reinterpret_cast<float *>(base + o_gs);
    w->dw_.gs_gate = gs, w->dw_.gs_up = gs + ne, w->dw_.gs_down = gs + 2 * ne;
    w->router_ = reinterpret_cast<float *>(base + o_router), w->bias_ = reinterpret_cast<float *>(base + o_bias);
    return w;
}

result<std::unique_ptr<gpu_moe_weights>> gpu_moe_weights::upload(const moe_desc &d, const moe_weights &mw) {
    auto alloc = allocate(d);
    if (!alloc.ok()) return alloc.get_status();
    auto w = std::move(alloc.value());
    const std::size_t ne = d.total_experts();
    if (mw.gate.size() != ne || mw.up.size() != ne || mw.down.size() != ne || !mw.router)
        return status{status_code::invalid_argument,
                      fmt::format("cuda: weights hold {} gate / {} up / {} down matrices, the layer needs {}",
                                  mw.gate.size(), mw.up.size(), mw.down.size(), ne)};
    const auto &dw = w->dw_;
    const std::size_t gu = static_cast<std::size_t>(dw.tiles_gu) * dw.ksteps_gu;
    const std::size_t dn = static_cast<std::size_t>(dw.tiles_down) * dw.ksteps_down;
    std::vector<float> gs(3 * ne);
    for (std::size_t e = 0; e < ne; ++e) {
        const std::string what =
            fmt::format("expert {}{}", e, e >= static_cast<std::size_t>(d.experts) ? " (shared)" : "");
        auto check_shape = [&](const nvfp4::matrix_view &m, std::int64_t rows, std::int64_t cols, const char *name) {
            return m.rows == rows && m.cols == cols
                       ? status::success()
                       : status{status_code::invalid_argument, fmt::format("cuda: {} {} is [{}, {}], expected [{}, {}]",
                                                                           what, name, m.rows, m.cols, rows, cols)};
        };
        for (auto st : {check_shape(mw.gate[e].nvfp4, d.intermediate, d.hidden, "gate"),
                        check_shape(mw.up[e].nvfp4, d.intermediate, d.hidden, "up"),
                        check_shape(mw.down[e].nvfp4, d.hidden, d.intermediate, "down")})
            if (!st.ok()) return st;
        auto gate_up = mma_pack::pack_gate_up(mw.gate[e].nvfp4, mw.up[e].nvfp4, (what + " gate/up").c_str());
        if (!gate_up.ok()) return gate_up.get_status();
        auto down = mma_pack::pack_rows(mw.down[e].nvfp4, (what + " down").c_str());
        if (!down.ok()) return down.get_status();
        auto copy = [&](const std::uint8_t *dst, const std::vector<std::uint8_t> &src) {
            return cudaMemcpy(const_cast<std::uint8_t *>(dst), src.data(), src.size(), cudaMemcpyHostToDevice);
        };
        for (auto err :
             {copy(dw.gate_up_q + e * gu * 512, gate_up.value().q),
              copy(dw.gate_up_s + e * gu * 64, gate_up.value().scales), copy(dw.down_q + e * dn * 512, down.value().q),
              copy(dw.down_s + e * dn * 64, down.value().scales)})
            if (err != cudaSuccess) return cuda_error(err, "cuda: weight upload");
        gs[e] = mw.gate[e].nvfp4.global_scale, gs[ne + e] = mw.up[e].nvfp4.global_scale;
        gs[2 * ne + e] = mw.down[e].nvfp4.global_scale;
    }
    for (auto err :
         {cudaMemcpy(const_cast<float *>(dw.gs_gate), gs.data(), 4 * gs.size(), cudaMemcpyHostToDevice),
          cudaMemcpy(w->router_, mw.router, 4 * d.experts * d.hidden, cudaMemcpyHostToDevice),
          mw.correction_bias ? cudaMemcpy(w->bias_, mw.correction_bias, 4 * d.experts, cudaMemcpyHostToDevice)
                             : cudaMemset(w->bias_, 0, 4 * d.experts)})
        if (err != cudaSuccess) return cuda_error(err, "cuda: weight upload");
    // The checkpoints store the router in bf16 (loaded as fp32): then one bf16 part per weight is exact.
    w->router_bf16_ = std::all_of(mw.router, mw.router + d.experts * d.hidden,
                                  [](float v) { return (std::bit_cast<std::uint32_t>(v) & 0xFFFFu) == 0; });
    return w;
}

result<std::unique_ptr<gpu_moe_weights>> gpu_moe_weights::random(const moe_desc &d, std::uint64_t seed,
                                                                 cudaStream_t stream) {
    auto alloc = allocate(d);
    if (!alloc.ok()) return alloc.get_status();
    auto w = std::move(alloc.value());
    const auto &dw = w->dw_;
    const std::size_t ne = d.total_experts();
    const std::size_t gu = static_cast<std::size_t>(dw.tiles_gu) * dw.ksteps_gu * ne;
    const std::size_t dn = static_cast<std::size_t>(dw.tiles_down) * dw.ksteps_down * ne;
    // Scale codes for 0.25 .. 3.75: exponents -2..1 -> codes (13 << 3) .. (16 << 3 | 7).
    for (auto err :
         {fill_random_bytes(const_cast<std::uint8_t *>(dw.gate_up_q), gu * 512, seed, 0, 255, stream),
          fill_random_bytes(const_cast<std::uint8_t *>(dw.gate_up_s), gu * 64, seed + 1, 13 << 3, 16 << 3 | 7, stream),
          fill_random_bytes(const_cast<std::uint8_t *>(dw.down_q), dn * 512, seed + 2, 0, 255, stream),
          fill_random_bytes(const_cast<std::uint8_t *>(dw.down_s), dn * 64, seed + 3, 13 << 3, 16 << 3 | 7, stream),
          fill_floats(const_cast<float *>(dw.gs_gate), 3 * ne, 1e-3f, stream),
          fill_random_floats(w->router_, d.experts * d.hidden, seed + 4, 3.0f / std::sqrt(static_cast<float>(d.hidden)),
                             stream, /*bf16_values=*/true),
          fill_random_floats(w->bias_, d.experts, seed + 5, 0.1f, stream)})
        if (err != cudaSuccess) return cuda_error(err, "cuda: random weights");
    w->router_bf16_ = true;
    return w;
}

// ---- the layer forward ---------------------------------------------------------------------------------

std::size_t gpu_moe_forward_workspace(const moe_desc &d, std::int64_t max_tokens) {
    return make_region(d, max_tokens).total;
}

status gpu_moe_forward(const moe_desc &d, const gpu_moe_weights &w, const bf16_t *x, bf16_t *out, std::int64_t tokens,
                       std::int64_t max_tokens, void *ws, gpu_tactic t, cudaStream_t stream) {
    if (auto st = check_desc(d); !st.ok()) return st;
    if (auto st = check_tactic(t); !st.ok()) return st;
    if (tokens < 0 || tokens > max_tokens)
        return {status_code::invalid_argument, fmt::format("cuda: {} tokens, capacity {}", tokens, max_tokens)};
    if (tokens == 0) return status::success();
    const region r = make_region(d, max_tokens);
    const int T = static_cast<int>(tokens);
    route_rule rule;
    rule.experts = static_cast<int>(d.experts), rule.top_k = static_cast<int>(d.top_k);
    rule.shared = static_cast<int>(d.shared), rule.softmax = d.routing.scoring == moe_scoring::softmax;
    rule.renormalize = d.routing.renormalize, rule.correction_bias = d.routing.correction_bias;
    rule.n_group = d.routing.n_group, rule.topk_group = d.routing.topk_group;
    rule.routed_scaling_factor = d.routing.routed_scaling_factor;
    plan_buffers pb;
    pb.counts = at<std::int32_t>(ws, r.counts), pb.offsets = at<std::int32_t>(ws, r.offsets);
    pb.perm = at<std::int32_t>(ws, r.perm), pb.inv_perm = at<std::int32_t>(ws, r.inv_perm);
    pb.masked_pairs = d.layout == moe_layout::masked ? at<std::int32_t>(ws, r.masked) : nullptr;
    if (moe_plan_scratch_ints(static_cast<int>(max_tokens), static_cast<int>(d.slots()),
                              static_cast<int>(d.total_experts())) > 0)
        pb.scratch = at<std::int32_t>(ws, r.plan_scratch); // large batches: the multi-CTA plan
    // A token with non-finite logits gets ids -1 and NaN outputs (no host-visible error flag: that would need a
    // sync, or one more graph node per layer to reset it).
    const auto *xb = reinterpret_cast<const std::uint16_t *>(x);
    const float *bias = d.routing.correction_bias ? w.bias() : nullptr;
    if (moe_route_fused_preferred(T, rule)) { // decode: logits, then top-k + plan in one CTA (PDL chain)
        if (auto e = moe_route_fused(xb, w.router(), bias, T, static_cast<int>(d.hidden), rule,
                                     static_cast<int>(max_tokens), at<float>(ws, r.logits), at<std::int32_t>(ws, r.ids),
                                     at<float>(ws, r.weights), nullptr, pb, stream, w.router_bf16());
            e != cudaSuccess)
            return cuda_error(e, "cuda: MoE routing");
    } else {
        for (auto e : {moe_router_logits(xb, w.router(), T, static_cast<int>(d.hidden), static_cast<int>(d.experts),
                                         at<float>(ws, r.logits), stream, w.router_bf16()),
                       moe_route_topk(at<float>(ws, r.logits), bias, T, rule, at<std::int32_t>(ws, r.ids),
                                      at<float>(ws, r.weights), nullptr, stream),
                       moe_build_plan(at<std::int32_t>(ws, r.ids), T, static_cast<int>(d.slots()),
                                      static_cast<int>(d.total_experts()), static_cast<int>(max_tokens), pb, stream)})
            if (e != cudaSuccess) return cuda_error(e, "cuda: MoE routing");
    }
    return run_experts(d, w, x, out, tokens, max_tokens, ws, t, stream);
}

result<std::vector<std::int32_t>> gpu_moe_counts(const moe_desc &d, std::int64_t max_tokens, const void *ws,
                                                 cudaStream_t stream) {
    const region r = make_region(d, max_tokens);
    std::vector<std::int32_t> counts(d.total_experts());
    if (auto e = cudaMemcpyAsync(counts.data(), static_cast<const std::uint8_t *>(ws) + r.counts, 4 * counts.size(),
                                 cudaMemcpyDeviceToHost, stream);
        e != cudaSuccess)
        return cuda_error(e, "cuda: reading counts");
    if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_error(e, "cuda: reading counts");
    return counts;
}

} // namespace fp4moe::cuda
