#include "backend/cpu/bench_moe_cpu.h"

#include "backend/cpu/bench_cpu.h"
#include "backend/cpu/registry.h"
#include "backend/cpu/runners.h"
#include "core/log.h"
#include "moe/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <unistd.h>

namespace fp4moe::cpu {
namespace {

using clock_type = std::chrono::steady_clock;

std::uint64_t splitmix(std::uint64_t &s) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [-a, a).
float uniform(std::uint64_t &s, float a) {
    return a * (static_cast<float>(splitmix(s) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

struct byte_buffer {
    struct deleter {
        void operator()(std::uint8_t *p) const { std::free(p); }
    };
    std::unique_ptr<std::uint8_t[], deleter> p;
    std::size_t size = 0;
    void reset(std::size_t n) {
        size = n;
        p.reset(static_cast<std::uint8_t *>(std::aligned_alloc(64, std::max<std::size_t>(64, (n + 63) / 64 * 64))));
    }
    std::uint8_t *data() const { return p.get(); }
};

// Expert slots: each holds gate [I,H], up [I,H], down [H,I], random but sane (no NaN/Inf, |w| ~ 1e-3..1e-2).
// NVFP4: random E2M1 bytes, E4M3 scales drawn from 0x28..0x48 (0.25..4), global scale 1e-3: generating
// 1+ GB this way takes a second where quantize() would take minutes.
class weight_pool {
public:
    weight_pool(thread_pool &tp, const moe_desc &d, std::int64_t slots, std::uint64_t seed) : d_(d), slots_(slots) {
        const auto f = d.weights;
        mat_bytes_[0] = mat_bytes_[1] = raw_bytes(d.intermediate, d.hidden);
        mat_bytes_[2] = raw_bytes(d.hidden, d.intermediate);
        slot_bytes_ = mat_bytes_[0] + mat_bytes_[1] + mat_bytes_[2];
        buf_.reset(slot_bytes_ * slots);
        tp.parallel_for(slots, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t s = b; s < e; ++s) {
                std::uint64_t rng = seed * 0x100000001B3ull + static_cast<std::uint64_t>(s);
                std::uint8_t *base = buf_.data() + s * slot_bytes_;
                for (int m = 0; m < 3; ++m) {
                    const auto [n, k] = dims(m);
                    if (f == moe_weight_format::nvfp4) {
                        fill_random(base, n * k / 2, rng);
                        std::uint8_t *sc = base + n * k / 2;
                        for (std::int64_t i = 0; i < n * k / 16; ++i)
                            sc[i] = static_cast<std::uint8_t>(0x28 + splitmix(rng) % 33);
                    } else {
                        auto *w = reinterpret_cast<std::uint16_t *>(base);
                        for (std::int64_t i = 0; i < n * k; ++i) {
                            const std::uint64_t r = splitmix(rng);
                            // sign | exponent 2^-10..2^-7 | random mantissa
                            w[i] = static_cast<std::uint16_t>(((r & 1) << 15) | ((0x75 + (r >> 1) % 4) << 7) |
                                                              ((r >> 8) & 0x7F));
                        }
                    }
                    base += mat_bytes_[m];
                }
            }
        });
    }

    std::int64_t slots() const { return slots_; }
    std::uint64_t bytes() const { return slot_bytes_ * slots_; }

    // Matrix `m` (0 gate, 1 up, 2 down) of slot `s`.
    moe_matrix matrix(std::int64_t s, int m) const {
        const std::uint8_t *base = buf_.data() + s * slot_bytes_;
        for (int i = 0; i < m; ++i) base += mat_bytes_[i];
        const auto [n, k] = dims(m);
        moe_matrix mm;
        if (d_.weights == moe_weight_format::nvfp4)
            mm.nvfp4 = {n, k, base, base + n * k / 2, 1e-3f};
        else
            mm.bf16 = reinterpret_cast<const bf16_t *>(base);
        return mm;
    }

private:
    std::pair<std::int64_t, std::int64_t> dims(int m) const {
        return m < 2 ? std::pair{d_.intermediate, d_.hidden} : std::pair{d_.hidden, d_.intermediate};
    }
    std::size_t raw_bytes(std::int64_t n, std::int64_t k) const {
        return d_.weights == moe_weight_format::nvfp4 ? n * k / 2 + n * k / 16 : 2 * n * k;
    }
    static void fill_random(std::uint8_t *p, std::int64_t n, std::uint64_t &rng) {
        std::int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const std::uint64_t r = splitmix(rng);
            std::memcpy(p + i, &r, 8);
        }
        for (; i < n; ++i) p[i] = static_cast<std::uint8_t>(splitmix(rng));
    }

    moe_desc d_;
    std::int64_t slots_;
    std::size_t mat_bytes_[3] = {};
    std::size_t slot_bytes_ = 0;
    byte_buffer buf_;
};

// One layer as the runner sees it: expert e of copy c lives in pool slot (offset_c + e) mod slots.
struct layer_copy {
    std::vector<moe_matrix> gate, up, down;
    std::vector<float> router; // [E, H]
    std::vector<float> bias;   // [E]
    moe_weights w;
};

// Everything one run needs; built once per benchmark.
class moe_bench_env {
public:
    moe_bench_env(const moe_bench_options &o, thread_pool &tp) : o_(o), d_(o.desc), tp_(tp) {
        const std::uint64_t llc = llc_bytes(), expert = moe_expert_bytes(d_);
        const std::int64_t et = d_.total_experts();
        std::uint64_t cap = o.pool_gib > 0 ? static_cast<std::uint64_t>(o.pool_gib * (1ull << 30))
                                           : std::min<std::uint64_t>(6ull << 30, mem_available_bytes() / 3);
        if (cap == 0) cap = 2ull << 30;
        const std::uint64_t want = std::max<std::uint64_t>(et * expert, 32 * llc);
        const std::int64_t slots = std::max<std::int64_t>(
            1, static_cast<std::int64_t>(std::min(want, std::max<std::uint64_t>(cap, expert)) / expert));
        pool_ = std::make_unique<weight_pool>(tp, d_, slots, o.seed);

        // Layer copies: enough routers (E x H fp32 each) to cover 4 x LLC too.
        const std::uint64_t router_bytes = static_cast<std::uint64_t>(d_.experts * d_.hidden) * 4;
        const std::int64_t copies = std::clamp<std::int64_t>((4 * llc + router_bytes - 1) / router_bytes, 8, 64);
        std::uint64_t rng = o.seed ^ 0xC0FFEEull;
        const float ra = std::sqrt(3.0f / static_cast<float>(d_.hidden)); // logits ~ unit variance
        copies_.resize(copies);
        for (auto &c : copies_) {
            const std::int64_t off = static_cast<std::int64_t>(splitmix(rng) % slots);
            for (std::int64_t e = 0; e < et; ++e) {
                const std::int64_t s = (off + e) % slots;
                c.gate.push_back(pool_->matrix(s, 0));
                c.up.push_back(pool_->matrix(s, 1));
                c.down.push_back(pool_->matrix(s, 2));
            }
            c.router.resize(d_.experts * d_.hidden);
            for (auto &v : c.router) v = uniform(rng, ra);
            c.bias.resize(d_.experts);
            for (auto &v : c.bias) v = uniform(rng, 0.01f);
            if (o.skew > 0) {
                // Zipf: hidden channel 0 of every token is 1, so router column 0 adds -s*ln(rank) to the logits
                // (rank 1 = hottest, a random permutation per layer copy): softmax p ~ rank^-s x noise.
                std::vector<std::int64_t> rank(d_.experts);
                std::iota(rank.begin(), rank.end(), 1);
                for (std::int64_t i = d_.experts - 1; i > 0; --i) std::swap(rank[i], rank[splitmix(rng) % (i + 1)]);
                for (std::int64_t e = 0; e < d_.experts; ++e)
                    c.router[e * d_.hidden] = -static_cast<float>(o.skew * std::log(double(rank[e])));
            }
            c.w.router = c.router.data();
            c.w.correction_bias = d_.routing.correction_bias ? c.bias.data() : nullptr;
            c.w.gate = c.gate;
            c.w.up = c.up;
            c.w.down = c.down;
        }
        pool_text_ = fmt::format("{} expert slots x {:.1f} MB = {:.2f} GB ({:.0f} x LLC of {} MiB){}; {} layer "
                                 "copies at random slot offsets, each with its own router",
                                 slots, expert / 1e6, pool_->bytes() / 1e9, double(pool_->bytes()) / double(llc),
                                 llc >> 20, slots < et ? " (fewer slots than experts: copies alias)" : "", copies);
    }

    const std::string &pool_text() const { return pool_text_; }
    std::int64_t tokens() const { return tokens_; }

    // Prepares buffers for batches of `tokens` tokens (inputs, logits, plan, workspace for `runners`).
    void set_tokens(std::int64_t tokens, std::span<const moe_runner *const> runners) {
        tokens_ = tokens;
        const std::int64_t H = d_.hidden;
        x_.assign(tokens * H, bf16_t{});
        std::uint64_t rng = o_.seed * 31 + static_cast<std::uint64_t>(tokens);
        for (std::int64_t t = 0; t < tokens; ++t)
            for (std::int64_t h = 0; h < H; ++h)
                x_[t * H + h] = float_to_bf16(o_.skew > 0 && h == 0 ? 1.0f : uniform(rng, 1.7320508f));
        out_.assign(tokens * H, bf16_t{});
        xf_.assign(tokens * H, 0.0f);
        logits_.assign(tokens * d_.experts, 0.0f);
        plan_ = moe_plan(d_, tokens);
        std::size_t ws = 0;
        for (const auto *r : runners) ws = std::max(ws, r->workspace_size(d_, tokens));
        ws_.reset(ws);
    }

    struct timing {
        double us = 0, bytes = 0;
        int samples = 0;
    };

    // Median over timed runs of the whole block. Stops after `iters` runs or when `budget_s` is spent (at
    // least one timed run); with `stop_if_slower_us`, returns after the first timed run when it is slower.
    result<timing> measure(const moe_runner &r, const moe_tactic &t, int warmup, int iters, double budget_s,
                           double stop_if_slower_us = std::numeric_limits<double>::infinity()) {
        const moe_device dev = cpu_device(o_.threads);
        std::vector<double> us;
        double bytes = 0;
        const auto start = clock_type::now();
        for (int i = 0; i < warmup + iters; ++i) {
            layer_copy &c = copies_[iter_++ % copies_.size()];
            const auto t0 = clock_type::now();
            router_logits_parallel(tp_, d_, x_.data(), tokens_, c.router.data(), xf_.data(), logits_.data());
            if (auto st = moe_route(d_, logits_, c.w.correction_bias, tokens_, plan_); !st.ok()) return st;
            moe_args a{x_.data(), out_.data(), &c.w, ws_.data(), ws_.size};
            if (auto st = r.run(d_, a, plan_, t, dev); !st.ok()) return st;
            const double dt = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
            if (i < warmup) {
                // A warm-up run that is itself over budget counts as the measurement.
                if (dt * 1e-6 < budget_s) continue;
            }
            us.push_back(dt);
            bytes += moe_block_cost(d_, tokens_, moe_plan_touched_experts(plan_)).bytes;
            if (dt > stop_if_slower_us) break;
            if (std::chrono::duration<double>(clock_type::now() - start).count() > budget_s) break;
        }
        std::sort(us.begin(), us.end());
        const std::size_t n = us.size();
        timing tm;
        tm.samples = static_cast<int>(n);
        tm.us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
        tm.bytes = bytes / static_cast<double>(n);
        return tm;
    }

private:
    const moe_bench_options &o_;
    moe_desc d_;
    thread_pool &tp_;
    std::unique_ptr<weight_pool> pool_;
    std::vector<layer_copy> copies_;
    std::string pool_text_;
    std::uint64_t iter_ = 0;
    std::int64_t tokens_ = 0;
    std::vector<bf16_t> x_, out_;
    std::vector<float> xf_, logits_;
    moe_plan plan_;
    byte_buffer ws_;
};

// Estimated seconds of one run at `tokens` from the last measurement of the same series (linear in T: an
// over-estimate in the weight-bound regime, which is where the cap matters least).
struct run_estimates {
    std::map<std::string, std::pair<std::int64_t, double>> last; // series -> (T, us)
    double seconds(const std::string &key, std::int64_t tokens) const {
        auto it = last.find(key);
        if (it == last.end()) return 0;
        return it->second.second * 1e-6 * double(tokens) / double(it->second.first);
    }
};

class progress_line {
public:
    progress_line() : on_(isatty(fileno(stderr))) {}
    ~progress_line() {
        if (on_) std::fputs("\r\033[K", stderr);
    }
    void show(const std::string &s) {
        if (on_) fmt::print(stderr, "\r\033[K{}", s), std::fflush(stderr);
    }

private:
    bool on_;
};

} // namespace

result<moe_bench_report> run_moe_bench(const moe_bench_options &o) {
    const moe_desc &d = o.desc;
    if (auto st = d.validate(); !st.ok()) return st;
    if (o.tokens.empty()) return status{status_code::invalid_argument, "no token counts given"};
    for (auto t : o.tokens)
        if (t <= 0)
            return status{status_code::invalid_argument, fmt::format("token counts must be positive, got {}", t)};

    runner_registry reg(o.threads);
    std::vector<const moe_runner *> selected;
    if (o.runners.empty()) {
        for (const auto &c : reg.candidates()) selected.push_back(c.runner);
    } else {
        for (const auto &name : o.runners) {
            const moe_runner *r = reg.find(name);
            if (!r)
                return status{status_code::invalid_argument,
                              fmt::format("unknown runner '{}' (available: {}, all)", name, reg.names())};
            selected.push_back(r);
        }
    }
    {
        std::vector<std::pair<std::string, std::vector<moe_tactic>>> offered;
        for (const auto *r : selected) offered.emplace_back(std::string(r->name()), r->tactics(d));
        if (auto st = moe_bench_check_tactics(o, offered); !st.ok()) return st;
    }
    const moe_device dev = cpu_device(o.threads);
    std::vector<const moe_runner *> all;
    for (const auto &c : reg.candidates()) all.push_back(c.runner);

    moe_bench_report rep;
    rep.meta = moe_bench_meta_from(o);
    auto &m = rep.meta;
    const moe_tune_target target = cpu_tune_target(o.threads);
    m.device = target.device_name;
    m.threads = dev.threads;

    thread_pool tp(dev.threads);
    progress_line progress;
    progress.show("measuring read bandwidth and fp32 peak...");
    m.bandwidth_gbps = measure_read_bandwidth_gbps(tp);
    const peak_result peak = measure_fp32_peak(tp);
    m.peak_tflops = peak.tflops;
    m.peak_kind = peak.kind;

    progress.show(
        fmt::format("generating random {} weights...", d.weights == moe_weight_format::nvfp4 ? "NVFP4" : "bf16"));
    moe_bench_env env(o, tp);
    m.pool = env.pool_text();

    const std::vector<std::int64_t> tokens = moe_bench_token_list(o);

    run_estimates est;
    const auto key = [](const moe_runner &r, const moe_tactic &t) { return fmt::format("{}#{}", r.name(), t.id); };
    // The autotuner times candidates with the same harness, shorter.
    moe_timer timer = [&](const moe_desc &, const moe_runner &r, const moe_tactic &t, std::int64_t tok,
                          double best_us) -> result<double> {
        const double s = est.seconds(key(r, t), tok);
        if (s > o.max_run_s) return status{status_code::unsupported, fmt::format("estimated {:.0f} s per run", s)};
        const std::int64_t prev = env.tokens();
        if (tok != prev) env.set_tokens(tok, all); // a bucket below a T that is not a power of two
        auto tm = env.measure(r, t, 1, 5, std::min(2.0, o.row_budget_s), 1.5 * best_us);
        if (tok != prev) env.set_tokens(prev, all);
        if (!tm.ok()) return tm.get_status();
        return tm.value().us;
    };
    moe_autotune_options topts = moe_autotune_options_from_env();
    if (!o.moe_runner.empty()) topts.runner = o.moe_runner;
    moe_autotuner tuner({reg.candidates().begin(), reg.candidates().end()}, target, timer, topts);
    if (o.auto_row)
        if (auto st = tuner.check(d); !st.ok()) return st;

    for (std::int64_t T : tokens) {
        env.set_tokens(T, all);
        const std::size_t first_row = rep.rows.size();
        for (const auto *r : selected) {
            if (!r->supports(d, dev)) {
                rep.rows.push_back({std::string(r->name()), 0, "", o.shape_name, T});
                rep.rows.back().skipped = "does not support this shape";
                continue;
            }
            for (const auto &t : moe_bench_tactics(r->tactics(d), o)) {
                moe_bench_row row{std::string(r->name()), t.id, t.name, o.shape_name, T};
                const double s = est.seconds(key(*r, t), T);
                if (s > o.max_run_s) {
                    row.skipped = fmt::format("estimated {:.0f} s per run > --max-run-s {:g}", s, o.max_run_s);
                    rep.rows.push_back(row);
                    continue;
                }
                progress.show(fmt::format("T={} {} [{}]...", T, r->name(), t.name));
                auto tm = env.measure(*r, t, o.warmup, o.iters, o.row_budget_s);
                if (!tm.ok()) return tm.get_status();
                row.us = tm.value().us;
                row.samples = tm.value().samples;
                row.bytes = tm.value().bytes;
                row.flops = moe_block_cost(d, T, 0).flops;
                moe_bench_fill_rates(row, m.bandwidth_gbps, m.peak_tflops);
                est.last[key(*r, t)] = {T, row.us};
                rep.rows.push_back(row);
            }
        }
        if (!o.auto_row) continue;
        progress.show(fmt::format("T={} autotune...", T));
        auto choice = tuner.choose(d, T);
        moe_bench_row row{"auto", 0, "", o.shape_name, T};
        if (!choice.ok()) {
            row.skipped = choice.get_status().message();
            rep.rows.push_back(row);
            continue;
        }
        const auto &c = choice.value();
        row.tactic_id = c.tactic.id;
        row.tactic = fmt::format("{} [{}]", c.runner->name(), c.tactic.name);
        // Reuse this run's row of the chosen (runner, tactic) when it was measured; measure it otherwise.
        const moe_bench_row *same = nullptr;
        for (std::size_t i = first_row; i < rep.rows.size(); ++i)
            if (rep.rows[i].runner == c.runner->name() && rep.rows[i].tactic_id == c.tactic.id &&
                rep.rows[i].skipped.empty())
                same = &rep.rows[i];
        if (same) {
            row.us = same->us, row.samples = same->samples, row.bytes = same->bytes, row.flops = same->flops;
        } else if (const double s = est.seconds(key(*c.runner, c.tactic), T); s > o.max_run_s) {
            row.skipped = fmt::format("estimated {:.0f} s per run > --max-run-s {:g}", s, o.max_run_s);
        } else {
            progress.show(fmt::format("T={} auto: {} [{}]...", T, c.runner->name(), c.tactic.name));
            auto tm = env.measure(*c.runner, c.tactic, o.warmup, o.iters, o.row_budget_s);
            if (!tm.ok()) return tm.get_status();
            row.us = tm.value().us, row.samples = tm.value().samples, row.bytes = tm.value().bytes;
            row.flops = moe_block_cost(d, T, 0).flops;
        }
        if (row.skipped.empty()) {
            moe_bench_fill_rates(row, m.bandwidth_gbps, m.peak_tflops);
            double best = row.us;
            for (std::size_t i = first_row; i < rep.rows.size(); ++i)
                if (rep.rows[i].skipped.empty()) best = std::min(best, rep.rows[i].us);
            row.regret = row.us / best;
        }
        rep.rows.push_back(row);
    }
    return rep;
}

} // namespace fp4moe::cpu
