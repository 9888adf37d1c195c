// The autotuner against fake runners and a fake timer: the measured time is a formula of (runner, tactic,
// T), so every choice is known by construction (no wall clock, no flakiness).
#include "moe/autotune.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

using namespace fp4moe;

namespace {

class fake_runner final : public moe_runner {
public:
    fake_runner(std::string name, int tactics = 1, bool supported = true)
        : name_(std::move(name)), tactics_(tactics), supported_(supported) {}
    std::string_view name() const override { return name_; }
    bool supports(const moe_desc &, const moe_device &) const override { return supported_; }
    std::vector<moe_tactic> tactics(const moe_desc &) const override {
        std::vector<moe_tactic> t;
        for (int i = 0; i < tactics_; ++i)
            t.push_back({i, fmt::format("t{}", i)}); // NOTE: not "t" + to_string:
                                                     // GCC 12 -Wrestrict false positive
        return t;
    }
    std::size_t workspace_size(const moe_desc &, std::int64_t) const override { return 0; }
    status run(const moe_desc &, const moe_args &, const moe_plan &, const moe_tactic &,
               const moe_device &) const override {
        return status::success();
    }

private:
    std::string name_;
    int tactics_;
    bool supported_;
};

moe_desc small_desc() {
    moe_desc d;
    d.hidden = 64;
    d.intermediate = 32;
    d.experts = 8;
    d.top_k = 2;
    return d;
}

moe_tune_target target(std::string device = "fake device") {
    moe_tune_target t;
    t.device.name = "cpu";
    t.device_name = std::move(device);
    t.driver = "none";
    return t;
}

// "slow_start": 50 + 0.1 T us; "fast_start": 10 + T us; they cross between T = 32 (42 < 53.2) and T = 64
// (74 > 56.4). Tactic i of a runner costs i extra us, except "tactics" whose tactic 1 is 5 us faster.
struct fake_timer {
    std::map<std::string, int> calls;
    std::vector<std::int64_t> tokens_seen;
    result<double> operator()(const moe_desc &, const moe_runner &r, const moe_tactic &t, std::int64_t tokens, double) {
        calls[std::string(r.name())]++;
        tokens_seen.push_back(tokens);
        const double T = static_cast<double>(tokens);
        if (r.name() == "fast_start") return 10.0 + T + t.id;
        if (r.name() == "slow_start") return 50.0 + 0.1 * T + t.id;
        if (r.name() == "tactics") return t.id == 1 ? 1.0 : 6.0;
        if (r.name() == "broken") return status{status_code::internal, "broken timer"};
        return 1000.0;
    }
};

moe_timer bind(fake_timer &f) {
    return [&f](const moe_desc &d, const moe_runner &r, const moe_tactic &t, std::int64_t n, double best) {
        return f(d, r, t, n, best);
    };
}

moe_autotune_options quiet(std::string runner = "auto", std::string cache = "") {
    moe_autotune_options o;
    o.runner = std::move(runner);
    o.cache_path = std::move(cache);
    o.progress = false;
    return o;
}

std::string temp_path(const char *name) {
    return (std::filesystem::temp_directory_path() /
            (std::string("fp4moe_") + name + "_" + std::to_string(::getpid()) + ".json"))
        .string();
}

} // namespace

TEST(moe_autotune, buckets_are_last_power_of_two) {
    EXPECT_EQ(moe_token_bucket(0), 1);
    EXPECT_EQ(moe_token_bucket(1), 1);
    EXPECT_EQ(moe_token_bucket(3), 2);
    EXPECT_EQ(moe_token_bucket(4), 4);
    EXPECT_EQ(moe_token_bucket(1023), 512);
    EXPECT_EQ(moe_token_bucket(8192), 8192);
    EXPECT_EQ(moe_token_bucket(8193), 8192);
    EXPECT_EQ(moe_token_buckets(100), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64}));
    EXPECT_EQ(moe_token_buckets(1), (std::vector<std::int64_t>{1}));
}

TEST(moe_autotune, picks_the_faster_runner_and_the_choice_flips_at_the_known_bucket) {
    fake_runner a("fast_start"), b("slow_start");
    fake_timer ft;
    moe_autotuner tuner({{&a}, {&b}}, target(), bind(ft), quiet());
    const auto d = small_desc();
    for (std::int64_t t : {1, 2, 31, 32, 33, 63}) {
        auto c = tuner.choose(d, t);
        ASSERT_TRUE(c.ok()) << c.get_status().to_string();
        EXPECT_EQ(c.value().runner, &a) << "T=" << t;
        EXPECT_EQ(c.value().bucket, moe_token_bucket(t));
        EXPECT_EQ(c.value().from, moe_choice::origin::tuned);
    }
    for (std::int64_t t : {64, 100, 4096}) {
        auto c = tuner.choose(d, t);
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c.value().runner, &b) << "T=" << t;
        EXPECT_DOUBLE_EQ(c.value().us, 50.0 + 0.1 * double(moe_token_bucket(t)));
    }
    // Timed only at bucket sizes, each bucket once per runner: 1, 2, 16, 32, 64, 4096.
    for (auto t : ft.tokens_seen) EXPECT_EQ(t, moe_token_bucket(t));
    EXPECT_EQ(ft.calls["fast_start"], 6);
    EXPECT_EQ(ft.calls["slow_start"], 6);
}

TEST(moe_autotune, picks_the_fastest_tactic_and_skips_failing_candidates) {
    fake_runner a("tactics", 3), broken("broken");
    fake_timer ft;
    moe_autotuner tuner({{&broken}, {&a}}, target(), bind(ft), quiet());
    auto c = tuner.choose(small_desc(), 8);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().runner, &a);
    EXPECT_EQ(c.value().tactic.id, 1);
    EXPECT_EQ(c.value().tactic.name, "t1");
}

TEST(moe_autotune, oracle_is_tuned_only_when_nothing_else_supports_the_shape) {
    fake_runner oracle("oracle_runner"), prod("fast_start"), unsupported("slow_start", 1, false);
    fake_timer ft;
    moe_autotuner tuner({{&oracle, false}, {&prod}}, target(), bind(ft), quiet());
    auto c = tuner.choose(small_desc(), 4);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().runner, &prod);
    EXPECT_EQ(ft.calls.count("oracle_runner"), 0u);

    moe_autotuner only_oracle({{&oracle, false}, {&unsupported}}, target(), bind(ft), quiet());
    auto c2 = only_oracle.choose(small_desc(), 4);
    ASSERT_TRUE(c2.ok());
    EXPECT_EQ(c2.value().runner, &oracle);
}

TEST(moe_autotune, cache_round_trip_skips_measurement) {
    const std::string path = temp_path("cache_rt");
    std::filesystem::remove(path);
    fake_runner a("fast_start"), b("slow_start");
    const auto d = small_desc();
    {
        fake_timer ft;
        moe_autotuner tuner({{&a}, {&b}}, target(), bind(ft), quiet("auto", path));
        ASSERT_TRUE(tuner.tune(d, 128).ok());
        EXPECT_EQ(ft.calls["fast_start"], 8); // buckets 1..128
    }
    ASSERT_TRUE(std::filesystem::exists(path));
    fake_timer ft2;
    moe_autotuner again({{&a}, {&b}}, target(), bind(ft2), quiet("auto", path));
    for (std::int64_t t : {1, 32, 64, 128}) {
        auto c = again.choose(d, t);
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c.value().from, moe_choice::origin::cache);
        EXPECT_EQ(c.value().runner, t < 64 ? &a : &b) << "T=" << t;
    }
    EXPECT_TRUE(ft2.calls.empty());
    // A bucket the cache lacks is measured and added.
    auto c = again.choose(d, 256);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().from, moe_choice::origin::tuned);
    EXPECT_EQ(ft2.calls["slow_start"], 1);
    std::filesystem::remove(path);
}

TEST(moe_autotune, cache_for_another_device_driver_or_build_is_ignored) {
    fake_runner a("fast_start"), b("slow_start");
    fake_timer ft;
    moe_autotuner tuner({{&a}, {&b}}, target("gpu A"), bind(ft), quiet());
    ASSERT_TRUE(tuner.tune(small_desc(), 4).ok());
    const std::string doc = tuner.cache_json();

    fake_timer ft2;
    moe_autotuner same({{&a}, {&b}}, target("gpu A"), bind(ft2), quiet());
    EXPECT_TRUE(same.load_cache_json(doc, "test"));

    moe_autotuner other({{&a}, {&b}}, target("gpu B"), bind(ft2), quiet());
    EXPECT_FALSE(other.load_cache_json(doc, "test"));
    auto c = other.choose(small_desc(), 4);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().from, moe_choice::origin::tuned);
    EXPECT_EQ(ft2.calls["fast_start"], 1);

    auto t_driver = target("gpu A");
    t_driver.driver = "555.42";
    moe_autotuner other_driver({{&a}, {&b}}, t_driver, bind(ft2), quiet());
    EXPECT_FALSE(other_driver.load_cache_json(doc, "test"));

    std::string old_build = doc;
    const auto pos = old_build.find(moe_autotuner::build_key());
    ASSERT_NE(pos, std::string::npos);
    old_build.replace(pos, moe_autotuner::build_key().size(), "0.0.0+deadbee");
    EXPECT_FALSE(same.load_cache_json(old_build, "test"));
    EXPECT_FALSE(same.load_cache_json("not json", "test"));
}

TEST(moe_autotune, cache_entry_with_a_wrong_desc_hash_is_dropped) {
    fake_runner a("fast_start"), b("slow_start");
    fake_timer ft;
    moe_autotuner tuner({{&a}, {&b}}, target(), bind(ft), quiet());
    ASSERT_TRUE(tuner.tune(small_desc(), 2).ok());
    std::string doc = tuner.cache_json();
    const auto pos = doc.find("\"desc_hash\": \"");
    ASSERT_NE(pos, std::string::npos);
    doc[pos + 14] = doc[pos + 14] == '0' ? '1' : '0';
    fake_timer ft2;
    moe_autotuner fresh({{&a}, {&b}}, target(), bind(ft2), quiet());
    EXPECT_TRUE(fresh.load_cache_json(doc, "test"));
    auto c = fresh.choose(small_desc(), 2);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().from, moe_choice::origin::tuned);
}

TEST(moe_autotune, forced_runner_bypasses_tuning) {
    fake_runner a("fast_start"), b("slow_start", 2);
    fake_timer ft;
    moe_autotuner tuner({{&a}, {&b}}, target(), bind(ft), quiet("slow_start"));
    for (std::int64_t t : {1, 4096}) {
        auto c = tuner.choose(small_desc(), t);
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c.value().runner, &b);
        EXPECT_EQ(c.value().tactic.id, 0);
        EXPECT_EQ(c.value().from, moe_choice::origin::forced);
    }
    EXPECT_TRUE(tuner.tune(small_desc(), 1024).ok());
    EXPECT_TRUE(ft.calls.empty());
}

TEST(moe_autotune, unknown_or_unsupporting_forced_runner_is_a_clear_error) {
    fake_runner a("fast_start"), b("slow_start"), no("picky", 1, false);
    fake_timer ft;
    moe_autotuner tuner({{&a}, {&b}, {&no}}, target(), bind(ft), quiet("cuda.nope"));
    auto c = tuner.choose(small_desc(), 1);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.get_status().code(), status_code::invalid_argument);
    EXPECT_NE(c.get_status().message().find("cuda.nope"), std::string::npos);
    EXPECT_NE(c.get_status().message().find("fast_start, slow_start, picky"), std::string::npos);

    moe_autotuner picky({{&a}, {&no}}, target(), bind(ft), quiet("picky"));
    auto st = picky.check(small_desc());
    EXPECT_EQ(st.code(), status_code::unsupported);
    EXPECT_NE(st.message().find("picky"), std::string::npos);
    EXPECT_NE(st.message().find(small_desc().to_string()), std::string::npos);
    EXPECT_TRUE(ft.calls.empty());
}

TEST(moe_autotune, no_supporting_runner_is_an_error) {
    fake_runner no("picky", 1, false);
    fake_timer ft;
    moe_autotuner tuner({{&no}}, target(), bind(ft), quiet());
    auto c = tuner.choose(small_desc(), 1);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.get_status().code(), status_code::unsupported);
}

TEST(moe_autotune, print_configs_prints_each_choice_once) {
    fake_runner a("fast_start"), b("slow_start");
    fake_timer ft;
    auto opts = quiet();
    opts.print_configs = true;
    moe_autotuner tuner({{&a}, {&b}}, target(), bind(ft), opts);
    testing::internal::CaptureStderr();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(tuner.choose(small_desc(), 5).ok());
    ASSERT_TRUE(tuner.choose(small_desc(), 64).ok());
    const std::string err = testing::internal::GetCapturedStderr();
    std::size_t lines = 0;
    for (char ch : err) lines += ch == '\n';
    EXPECT_EQ(lines, 2u) << err;
    EXPECT_NE(err.find("bucket 4 -> fast_start tactic 0 (t0) 14.0 us [tuned]"), std::string::npos) << err;
    EXPECT_NE(err.find("bucket 64 -> slow_start"), std::string::npos) << err;
}

namespace {

// A device whose clock drifts: tactic i of "drift" costs base[i] us, and the calls listed in `slow` (0-based,
// over all calls) read 12 % slower, as a stretch of low clock would (the H200 read one graph 11 % apart). Records which tactic each call timed and
// the best_us it was given.
struct drifting_timer {
    std::vector<double> base;
    std::set<int> slow;
    std::vector<int> timed;
    std::vector<double> best_seen;
    result<double> operator()(const moe_desc &, const moe_runner &, const moe_tactic &t, std::int64_t, double best) {
        const int call = static_cast<int>(timed.size());
        timed.push_back(t.id);
        best_seen.push_back(best);
        return base[static_cast<std::size_t>(t.id)] * (slow.count(call) ? 1.12 : 1.0);
    }
};

moe_timer bind(drifting_timer &f) {
    return [&f](const moe_desc &d, const moe_runner &r, const moe_tactic &t, std::int64_t n, double best) {
        return f(d, r, t, n, best);
    };
}

} // namespace

TEST(moe_autotune, close_candidates_are_timed_again_so_one_slow_stretch_does_not_decide) {
    // Tactic 0 is the fastest (100 us) but its first timing fell in a slow stretch (112); it and tactic 3 (110)
    // are within 15 % of the sweep's best (tactic 1, 104), tactic 2 (200) is not. A one-pass sweep would pick
    // tactic 1.
    fake_runner r("drift", 4);
    drifting_timer dt{{100.0, 104.0, 200.0, 110.0}, {0}, {}, {}};
    moe_autotuner tuner({{&r}}, target(), bind(dt), quiet());
    auto c = tuner.choose(small_desc(), 16);
    ASSERT_TRUE(c.ok()) << c.get_status().to_string();
    EXPECT_EQ(c.value().tactic.id, 0);
    EXPECT_DOUBLE_EQ(c.value().us, 100.0); // the lowest of its three timings
    // The sweep (0 1 2 3), then two rounds over the finalists 0, 1, 3: forward, then backward; full timings.
    EXPECT_EQ(dt.timed, (std::vector<int>{0, 1, 2, 3, 0, 1, 3, 3, 1, 0}));
    for (std::size_t i = 4; i < dt.best_seen.size(); ++i) EXPECT_TRUE(std::isinf(dt.best_seen[i])) << i;
}

TEST(moe_autotune, final_rounds_keep_the_four_closest_and_skip_a_clear_winner) {
    fake_runner r("drift", 6);
    // Six candidates within 15 %: only the four fastest of the sweep go to the final rounds.
    drifting_timer close{{100.0, 101.0, 110.0, 102.0, 103.0, 104.0}, {}, {}, {}};
    moe_autotuner tuner({{&r}}, target(), bind(close), quiet());
    auto c = tuner.choose(small_desc(), 4);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().tactic.id, 0);
    EXPECT_EQ(close.timed, (std::vector<int>{0, 1, 2, 3, 4, 5, 0, 1, 3, 4, 4, 3, 1, 0}));

    // Equal times after the rounds: the earlier candidate wins.
    drifting_timer tie{{50.0, 50.0, 90.0, 90.0, 90.0, 90.0}, {}, {}, {}};
    moe_autotuner tie_tuner({{&r}}, target(), bind(tie), quiet());
    auto t = tie_tuner.choose(small_desc(), 4);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t.value().tactic.id, 0);

    // One candidate clearly ahead (the next is 40 % slower): no final rounds.
    drifting_timer clear{{100.0, 140.0, 150.0, 160.0, 170.0, 180.0}, {}, {}, {}};
    moe_autotuner clear_tuner({{&r}}, target(), bind(clear), quiet());
    ASSERT_TRUE(clear_tuner.choose(small_desc(), 4).ok());
    EXPECT_EQ(clear.timed.size(), 6u);
}
