#include "moe/autotune.h"

#include "core/build_info.h"
#include "core/env.h"
#include "core/log.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

namespace fp4moe {
namespace {

constexpr const char *kCacheFormat = "fp4moe-moe-tune/1";
// The final rounds of a bucket's tuning (measure): candidates within 15 % of the best, at most 4, twice more.
constexpr double kFinalWindow = 0.15;
constexpr std::size_t kMaxFinalists = 4;
constexpr int kFinalRounds = 2;

std::string hex64(std::uint64_t v) {
    return fmt::format("{:016x}", v);
}

const char *origin_name(moe_choice::origin o) {
    switch (o) {
    case moe_choice::origin::tuned:
        return "tuned";
    case moe_choice::origin::cache:
        return "cache";
    case moe_choice::origin::forced:
        return "forced";
    }
    return "?";
}

// A one-line progress indicator on stderr, shown only on a terminal (no noise in logs and CI).
class progress_line {
public:
    explicit progress_line(bool enabled) : on_(enabled && isatty(fileno(stderr))) {}
    ~progress_line() {
        if (on_) std::fputs("\r\033[K", stderr);
    }
    template <typename... Args>
    void show(fmt::format_string<Args...> f, Args &&...args) {
        if (!on_) return;
        fmt::print(stderr, "\r\033[K{}", fmt::format(f, std::forward<Args>(args)...));
        std::fflush(stderr);
    }

private:
    bool on_;
};

} // namespace

std::int64_t moe_token_bucket(std::int64_t tokens) {
    if (tokens <= 1) return 1;
    return static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(tokens)));
}

std::vector<std::int64_t> moe_token_buckets(std::int64_t max_tokens) {
    std::vector<std::int64_t> b;
    for (std::int64_t t = 1; t <= moe_token_bucket(max_tokens); t *= 2) b.push_back(t);
    return b;
}

moe_autotune_options moe_autotune_options_from_env() {
    moe_autotune_options o;
    o.runner = env().moe_runner;
    o.cache_path = env().tune_cache;
    o.print_configs = env().print_configs;
    return o;
}

moe_autotuner::moe_autotuner(std::vector<moe_candidate> runners, moe_tune_target target, moe_timer timer,
                             moe_autotune_options opts)
    : runners_(std::move(runners)), target_(std::move(target)), timer_(std::move(timer)), opts_(std::move(opts)) {
    if (opts_.cache_path.empty() || !std::filesystem::exists(opts_.cache_path)) return;
    std::ifstream in(opts_.cache_path);
    std::stringstream ss;
    ss << in.rdbuf();
    load_cache_json(ss.str(), opts_.cache_path);
}

std::string moe_autotuner::build_key() {
    const auto &b = get_build_info();
    return fmt::format("{}+{}", b.version, b.commit);
}

bool moe_autotuner::forced() const {
    return !opts_.runner.empty() && opts_.runner != "auto";
}

std::string moe_autotuner::runner_names() const {
    std::string s;
    for (const auto &c : runners_) s += fmt::format("{}{}", s.empty() ? "" : ", ", c.runner->name());
    return s;
}

const moe_runner *moe_autotuner::find_runner(std::string_view name) const {
    for (const auto &c : runners_)
        if (c.runner->name() == name) return c.runner;
    return nullptr;
}

status moe_autotuner::check(const moe_desc &d) const {
    if (auto st = d.validate(); !st.ok()) return st;
    if (forced()) {
        const moe_runner *r = find_runner(opts_.runner);
        if (!r)
            return {status_code::invalid_argument,
                    fmt::format("unknown MoE runner '{}' (available: {}, or auto)", opts_.runner, runner_names())};
        if (!r->supports(d, target_.device))
            return {status_code::unsupported, fmt::format("MoE runner '{}' does not support {} on {}", opts_.runner,
                                                          d.to_string(), target_.device_name)};
        return status::success();
    }
    for (const auto &c : runners_)
        if (c.runner->supports(d, target_.device)) return status::success();
    return {status_code::unsupported,
            fmt::format("no MoE runner ({}) supports {} on {}", runner_names(), d.to_string(), target_.device_name)};
}

result<moe_choice> moe_autotuner::resolve(const moe_desc &d, std::int64_t bucket, const entry &e,
                                          moe_choice::origin from) const {
    const moe_runner *r = find_runner(e.runner);
    if (!r || !r->supports(d, target_.device))
        return status{status_code::not_found, fmt::format("runner '{}' is not available here", e.runner)};
    for (auto &t : r->tactics(d))
        if (t.id == e.tactic) return moe_choice{r, t, bucket, e.us, from};
    return status{status_code::not_found, fmt::format("runner '{}' has no tactic {}", e.runner, e.tactic)};
}

result<moe_autotuner::entry> moe_autotuner::measure(const moe_desc &d, std::int64_t bucket) {
    // Production runners first; the others (the oracle) only when none of them supports the shape.
    std::vector<const moe_runner *> pool;
    for (const auto &c : runners_)
        if (c.autotune && c.runner->supports(d, target_.device)) pool.push_back(c.runner);
    if (pool.empty())
        for (const auto &c : runners_)
            if (c.runner->supports(d, target_.device)) pool.push_back(c.runner);
    if (pool.empty())
        return status{status_code::unsupported, fmt::format("no MoE runner ({}) supports {} on {}", runner_names(),
                                                            d.to_string(), target_.device_name)};
    if (!timer_) return status{status_code::invalid_argument, "moe_autotuner: tuning needs a timer"};

    std::size_t total = 0;
    for (const auto *r : pool) total += r->tactics(d).size();
    progress_line progress(opts_.progress);
    struct measured {
        const moe_runner *runner;
        moe_tactic tactic;
        double us;
    };
    std::vector<measured> ok; // in candidate order (ties go to the earlier one)
    double best_us = std::numeric_limits<double>::infinity();
    std::size_t done = 0;
    for (const auto *r : pool) {
        for (const auto &t : r->tactics(d)) {
            progress.show("autotune {} T={}: {}/{} {} [{}]", d.to_string(), bucket, ++done, total, r->name(), t.name);
            auto us = timer_(d, *r, t, bucket, best_us);
            if (!us.ok()) {
                FP4MOE_LOG_WARN("autotune: {} tactic {} ({}) skipped at T={}: {}", r->name(), t.id, t.name, bucket,
                                us.get_status().message());
                continue;
            }
            FP4MOE_LOG_DEBUG("autotune: {} T={} {} tactic {} ({}): {:.1f} us", d.to_string(), bucket, r->name(), t.id,
                             t.name, us.value());
            ok.push_back({r, t, us.value()});
            best_us = std::min(best_us, us.value());
        }
    }
    if (ok.empty())
        return status{status_code::internal,
                      fmt::format("autotune: every candidate failed for {} at T={}", d.to_string(), bucket)};

    // The finalists: a device's clock can drift by more than the gap between close candidates over one sweep (the
    // H200 read the same CUDA graph 11 % apart seconds later), so one slow stretch could decide the pick. The
    // candidates within kFinalWindow of the best are measured again in kFinalRounds interleaved rounds (forward,
    // then backward) and each keeps its lowest time: drift only ever adds time.
    std::vector<std::size_t> finalists;
    for (std::size_t i = 0; i < ok.size(); ++i)
        if (ok[i].us <= best_us * (1.0 + kFinalWindow)) finalists.push_back(i);
    std::stable_sort(finalists.begin(), finalists.end(), [&](auto a, auto b) { return ok[a].us < ok[b].us; });
    if (finalists.size() > kMaxFinalists) finalists.resize(kMaxFinalists);
    std::sort(finalists.begin(), finalists.end());
    if (finalists.size() > 1)
        for (int round = 0; round < kFinalRounds; ++round)
            for (std::size_t j = 0; j < finalists.size(); ++j) {
                auto &m = ok[finalists[round % 2 ? finalists.size() - 1 - j : j]];
                progress.show("autotune {} T={}: final round {} {} [{}]", d.to_string(), bucket, round + 1,
                              m.runner->name(), m.tactic.name);
                auto us = timer_(d, *m.runner, m.tactic, bucket, std::numeric_limits<double>::infinity());
                if (us.ok()) m.us = std::min(m.us, us.value());
            }
    const measured *best = &ok.front();
    for (const auto &m : ok)
        if (m.us < best->us) best = &m;
    return entry{std::string(best->runner->name()), best->tactic.id, best->tactic.name, best->us};
}

void moe_autotuner::print_once(const moe_desc &d, const moe_choice &c) {
    if (!opts_.print_configs || !printed_.emplace(d.to_string(), c.bucket).second) return;
    fmt::print(stderr, "fp4moe: moe config: {} | T<={} bucket {} -> {} tactic {} ({}) {:.1f} us [{}]\n", d.to_string(),
               c.bucket * 2 - 1, c.bucket, c.runner->name(), c.tactic.id, c.tactic.name, c.us, origin_name(c.from));
}

result<moe_choice> moe_autotuner::choose(const moe_desc &d, std::int64_t tokens) {
    if (auto st = check(d); !st.ok()) return st;
    const std::int64_t bucket = moe_token_bucket(tokens);
    if (forced()) {
        const moe_runner *r = find_runner(opts_.runner);
        moe_choice c{r, r->tactics(d).front(), bucket, 0.0, moe_choice::origin::forced};
        print_once(d, c);
        return c;
    }
    auto &shape = table_[d.to_string()];
    if (auto it = shape.find(bucket); it != shape.end()) {
        auto c = resolve(d, bucket, it->second,
                         it->second.from_cache ? moe_choice::origin::cache : moe_choice::origin::tuned);
        if (c.ok()) {
            print_once(d, c.value());
            return c;
        }
        FP4MOE_LOG_INFO("autotune: cached choice for {} T={} dropped: {}", d.to_string(), bucket,
                        c.get_status().message());
        shape.erase(it);
    }
    auto e = measure(d, bucket);
    if (!e.ok()) return e.get_status();
    shape[bucket] = e.value();
    if (auto st = save_cache(); !st.ok()) FP4MOE_LOG_WARN("autotune: {}", st.message());
    auto c = resolve(d, bucket, e.value(), moe_choice::origin::tuned);
    if (c.ok()) print_once(d, c.value());
    return c;
}

status moe_autotuner::tune(const moe_desc &d, std::int64_t max_tokens) {
    if (auto st = check(d); !st.ok()) return st;
    if (forced()) return status::success();
    for (std::int64_t b : moe_token_buckets(max_tokens)) {
        auto c = choose(d, b);
        if (!c.ok()) return c.get_status();
    }
    return status::success();
}

std::string moe_autotuner::cache_json() const {
    nlohmann::ordered_json j;
    j["format"] = kCacheFormat;
    j["device"] = target_.device_name;
    j["driver"] = target_.driver;
    j["fp4moe"] = build_key();
    auto &shapes = j["shapes"] = nlohmann::json::array();
    for (const auto &[desc, buckets] : table_) {
        nlohmann::ordered_json s;
        s["desc"] = desc;
        std::uint64_t h = 1469598103934665603ull; // same FNV-1a as hash(moe_desc), over the stored string
        for (unsigned char ch : desc) h = (h ^ ch) * 1099511628211ull;
        s["desc_hash"] = hex64(h);
        auto &arr = s["buckets"] = nlohmann::json::array();
        for (const auto &[b, e] : buckets)
            arr.push_back({{"tokens", b},
                           {"runner", e.runner},
                           {"tactic", e.tactic},
                           {"tactic_name", e.tactic_name},
                           {"us", e.us}});
        shapes.push_back(std::move(s));
    }
    return j.dump(2) + "\n";
}

bool moe_autotuner::load_cache_json(std::string_view text, std::string_view origin) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        FP4MOE_LOG_INFO("autotune: ignoring tune cache {}: not a JSON object", origin);
        return false;
    }
    const auto field = [&](const char *k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
    const std::pair<std::string, std::string> key[] = {{field("format"), kCacheFormat},
                                                       {field("device"), target_.device_name},
                                                       {field("driver"), target_.driver},
                                                       {field("fp4moe"), build_key()}};
    const char *names[] = {"format", "device", "driver", "fp4moe"};
    for (int i = 0; i < 4; ++i)
        if (key[i].first != key[i].second) {
            FP4MOE_LOG_INFO("autotune: ignoring tune cache {}: made for {} '{}', this is '{}'", origin, names[i],
                            key[i].first, key[i].second);
            return false;
        }
    std::map<std::string, std::map<std::int64_t, entry>> loaded;
    try {
        for (const auto &s : j.at("shapes")) {
            const std::string desc = s.at("desc").get<std::string>();
            std::uint64_t h = 1469598103934665603ull;
            for (unsigned char ch : desc) h = (h ^ ch) * 1099511628211ull;
            if (s.at("desc_hash").get<std::string>() != hex64(h)) {
                FP4MOE_LOG_INFO("autotune: tune cache {}: entry for '{}' has a wrong hash, ignored", origin, desc);
                continue;
            }
            for (const auto &b : s.at("buckets"))
                loaded[desc][b.at("tokens").get<std::int64_t>()] =
                    entry{b.at("runner").get<std::string>(), b.at("tactic").get<int>(),
                          b.at("tactic_name").get<std::string>(), b.at("us").get<double>(), true};
        }
    } catch (const nlohmann::json::exception &e) {
        FP4MOE_LOG_INFO("autotune: ignoring tune cache {}: {}", origin, e.what());
        return false;
    }
    for (auto &[desc, buckets] : loaded)
        for (auto &[b, e] : buckets) table_[desc][b] = e;
    FP4MOE_LOG_DEBUG("autotune: loaded {} shape(s) from {}", loaded.size(), origin);
    return true;
}

status moe_autotuner::save_cache() const {
    if (opts_.cache_path.empty()) return status::success();
    const std::string tmp = opts_.cache_path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << cache_json();
        if (!out) return {status_code::io_error, fmt::format("cannot write tune cache {}", tmp)};
    }
    std::error_code ec;
    std::filesystem::rename(tmp, opts_.cache_path, ec);
    if (ec)
        return {status_code::io_error, fmt::format("cannot write tune cache {}: {}", opts_.cache_path, ec.message())};
    return status::success();
}

} // namespace fp4moe
