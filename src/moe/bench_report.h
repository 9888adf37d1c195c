// MoE block benchmarks, backend-neutral part: options, the bytes/FLOPs accounting, result rows and their
// output (table, JSON, CSV, SVG). Backends time runs (src/backend/cpu/bench_moe_cpu.cpp) and fill the rows.
//
// What one row measures: the whole MoE block as a model runs it: router logits, moe_route (top-k + plan),
// then the runner (both grouped GEMMs, SiLU*up, combine; shared experts included as slots).
#pragma once

#include "fp4moe/moe.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fp4moe {

/// What `fp4moe bench moe` was asked to do.
struct moe_bench_options {
    std::string shape_name; ///< preset name, or "custom"
    moe_desc desc;          ///< the layer (weights format and layout included)
    std::vector<std::int64_t> tokens{1, 4, 16, 64, 256, 1024};
    std::vector<std::string> runners; ///< runner names; empty = all
    bool auto_row = true;             ///< add the autotuner's pick (`auto`) per token count
    std::string moe_runner;           ///< the auto row's runner: "" = FP4MOE_MOE_RUNNER, "auto" tunes, a name forces it
    bool all_tactics = true;          ///< a row per tactic (false: tactic 0 only)
    std::vector<std::string> tactic_filter; ///< not empty: only the tactics whose name contains one of these
    double skew = 0.0;                      ///< Zipf exponent of the router logits (0: uniform routing)
    int threads = 0;                        ///< CPU threads (0: all)
    int warmup = 2;                         ///< untimed runs before sampling
    int iters = 10;                         ///< timed runs (fewer when row_budget_s runs out; at least one)
    double row_budget_s = 5.0;              ///< stop sampling a row after this many seconds
    double max_run_s = 20.0;                ///< skip a (runner, T) whose one run is estimated to take longer
    double pool_gib = 0.0;                  ///< cap of the weight pool (0: min(6 GiB, a third of free memory))
    std::uint64_t seed = 1;
    std::string command; ///< the command line, for the report
};

/// Bytes of one [n, k] weight matrix: nvfp4 n*k/2 (E2M1) + n*k/16 (E4M3 scales) + 4 (global scale);
/// bf16 2*n*k.
std::uint64_t moe_matrix_bytes(moe_weight_format f, std::int64_t n, std::int64_t k);

/// Bytes of one expert: gate [I, H], up [I, H], down [H, I].
std::uint64_t moe_expert_bytes(const moe_desc &d);

/// Distinct experts (routed and shared) with at least one token in `p`.
std::int64_t moe_plan_touched_experts(const moe_plan &p);

/// Work of one block run.
struct moe_block_work {
    double bytes = 0; ///< router weights E*H*4 + touched experts * expert bytes + activations in and out 2*T*H*2
    double flops = 0; ///< router 2*T*H*E + experts 2*T*slots*3*H*I
};
moe_block_work moe_block_cost(const moe_desc &d, std::int64_t tokens, std::int64_t touched_experts);

/// One measured (runner, tactic, T). Skipped cells have `skipped` set and no time.
struct moe_bench_row {
    std::string runner; ///< "cpu.fast", or "auto"
    int tactic_id = 0;
    std::string tactic; ///< tactic name; for auto rows "runner/tactic" of the pick
    std::string shape;
    std::int64_t tokens = 0;
    double us = 0;    ///< median of the timed runs, microseconds
    int samples = 0;  ///< timed runs behind the median
    double bytes = 0; ///< averaged over the timed runs (the touched experts vary with the layer copy)
    double flops = 0;
    double tflops = 0;            ///< flops / us
    double gbps = 0;              ///< bytes / us, 1e9 B/s
    double pct_floor = 0;         ///< 100 * max(bytes / bandwidth, flops / peak) / us
    std::optional<double> regret; ///< auto rows: auto time / best time at this T
    std::string skipped;          ///< why the cell was not measured ("" when measured)
};

struct moe_bench_meta {
    std::string device; ///< "cpu AMD EPYC 7763 (2 threads)"
    std::string commit;
    std::string date; ///< UTC, ISO 8601
    std::string command;
    double bandwidth_gbps = 0; ///< measured in the same run
    double peak_tflops = 0;    ///< measured in the same run
    std::string peak_kind;     ///< "fp32 FMA avx2", "fp32 scalar"
    std::string shape;
    std::string desc;
    int threads = 0;
    double skew = 0;
    std::string pool; ///< how the weights defeat the cache ("129 expert slots, 1.26 GB; 64 layer copies")
    std::uint64_t seed = 0;
};

struct moe_bench_report {
    moe_bench_meta meta;
    std::vector<moe_bench_row> rows;
};

/// The meta fields every backend fills the same way: commit, UTC date, command, shape, desc, skew and seed from
/// the options (device, threads, rates and pool are the backend's).
moe_bench_meta moe_bench_meta_from(const moe_bench_options &o);
/// The options' token counts, sorted and without repeats.
std::vector<std::int64_t> moe_bench_token_list(const moe_bench_options &o);

/// The tactics of one runner that the bench measures: all of them (tactic 0 alone when !all_tactics), narrowed to
/// those whose name contains one of tactic_filter when that is not empty.
std::vector<moe_tactic> moe_bench_tactics(std::vector<moe_tactic> tactics, const moe_bench_options &o);
/// invalid_argument naming the filter and every runner's tactics when tactic_filter selects no tactic of any of
/// the runners (name, tactics); ok otherwise.
status moe_bench_check_tactics(const moe_bench_options &o,
                               const std::vector<std::pair<std::string, std::vector<moe_tactic>>> &runners);

/// Fills tflops, gbps and pct_floor of a measured row from us, bytes, flops and the measured rates.
void moe_bench_fill_rates(moe_bench_row &r, double bandwidth_gbps, double peak_tflops);

/// A fixed-width text table (one line per row) preceded by the meta lines.
std::string moe_bench_table(const moe_bench_report &r);
/// A markdown table with the meta as a bullet list (for bench/results/<hw>/*.md).
std::string moe_bench_markdown(const moe_bench_report &r);
/// {"meta": {...}, "rows": [{runner, tactic, shape, tokens, us, tflops, gbps, pct_floor, bytes, flops,
/// regret (auto rows)...}]}; skipped rows carry "skipped" and null times.
std::string moe_bench_json(const moe_bench_report &r);
/// One header line, one line per row; the same columns as the JSON rows.
std::string moe_bench_csv(const moe_bench_report &r);
/// Two log-x panels: us vs T (log-log) and % of floor vs T, one line per runner/tactic series.
std::string moe_bench_svg(const moe_bench_report &r);

} // namespace fp4moe
