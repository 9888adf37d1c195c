// Random request lengths against sglang's definition (numpy's legacy generator, bit for bit), the random-ids token
// rule, text prompts, and the JSONL dataset with its errors.
#include "fp4moe/tokenizer.h"
#include "loadgen/dataset.h"
#include "loadgen/numpy_random.h"
#include "loadgen_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace fp4moe::loadgen {
namespace {

using ivec = std::vector<std::int64_t>;

// Expected values written by numpy 2.4 (legacy global generator, as sglang.bench_serving uses it):
//   np.random.seed(1); np.random.randint(1, 129, size=8); np.random.randint(1, 65, size=8);
//   np.random.randint(0, 1000, size=4); [np.random.exponential(1/4.0) for _ in range(3)]
//   np.random.seed(42); np.random.randint(512, 1025, size=6); np.random.randint(0, 151936, size=3)
//   np.random.seed(7); np.random.randint(128, 129, size=3); np.random.randint(0, 5, size=5)
TEST(loadgen_numpy_random, RandintAndExponentialMatchNumpy) {
    numpy_legacy_rng r(1);
    EXPECT_EQ(r.randint(1, 129, 8), (ivec{38, 108, 13, 73, 128, 10, 76, 6}));
    EXPECT_EQ(r.randint(1, 65, 8), (ivec{16, 1, 17, 2, 13, 8, 46, 61}));
    EXPECT_EQ(r.randint(0, 1000, 4), (ivec{390, 281, 178, 276}));
    EXPECT_DOUBLE_EQ(r.exponential(0.25), 0.13583484265456128);
    EXPECT_DOUBLE_EQ(r.exponential(0.25), 0.28896992742735556);
    EXPECT_DOUBLE_EQ(r.exponential(0.25), 0.05718110188170758);

    numpy_legacy_rng r42(42);
    EXPECT_EQ(r42.randint(512, 1025, 6), (ivec{614, 947, 782, 618, 583, 532}));
    EXPECT_EQ(r42.randint(0, 151936, 3), (ivec{54886, 137337, 87498}));

    numpy_legacy_rng r7(7);
    EXPECT_EQ(r7.randint(128, 129, 3), (ivec{128, 128, 128})); // one value: nothing drawn
    EXPECT_EQ(r7.randint(0, 5, 5), (ivec{4, 1, 3, 3, 4}));
}

TEST(loadgen_random_lens, SglangDefinition) {
    // r = 0: uniform on [1, L] (mean (L+1)/2); r = 1: exactly L; r = 0.5: [int(L/2), L].
    numpy_legacy_rng a(1);
    const auto l0 = compute_random_lens(a, 128, 0.0, 20000);
    std::map<std::int64_t, int> hist;
    double sum = 0;
    for (auto v : l0) {
        ASSERT_GE(v, 1);
        ASSERT_LE(v, 128);
        ++hist[v];
        sum += static_cast<double>(v);
    }
    EXPECT_EQ(hist.size(), 128u); // every value reached
    EXPECT_NEAR(sum / 20000, 64.5, 1.0);
    // Chi-square against uniform, 127 degrees of freedom: the 99.9 % quantile is about 181.
    double chi = 0;
    for (const auto &[v, n] : hist) chi += (n - 20000.0 / 128) * (n - 20000.0 / 128) / (20000.0 / 128);
    EXPECT_LT(chi, 181.0);

    numpy_legacy_rng b(1);
    for (auto v : compute_random_lens(b, 128, 1.0, 100)) EXPECT_EQ(v, 128);
    numpy_legacy_rng c(3);
    for (auto v : compute_random_lens(c, 101, 0.5, 1000)) {
        EXPECT_GE(v, 50); // int(101 * 0.5) = 50
        EXPECT_LE(v, 101);
    }
    numpy_legacy_rng d(1);
    EXPECT_EQ(compute_random_lens(d, 0, 0.0, 3), (ivec{0, 0, 0}));
    // Determinism by seed; another seed differs.
    numpy_legacy_rng e(1), f(2);
    EXPECT_EQ(compute_random_lens(e, 128, 0.0, 20000), l0);
    EXPECT_NE(compute_random_lens(f, 128, 0.0, 20000), l0);
}

TEST(loadgen_random_dataset, TokenIdsFollowSglangRandomIds) {
    random_dataset_options o;
    o.num_prompts = 8;
    o.input_len = 128;
    o.output_len = 64;
    o.token_ids = true;
    numpy_legacy_rng r(1);
    auto ds = make_random_dataset(o, nullptr, 1000, r);
    ASSERT_TRUE(ds.ok()) << ds.get_status().to_string();
    const ivec in{38, 108, 13, 73, 128, 10, 76, 6}, out{16, 1, 17, 2, 13, 8, 46, 61};
    const ivec off{390, 281, 178, 276}; // the first four offsets of randint(0, 1000, 8) after the lengths
    for (std::size_t i = 0; i < 8; ++i) {
        const auto &p = ds.value()[i];
        EXPECT_TRUE(p.use_ids);
        EXPECT_EQ(p.prompt_len, in[i]);
        EXPECT_EQ(p.output_len, out[i]);
        ASSERT_EQ(static_cast<std::int64_t>(p.ids.size()), in[i]);
        if (i >= 4) continue;
        for (std::size_t j = 0; j < p.ids.size(); ++j)
            EXPECT_EQ(p.ids[j], static_cast<std::int32_t>((off[i] + static_cast<std::int64_t>(i + j)) % 1000));
    }
    // The generator is left where sglang's arrival process continues: after the 8 offsets.
    numpy_legacy_rng ref(1);
    ref.randint(1, 129, 8), ref.randint(1, 65, 8), ref.randint(0, 1000, 8);
    EXPECT_EQ(r.next_uint32(), ref.next_uint32());
}

TEST(loadgen_random_dataset, TextPromptsDecodeTheIds) {
    auto tok = tokenizer::load(test::tokenizer_dir());
    ASSERT_TRUE(tok.ok()) << tok.get_status().to_string();
    auto vocab = hf_base_vocab_size(test::tokenizer_dir());
    ASSERT_TRUE(vocab.ok()) << vocab.get_status().to_string();
    EXPECT_LT(vocab.value(), tok.value().vocab_size()); // added tokens excluded, as HF's vocab_size
    random_dataset_options o;
    o.num_prompts = 4;
    o.input_len = 32;
    o.output_len = 8;
    o.range_ratio = 1.0;
    numpy_legacy_rng r1(5), r2(5);
    auto text = make_random_dataset(o, &tok.value(), vocab.value(), r1);
    o.token_ids = true;
    auto ids = make_random_dataset(o, &tok.value(), vocab.value(), r2);
    ASSERT_TRUE(text.ok() && ids.ok());
    for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_FALSE(text.value()[i].use_ids);
        EXPECT_EQ(text.value()[i].prompt_len, 32); // the Qwen tokenizer adds no special tokens
        EXPECT_EQ(text.value()[i].text, tok.value().decode(ids.value()[i].ids));
        EXPECT_FALSE(text.value()[i].text.empty());
    }
}

TEST(loadgen_random_dataset, BadOptionsNameTheFlag) {
    numpy_legacy_rng r(1);
    random_dataset_options o;
    o.token_ids = true;
    o.range_ratio = 1.5;
    auto a = make_random_dataset(o, nullptr, 100, r);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.get_status().message().find("--random-range-ratio"), std::string::npos);
    o.range_ratio = 0;
    o.num_prompts = 0;
    auto b = make_random_dataset(o, nullptr, 100, r);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.get_status().message().find("--num-prompts"), std::string::npos);
    o.num_prompts = 1;
    o.token_ids = false;
    auto c = make_random_dataset(o, nullptr, 100, r);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.get_status().message().find("tokenizer"), std::string::npos);
}

std::string write_tmp(const std::string &name, const std::string &text) {
    const auto p = std::filesystem::temp_directory_path() / name;
    std::ofstream(p) << text;
    return p.string();
}

TEST(loadgen_jsonl_dataset, ReadsTextAndIdPrompts) {
    auto tok = tokenizer::load(test::tokenizer_dir());
    ASSERT_TRUE(tok.ok());
    const auto path = write_tmp("fp4moe_loadgen_ok.jsonl", "{\"prompt\": \"hello world\", \"output_len\": 5}\n"
                                                           "\n"
                                                           "{\"prompt\": [1, 2, 3]}\n"
                                                           "{\"input_ids\": [4, 5], \"max_tokens\": 2}\n");
    jsonl_dataset_options o;
    o.path = path;
    o.default_output_len = 7;
    auto ds = load_jsonl_dataset(o, &tok.value());
    ASSERT_TRUE(ds.ok()) << ds.get_status().to_string();
    ASSERT_EQ(ds.value().size(), 3u);
    const auto &a = ds.value()[0];
    EXPECT_FALSE(a.use_ids);
    EXPECT_EQ(a.text, "hello world");
    EXPECT_EQ(a.prompt_len, static_cast<std::int64_t>(tok.value().encode("hello world").value().size()));
    EXPECT_EQ(a.output_len, 5);
    EXPECT_TRUE(ds.value()[1].use_ids);
    EXPECT_EQ(ds.value()[1].prompt_len, 3);
    EXPECT_EQ(ds.value()[1].output_len, 7);
    EXPECT_EQ(ds.value()[2].output_len, 2);
    o.num_prompts = 2;
    EXPECT_EQ(load_jsonl_dataset(o, &tok.value()).value().size(), 2u);
}

TEST(loadgen_jsonl_dataset, ErrorsNameFileAndLine) {
    auto tok = tokenizer::load(test::tokenizer_dir());
    ASSERT_TRUE(tok.ok());
    auto expect_error = [&](const std::string &text, const std::string &needle) {
        jsonl_dataset_options o;
        o.path = write_tmp("fp4moe_loadgen_bad.jsonl", text);
        o.default_output_len = 4;
        auto ds = load_jsonl_dataset(o, &tok.value());
        ASSERT_FALSE(ds.ok()) << text;
        EXPECT_NE(ds.get_status().message().find(needle), std::string::npos) << ds.get_status().message();
    };
    expect_error("{\"prompt\": \"a\"}\n{bad json\n", "fp4moe_loadgen_bad.jsonl:2: not valid JSON");
    expect_error("[1, 2]\n", ":1: each line must be a JSON object");
    expect_error("{\"question\": \"a\"}\n", ":1: no \"prompt\"");
    expect_error("{\"prompt\": 3}\n", "must be a string or an array");
    expect_error("{\"prompt\": [1, -2]}\n", "non-negative token ids");
    expect_error("{\"prompt\": \"a\", \"output_len\": 0}\n", "\"output_len\" must be a positive integer");
    expect_error("{\"prompt\": \"\"}\n", "empty prompt");
    expect_error("\n\n", "no prompts");
    jsonl_dataset_options o;
    o.path = "/nonexistent/x.jsonl";
    auto ds = load_jsonl_dataset(o, &tok.value());
    ASSERT_FALSE(ds.ok());
    EXPECT_NE(ds.get_status().message().find("--dataset-path"), std::string::npos);
}

} // namespace
} // namespace fp4moe::loadgen
