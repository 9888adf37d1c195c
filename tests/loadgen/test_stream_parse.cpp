// Stream parsing for both backends: token events and their times, chunks split across reads or packed into one,
// the usage chunk, error chunks and malformed chunks.
#include "loadgen/stream_parse.h"

#include <gtest/gtest.h>

namespace fp4moe::loadgen {
namespace {

TEST(loadgen_line_splitter, AnyReadBoundaries) {
    const std::string stream = "data: a\n\ndata: bb\r\ndata: [DONE]\n\nlast";
    for (std::size_t cut = 1; cut < stream.size(); ++cut) {
        line_splitter s;
        std::vector<std::string> lines;
        auto on = [&](std::string_view l) { lines.emplace_back(l); };
        s.feed(std::string_view(stream).substr(0, cut), on);
        s.feed(std::string_view(stream).substr(cut), on);
        s.finish(on);
        EXPECT_EQ(lines, (std::vector<std::string>{"data: a", "", "data: bb\r", "data: [DONE]", "", "last"}))
            << "cut at " << cut;
    }
}

std::string sg(const std::string &text, int n) {
    return "data: {\"text\": \"" + text + "\", \"meta_info\": {\"completion_tokens\": " + std::to_string(n) + "}}\n\n";
}

TEST(loadgen_sglang_stream, TtftItlSplitOverCoalescedTokens) {
    request_result r;
    r.output_len = 99; // requested; replaced by the server's count
    stream_accumulator acc(backend_kind::sglang, r);
    ASSERT_TRUE(acc.on_bytes(sg("a", 1), 0.5).ok());
    ASSERT_TRUE(acc.on_bytes(sg("ab", 2), 0.6).ok());
    ASSERT_TRUE(acc.on_bytes(sg("abcd", 4), 1.0).ok()); // two tokens in one chunk: gap 0.4 split in two
    ASSERT_TRUE(acc.on_bytes(sg("abcd", 4), 1.1).ok()); // no new token: skipped, time not moved
    ASSERT_TRUE(acc.on_bytes(sg("abcde", 5), 1.3).ok());
    ASSERT_TRUE(acc.on_bytes("data: [DONE]\n\n", 1.4).ok());
    ASSERT_TRUE(acc.finish(1.4).ok());
    EXPECT_DOUBLE_EQ(r.ttft, 0.5);
    ASSERT_EQ(r.itl.size(), 4u);
    EXPECT_NEAR(r.itl[0], 0.1, 1e-12);
    EXPECT_NEAR(r.itl[1], 0.2, 1e-12);
    EXPECT_NEAR(r.itl[2], 0.2, 1e-12);
    EXPECT_NEAR(r.itl[3], 0.3, 1e-12); // from 1.0, not from the skipped 1.1
    EXPECT_EQ(r.output_len, 5);
    EXPECT_EQ(r.generated_text, "abcde");
    EXPECT_DOUBLE_EQ(r.latency, 1.4); // the [DONE] line counts
    EXPECT_EQ(r.chunk_times, (std::vector<double>{0.5, 0.6, 1.0, 1.3}));
}

TEST(loadgen_sglang_stream, ChunksSplitAcrossReads) {
    const std::string all = sg("x", 1) + sg("xy", 2) + "data: [DONE]\n\n";
    for (std::size_t cut = 1; cut < all.size(); ++cut) {
        request_result r;
        stream_accumulator acc(backend_kind::sglang, r);
        ASSERT_TRUE(acc.on_bytes(all.substr(0, cut), 1.0).ok());
        ASSERT_TRUE(acc.on_bytes(all.substr(cut), 2.0).ok());
        ASSERT_TRUE(acc.finish(2.0).ok());
        EXPECT_EQ(r.output_len, 2);
        EXPECT_EQ(r.generated_text, "xy");
        const bool first_whole = cut >= sg("x", 1).size() - 1; // its first '\n' arrived in the first read
        EXPECT_DOUBLE_EQ(r.ttft, first_whole ? 1.0 : 2.0) << cut;
    }
}

TEST(loadgen_sglang_stream, EmptyTextChunksAreNotTokens) {
    request_result r;
    stream_accumulator acc(backend_kind::sglang, r);
    ASSERT_TRUE(acc.on_bytes("data: {\"text\": \"\", \"meta_info\": {\"completion_tokens\": 0}}\n", 0.2).ok());
    ASSERT_TRUE(acc.on_bytes(": keep-alive comment\nevent: message\n" + sg("a", 1), 0.3).ok());
    ASSERT_TRUE(acc.finish(0.3).ok());
    EXPECT_DOUBLE_EQ(r.ttft, 0.3);
}

TEST(loadgen_sglang_stream, ErrorChunkFailsTheRequest) {
    request_result r;
    stream_accumulator acc(backend_kind::sglang, r);
    ASSERT_TRUE(acc.on_bytes(sg("a", 1), 0.1).ok());
    auto st = acc.on_bytes("data: {\"error\": {\"message\": \"KV cache exhausted\", \"code\": 500}}\n\n", 0.2);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("KV cache exhausted"), std::string::npos);
    request_result r2;
    stream_accumulator acc2(backend_kind::sglang, r2);
    auto st2 = acc2.on_bytes("data: {\"object\": \"error\", \"message\": \"boom\"}\n", 0.1);
    ASSERT_FALSE(st2.ok());
    EXPECT_NE(st2.message().find("boom"), std::string::npos);
}

TEST(loadgen_sglang_stream, MalformedChunksFail) {
    for (const std::string bad : {"data: {not json\n", "data: [1, 2]\n", "data: {\"text\": \"a\"}\n",
                                  "data: {\"text\": \"a\", \"meta_info\": {\"completion_tokens\": \"x\"}}\n"}) {
        request_result r;
        stream_accumulator acc(backend_kind::sglang, r);
        EXPECT_FALSE(acc.on_bytes(bad, 0.1).ok()) << bad;
    }
    request_result r;
    stream_accumulator acc(backend_kind::sglang, r);
    ASSERT_TRUE(acc.on_bytes(sg("ab", 2), 0.1).ok());
    EXPECT_FALSE(acc.on_bytes(sg("abc", 1), 0.2).ok()); // completion_tokens going back
    request_result r3;
    stream_accumulator acc3(backend_kind::sglang, r3);
    ASSERT_TRUE(acc3.on_bytes("data: [DONE]\n", 0.1).ok());
    auto st = acc3.finish(0.1);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("without any token"), std::string::npos);
}

std::string oa(const std::string &text) {
    return "data: {\"id\": \"c\", \"object\": \"text_completion\", \"choices\": [{\"index\": 0, \"text\": \"" + text +
           "\", \"finish_reason\": null}]}\n\n";
}

TEST(loadgen_openai_stream, OneItlPerChunkAndUsage) {
    request_result r;
    r.output_len = 16; // requested
    stream_accumulator acc(backend_kind::openai, r);
    ASSERT_TRUE(acc.on_bytes(oa("He"), 0.25).ok());
    ASSERT_TRUE(acc.on_bytes(oa("llo") + oa(" w"), 0.5).ok()); // two chunks in one read: a zero gap
    ASSERT_TRUE(acc.on_bytes(oa(""), 0.6).ok());               // empty text: not a token
    ASSERT_TRUE(acc.on_bytes(oa("orld"), 0.9).ok());
    ASSERT_TRUE(acc.on_bytes("data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 3, \"completion_tokens\": 5, "
                             "\"total_tokens\": 8}}\n\ndata: [DONE]\n\n",
                             1.0)
                    .ok());
    ASSERT_TRUE(acc.finish(1.0).ok());
    EXPECT_DOUBLE_EQ(r.ttft, 0.25);
    ASSERT_EQ(r.itl.size(), 3u);
    EXPECT_DOUBLE_EQ(r.itl[0], 0.25);
    EXPECT_DOUBLE_EQ(r.itl[1], 0.0);
    EXPECT_NEAR(r.itl[2], 0.4, 1e-12);
    EXPECT_EQ(r.generated_text, "Hello world");
    EXPECT_EQ(r.output_len, 5);
    EXPECT_DOUBLE_EQ(r.latency, 1.0);
}

TEST(loadgen_openai_stream, NoUsageKeepsRequestedLength) {
    request_result r;
    r.output_len = 16;
    stream_accumulator acc(backend_kind::openai, r);
    ASSERT_TRUE(acc.on_bytes(oa("a") + "data: [DONE]\n", 0.1).ok());
    ASSERT_TRUE(acc.finish(0.2).ok());
    EXPECT_EQ(r.output_len, 16);
}

TEST(loadgen_openai_stream, ErrorChunkAndSplitReads) {
    const std::string all =
        oa("a") + "data: {\"error\": {\"message\": \"engine failed\", \"type\": \"server_error\"}}\n";
    for (std::size_t cut = 1; cut < all.size(); ++cut) {
        request_result r;
        stream_accumulator acc(backend_kind::openai, r);
        auto st = acc.on_bytes(all.substr(0, cut), 0.1);
        if (st.ok()) st = acc.on_bytes(all.substr(cut), 0.2);
        if (st.ok()) st = acc.finish(0.2);
        ASSERT_FALSE(st.ok()) << cut;
        EXPECT_NE(st.message().find("engine failed"), std::string::npos);
        EXPECT_EQ(r.generated_text, "a");
    }
}

} // namespace
} // namespace fp4moe::loadgen
