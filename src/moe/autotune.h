// The MoE autotuner: per token bucket, the fastest (runner, tactic) for a layer shape on a device, measured
// once and kept in a JSON cache (design.md "MoE runners"; buckets as FlashInfer's last-power-of-two rule).
//
// The tuner owns no runners and no timing code: the caller passes the candidate runners and a `moe_timer`
// (the CPU backend times wall-clock runs; the CUDA backend can time CUDA-graph replays). No global state:
// an engine creates one `moe_autotuner` and passes it to whatever builds MoE layers.
//
// Threading: a tuner is not thread-safe; guard it externally when several threads choose concurrently.
#pragma once

#include "fp4moe/moe.h"

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4moe {

/// Bucket of a batch: the largest power of two <= tokens (1 for tokens <= 1).
std::int64_t moe_token_bucket(std::int64_t tokens);

/// Buckets 1, 2, 4, ..., moe_token_bucket(max_tokens).
std::vector<std::int64_t> moe_token_buckets(std::int64_t max_tokens);

/// A runner the tuner may pick. `autotune = false` keeps it out of tuning (it can still be forced by name):
/// the cpu.ref oracle is correct but slow by design. When no autotune runner supports a shape, the others
/// are tuned instead, so every shape some runner supports gets an answer.
struct moe_candidate {
    const moe_runner *runner = nullptr; ///< not owned; must outlive the tuner
    bool autotune = true;
};

/// The hardware and software a measurement is valid for; with the desc, the cache key.
struct moe_tune_target {
    moe_device device;       ///< passed to runner.supports()
    std::string device_name; ///< "cpu AMD EPYC 7763", "NVIDIA H200"
    std::string driver;      ///< GPU driver version; "none" on the CPU
};

/// Measures one (runner, tactic) on a batch of `tokens` tokens of layer `d` and returns the typical time of
/// one run in microseconds (a median after warm-up). `best_us` is the fastest time seen so far for this
/// bucket (+infinity for the first candidate and in the final rounds), so a timer may stop early on a clearly
/// slower candidate. An error skips the candidate (logged).
using moe_timer = std::function<result<double>(const moe_desc &d, const moe_runner &r, const moe_tactic &t,
                                               std::int64_t tokens, double best_us)>;

/// The tuner's knobs; `moe_autotune_options_from_env()` reads the FP4MOE_* ones (docs/env.md).
struct moe_autotune_options {
    std::string runner = "auto"; ///< "auto" (or empty) tunes; a runner name forces it (tactic 0), no timing
    std::string cache_path;      ///< JSON cache to read at construction and write after tuning; empty: none
    bool print_configs = false;  ///< print each choice once on stderr (desc, bucket -> runner/tactic, us)
    bool progress = true;        ///< a one-line progress indicator on stderr while tuning, when it is a terminal
};

/// FP4MOE_MOE_RUNNER, FP4MOE_TUNE_CACHE, FP4MOE_PRINT_CONFIGS (progress stays on).
moe_autotune_options moe_autotune_options_from_env();

/// A chosen variant for one (desc, bucket).
struct moe_choice {
    enum class origin { tuned, cache, forced };
    const moe_runner *runner = nullptr;
    moe_tactic tactic;
    std::int64_t bucket = 0;
    double us = 0.0; ///< the measured time for the bucket; 0 when forced
    origin from = origin::tuned;
};

class moe_autotuner {
public:
    /// Reads `opts.cache_path` when it exists: a cache made for another device, driver or fp4moe build is
    /// ignored (one log line) and replaced on the next save; an unreadable one likewise.
    moe_autotuner(std::vector<moe_candidate> runners, moe_tune_target target, moe_timer timer,
                  moe_autotune_options opts = {});

    /// Whether choices for `d` can be made: with a forced runner, that it exists (else invalid_argument
    /// listing the runners) and supports `d` (else unsupported); otherwise that some runner supports `d`.
    status check(const moe_desc &d) const;

    /// The variant for a batch of `tokens` tokens: forced, cached, or measured now (every supporting
    /// (runner, tactic) timed at the bucket size, then those within 15 % of the best (at most 4) timed twice
    /// more in interleaved rounds, each keeping its lowest time; the fastest wins, ties to the earlier candidate).
    result<moe_choice> choose(const moe_desc &d, std::int64_t tokens);

    /// Measures every bucket up to `max_tokens` not yet known (model warm-up), then saves the cache.
    status tune(const moe_desc &d, std::int64_t max_tokens);

    /// Writes every known choice to the cache path (atomically: a temporary file renamed); ok without a path.
    status save_cache() const;

    /// The cache document (what save_cache writes) and its inverse; load_cache_json applies the same key
    /// checks as the constructor and returns false (logged) when the document is ignored.
    std::string cache_json() const;
    bool load_cache_json(std::string_view text, std::string_view origin);

    /// "version+commit" of this build: part of the cache key.
    static std::string build_key();

    const moe_tune_target &target() const { return target_; }
    const moe_autotune_options &options() const { return opts_; }
    /// Names of every runner, in the order given ("cpu.ref, cpu.fast").
    std::string runner_names() const;
    /// The runner called `name`, or null.
    const moe_runner *find_runner(std::string_view name) const;

private:
    struct entry {
        std::string runner;
        int tactic = 0;
        std::string tactic_name;
        double us = 0.0;
        bool from_cache = false;
    };
    bool forced() const;
    result<moe_choice> resolve(const moe_desc &d, std::int64_t bucket, const entry &e, moe_choice::origin from) const;
    result<entry> measure(const moe_desc &d, std::int64_t bucket);
    void print_once(const moe_desc &d, const moe_choice &c);

    std::vector<moe_candidate> runners_;
    moe_tune_target target_;
    moe_timer timer_;
    moe_autotune_options opts_;
    std::map<std::string, std::map<std::int64_t, entry>> table_; // desc.to_string() -> bucket -> choice
    std::set<std::pair<std::string, std::int64_t>> printed_;
};

} // namespace fp4moe
