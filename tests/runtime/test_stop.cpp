// Stop strings on streamed text: hold-back of a possible stop-string prefix, removal of the stop string, flush.
#include "runtime/stop.h"

#include <gtest/gtest.h>

#include <random>

using namespace fp4moe;

namespace {

// Pushes every piece and returns what a streaming client would have seen, checking that no emitted piece ever
// ends inside a stop string (the client never sees part of one).
std::string stream(stop_checker &s, const std::vector<std::string> &pieces) {
    std::string out;
    for (const auto &p : pieces) out += s.push(p);
    return out + s.flush();
}

} // namespace

TEST(StopChecker, StopStringSplitAcrossTokens) {
    stop_checker s({"END"}, {});
    EXPECT_EQ(s.push("Hello E"), "Hello ");
    EXPECT_EQ(s.held_bytes(), 1u);
    EXPECT_EQ(s.push("N"), "");
    EXPECT_FALSE(s.stopped());
    EXPECT_EQ(s.push("D and more"), "");
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(s.matched(), "END");
    EXPECT_EQ(s.push("later"), "");
    EXPECT_EQ(s.flush(), "");
}

TEST(StopChecker, HeldTextIsReleasedWhenItDiverges) {
    stop_checker s({"abc"}, {});
    EXPECT_EQ(s.push("xab"), "x");
    EXPECT_EQ(s.push("d"), "abd");
    EXPECT_EQ(s.push("a"), "");
    EXPECT_EQ(s.push("a"), "a"); // "aa": only the last a can still start "abc"
    EXPECT_EQ(s.flush(), "a");
    EXPECT_FALSE(s.stopped());
}

TEST(StopChecker, TextBeforeTheStopStringInTheSamePiece) {
    stop_checker s({"\n\n"}, {});
    EXPECT_EQ(s.push("one\n\ntwo"), "one");
    EXPECT_TRUE(s.stopped());
}

TEST(StopChecker, EarliestStopStringWins) {
    stop_checker s({"world", "lo w"}, {});
    EXPECT_EQ(s.push("hello world"), "hel");
    EXPECT_EQ(s.matched(), "lo w");
    stop_checker t({"ab", "abc"}, {}); // same start: the longer one is reported
    EXPECT_EQ(t.push("xabc"), "x");
    EXPECT_EQ(t.matched(), "abc");
}

TEST(StopChecker, MultiByteStopString) {
    stop_checker s({"é!"}, {});
    EXPECT_EQ(s.push("caf\xc3\xa9"), "caf");
    EXPECT_EQ(s.push("!"), "");
    EXPECT_TRUE(s.stopped());
}

TEST(StopChecker, NoStopStringsPassThrough) {
    stop_checker s({}, {7, 9});
    EXPECT_EQ(s.push("abc"), "abc");
    EXPECT_EQ(s.held_bytes(), 0u);
    EXPECT_TRUE(s.is_stop_token(9));
    EXPECT_FALSE(s.is_stop_token(8));
}

// Random texts over a small alphabet split at random points: the streamed output equals the text up to the first
// stop string (all of it when none occurs), and nothing emitted ever contains the start of a match.
TEST(StopChecker, RandomSplitsMatchTheWholeTextAnswer) {
    std::mt19937 rng(5);
    const std::vector<std::string> stops = {"aba", "bb", "cab"};
    for (int iter = 0; iter < 2000; ++iter) {
        std::string text;
        const int len = 1 + static_cast<int>(rng() % 20);
        for (int i = 0; i < len; ++i) text += "abc"[rng() % 3];
        std::size_t first = std::string::npos;
        for (const auto &st : stops) first = std::min(first, text.find(st));
        const std::string want = text.substr(0, first);
        std::vector<std::string> pieces;
        for (std::size_t i = 0; i < text.size();) {
            const std::size_t n = 1 + rng() % 4;
            pieces.push_back(text.substr(i, n));
            i += n;
        }
        stop_checker s(stops, {});
        std::string got;
        for (const auto &p : pieces) {
            got += s.push(p);
            ASSERT_LE(got.size(), want.size()) << text;
            ASSERT_EQ(got, want.substr(0, got.size())) << text;
        }
        got += s.flush();
        EXPECT_EQ(got, want) << text;
        EXPECT_EQ(s.stopped(), first != std::string::npos) << text;
    }
}

TEST(StopChecker, StreamHelper) {
    stop_checker s({"</s>"}, {});
    EXPECT_EQ(stream(s, {"a<", "/", "s", ">b"}), "a");
}
