// Tokenizer unit tests: tiny hand-written tokenizer.json files (both merges forms, added tokens, ignore_merges),
// the streaming decoder, load errors, NFC, the families' pre-tokenizer regexes, and the chat templates.
#include "fp4moe/tokenizer.h"
#include "model/tokenizer/internal.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fp4moe {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class tok_dir {
public:
    tok_dir() {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() /
                ("fp4moe_tok_" + std::to_string(::getpid()) + "_" + std::string(info ? info->name() : "x"));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~tok_dir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string write(const std::string &name, const std::string &text) const {
        const std::string p = (path_ / name).string();
        std::ofstream(p, std::ios::binary) << text;
        return p;
    }
    std::string path() const { return path_.string(); }

private:
    fs::path path_;
};

// The byte-level form of UTF-8 text ("a b" -> "aĠb").
std::string bl(std::string_view s) {
    return tok::byte_level_encode(s);
}

// A byte-level BPE: the 256 byte tokens (id = byte), then `extra` tokens in order, merges as given.
json tiny_tokenizer(const std::vector<std::string> &extra, const json &merges) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, static_cast<char>(b)))] = b;
    int id = 256;
    for (const std::string &t : extra) vocab[t] = id++;
    return {
        {"version", "1.0"},
        {"added_tokens", json::array()},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"},
                         {"pattern", {{"Regex", R"(\s+(?!\S)|\s+|\S+)"}}},
                         {"behavior", "Isolated"},
                         {"invert", false}},
                        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", false}}},
    };
}

tokenizer load_ok(const tok_dir &dir, const json &j) {
    auto t = tokenizer::load(dir.write("tokenizer.json", j.dump()));
    EXPECT_TRUE(t.ok()) << t.get_status().to_string();
    if (!t.ok()) std::abort();
    return t.value();
}

std::vector<int32_t> enc(const tokenizer &t, std::string_view s, bool allow_special = true) {
    auto r = t.encode(s, allow_special);
    EXPECT_TRUE(r.ok()) << r.get_status().to_string();
    return r.ok() ? r.value() : std::vector<int32_t>{};
}

// "hello" = 256..259 via h+e, l+l, he+ll, hell+o
const std::vector<std::string> kHello = {"he", "ll", "hell", "hello"};

TEST(tokenizer, merges_as_strings_and_as_pairs_give_the_same_ids) {
    tok_dir d1, d2;
    const tokenizer a = load_ok(d1, tiny_tokenizer(kHello, {"h e", "l l", "he ll", "hell o"}));
    const tokenizer b =
        load_ok(d2, tiny_tokenizer(kHello, json::array({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}})));
    const std::vector<int32_t> want = {259, ' ', 257, 'o'}; // "hello", " ", "ll", "o"
    EXPECT_EQ(enc(a, "hello llo"), want);
    EXPECT_EQ(enc(b, "hello llo"), want);
    EXPECT_EQ(a.decode(want), "hello llo");
}

TEST(tokenizer, merge_rank_decides_not_position) {
    tok_dir d;
    // "abc": rank 0 is b+c, so "a" + "bc" although "ab" is also a merge (rank 1).
    const tokenizer t = load_ok(d, tiny_tokenizer({"bc", "ab"}, {"b c", "a b"}));
    EXPECT_EQ(enc(t, "abc"), (std::vector<int32_t>{'a', 256}));
    // "aaa" with merge a+a: leftmost pair first -> "aa" + "a".
    tok_dir d2;
    const tokenizer t2 = load_ok(d2, tiny_tokenizer({"aa"}, {"a a"}));
    EXPECT_EQ(enc(t2, "aaa"), (std::vector<int32_t>{256, 'a'}));
}

TEST(tokenizer, ignore_merges_emits_a_whole_vocab_word) {
    json j = tiny_tokenizer({"he", "hello"}, {"h e"}); // no merge reaches "hello"
    tok_dir d1, d2;
    const tokenizer plain = load_ok(d1, j);
    EXPECT_EQ(enc(plain, "hello"), (std::vector<int32_t>{256, 'l', 'l', 'o'}));
    j["model"]["ignore_merges"] = true;
    const tokenizer ignoring = load_ok(d2, j);
    EXPECT_EQ(enc(ignoring, "hello"), (std::vector<int32_t>{257}));
}

TEST(tokenizer, added_tokens_longest_first_and_special_switch) {
    json j = tiny_tokenizer(kHello, {"h e", "l l", "he ll", "hell o"});
    j["added_tokens"] = json::array({
        {{"id", 300}, {"content", "<a>"}, {"special", true}},
        {{"id", 301}, {"content", "<a><b>"}, {"special", true}},
        {{"id", 302}, {"content", "<think>"}, {"special", false}},
    });
    tok_dir d;
    const tokenizer t = load_ok(d, j);
    EXPECT_EQ(enc(t, "<a><b>hello<a>"), (std::vector<int32_t>{301, 259, 300}));
    // Special tokens off: "<a>" is text, the non-special "<think>" is still recognized.
    EXPECT_EQ(enc(t, "<a><think>", false), (std::vector<int32_t>{'<', 'a', '>', 302}));
    EXPECT_EQ(t.decode(std::vector<int32_t>{301, 259, 302}), "<a><b>hello<think>");
    EXPECT_EQ(t.decode(std::vector<int32_t>{301, 259, 302}, true), "hello<think>");
    EXPECT_TRUE(t.is_special(300));
    EXPECT_FALSE(t.is_special(302));
    EXPECT_EQ(t.token_to_id("<a><b>"), 301);
    EXPECT_EQ(t.token_to_id("hello"), 259);
    EXPECT_EQ(t.id_to_token(' '), std::optional<std::string>("Ġ"));
    EXPECT_EQ(t.id_to_token(1000), std::nullopt);
    EXPECT_EQ(t.vocab_size(), 303);
}

TEST(tokenizer, added_token_strip_flags_and_single_word) {
    json j = tiny_tokenizer({}, json::array());
    j["added_tokens"] = json::array({
        {{"id", 300}, {"content", "<m>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
        {{"id", 301}, {"content", "SW"}, {"special", false}, {"single_word", true}},
    });
    tok_dir d;
    const tokenizer t = load_ok(d, j);
    EXPECT_EQ(enc(t, "a  <m> \tb"), (std::vector<int32_t>{'a', 300, 'b'}));
    EXPECT_EQ(enc(t, "SW"), (std::vector<int32_t>{301}));
    EXPECT_EQ(enc(t, "(SW)"), (std::vector<int32_t>{'(', 301, ')'}));
    EXPECT_EQ(enc(t, "xSW"), (std::vector<int32_t>{'x', 'S', 'W'}));
    EXPECT_EQ(enc(t, "SW_"), (std::vector<int32_t>{'S', 'W', '_'}));
}

TEST(tokenizer, post_processor_template_adds_bos_only_on_request) {
    json j = tiny_tokenizer({}, json::array());
    j["added_tokens"] = json::array({{{"id", 256}, {"content", "<s>"}, {"special", true}}});
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                   {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                           {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}};
    tok_dir d;
    const tokenizer t = load_ok(d, j);
    EXPECT_EQ(enc(t, "a"), (std::vector<int32_t>{'a'}));
    auto with = t.encode("a", true, true);
    ASSERT_TRUE(with.ok());
    EXPECT_EQ(with.value(), (std::vector<int32_t>{256, 'a'}));
}

TEST(tokenizer, invalid_utf8_input_is_rejected) {
    tok_dir d;
    const tokenizer t = load_ok(d, tiny_tokenizer({}, json::array()));
    auto r = t.encode("ok \xC3\x28");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.get_status().code(), status_code::invalid_argument);
    EXPECT_TRUE(t.encode("").ok());
    EXPECT_TRUE(t.encode("").value().empty());
}

TEST(tokenizer_stream, emoji_split_over_four_tokens_is_held_until_complete) {
    tok_dir d;
    const tokenizer t = load_ok(d, tiny_tokenizer({}, json::array())); // one token per byte
    const std::string emoji = "\xF0\x9F\x98\x80";                      // U+1F600
    tokenizer::stream_decoder s(t);
    EXPECT_EQ(s.push('a'), "a");
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(s.push(static_cast<uint8_t>(emoji[i])), "") << "byte " << i;
        EXPECT_EQ(s.pending_bytes(), static_cast<size_t>(i + 1));
    }
    EXPECT_EQ(s.push(static_cast<uint8_t>(emoji[3])), emoji);
    EXPECT_EQ(s.pending_bytes(), 0u);
    EXPECT_EQ(s.push('b'), "b");
    EXPECT_EQ(s.flush(), "");
}

TEST(tokenizer_stream, invalid_bytes_become_replacement_characters) {
    tok_dir d;
    const tokenizer t = load_ok(d, tiny_tokenizer({}, json::array()));
    tokenizer::stream_decoder s(t);
    EXPECT_EQ(s.push(0xFF), "\xEF\xBF\xBD"); // never valid: emitted at once
    EXPECT_EQ(s.push(0xE2), "");             // could start a 3-byte character
    EXPECT_EQ(s.push('x'), "\xEF\xBF\xBD"
                           "x"); // it did not
    EXPECT_EQ(s.push(0xF0), "");
    EXPECT_EQ(s.push(0x9F), "");
    EXPECT_EQ(s.flush(), "\xEF\xBF\xBD"); // stream ended inside a character
    const std::vector<int32_t> ids = {0xFF, 0xE2, 'x', 0xF0, 0x9F};
    EXPECT_EQ(t.decode(ids), "\xEF\xBF\xBD\xEF\xBF\xBDx\xEF\xBF\xBD");
}

TEST(tokenizer_stream, multibyte_tokens_split_a_character) {
    // "é" is C3 A9; the token "Ã" is byte C3 alone, "©" byte A9 with a following "x" merged in.
    tok_dir d;
    const tokenizer t = load_ok(d, tiny_tokenizer({"©x"}, {"© x"}));
    auto ids = t.encode("\xC3\xA9x");
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(ids.value(), (std::vector<int32_t>{0xC3, 256}));
    tokenizer::stream_decoder s(t);
    EXPECT_EQ(s.push(ids.value()[0]), "");
    EXPECT_EQ(s.push(ids.value()[1]), "\xC3\xA9x");
}

// ---- errors ----------------------------------------------------------------------------------------------

TEST(tokenizer_errors, missing_file) {
    auto t = tokenizer::load("/nonexistent/fp4moe/tokenizer.json");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.get_status().code(), status_code::not_found);
    EXPECT_NE(t.get_status().message().find("/nonexistent/fp4moe/tokenizer.json"), std::string::npos);
}

TEST(tokenizer_errors, bad_json_names_the_file) {
    tok_dir d;
    const std::string p = d.write("tokenizer.json", "{\"model\": {");
    auto t = tokenizer::load(d.path()); // directory form
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.get_status().code(), status_code::corrupt);
    EXPECT_NE(t.get_status().message().find(p), std::string::npos) << t.get_status().message();
}

status load_status(const json &j) {
    tok_dir d;
    const std::string p = d.write("tokenizer.json", j.dump());
    auto t = tokenizer::load(p);
    EXPECT_FALSE(t.ok());
    if (t.ok()) return status::success();
    EXPECT_NE(t.get_status().message().find(p), std::string::npos) << t.get_status().message();
    return t.get_status();
}

TEST(tokenizer_errors, messages_name_the_field) {
    json j = tiny_tokenizer({}, json::array());
    j["model"].erase("vocab");
    status st = load_status(j);
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_NE(st.message().find("model.vocab"), std::string::npos) << st.message();

    j = tiny_tokenizer({}, {"x yz"});
    st = load_status(j);
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_NE(st.message().find("model.merges"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("\"yz\""), std::string::npos) << st.message();

    j = tiny_tokenizer({}, {"a b c"});
    EXPECT_NE(load_status(j).message().find("model.merges[0]"), std::string::npos);

    j = tiny_tokenizer({}, json::array());
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    st = load_status(j);
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_NE(st.message().find("pre_tokenizer.pretokenizers[0].pattern"), std::string::npos) << st.message();

    j = tiny_tokenizer({}, json::array());
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
    st = load_status(j);
    EXPECT_EQ(st.code(), status_code::unsupported);
    EXPECT_NE(st.message().find("pre_tokenizer.pretokenizers[0].behavior"), std::string::npos) << st.message();

    j = tiny_tokenizer({}, json::array());
    j["model"]["type"] = "Unigram";
    EXPECT_EQ(load_status(j).code(), status_code::unsupported);

    j = tiny_tokenizer({}, json::array());
    j["normalizer"] = {{"type", "NFKC"}};
    EXPECT_NE(load_status(j).message().find("normalizer.type"), std::string::npos);

    j = tiny_tokenizer({}, json::array());
    j["added_tokens"] = json::array({{{"content", "<x>"}}});
    EXPECT_NE(load_status(j).message().find("added_tokens[0].id"), std::string::npos);
}

TEST(tokenizer_errors, unknown_chat_template_names_the_file) {
    tok_dir d;
    d.write("tokenizer.json", tiny_tokenizer({}, json::array()).dump());
    const std::string cfg = d.write("tokenizer_config.json", R"({"chat_template": "{{ messages }}"})");
    auto t = tokenizer::load(d.path());
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.get_status().code(), status_code::unsupported);
    EXPECT_NE(t.get_status().message().find(cfg), std::string::npos) << t.get_status().message();
}

// ---- NFC and pre-tokenizer regexes ---------------------------------------------------------------------

TEST(tokenizer_nfc, composes_reorders_and_excludes) {
    EXPECT_EQ(tok::nfc("e\u0301"), "\u00e9");
    EXPECT_EQ(tok::nfc("a\u0301\u0323"), "\u1ea1\u0301"); // reordered below-dot first, then composed
    EXPECT_EQ(tok::nfc("\u1100\u1161\u11a8"), "\uac01");  // Hangul LVT
    EXPECT_EQ(tok::nfc("\u0958"), "\u0915\u093c");        // composition exclusion
    EXPECT_EQ(tok::nfc("\u212b"), "\u00c5");              // singleton
    EXPECT_EQ(tok::nfc("\u0301e"), "\u0301e");            // leading mark stays
    EXPECT_EQ(tok::nfc("plain ascii, caf\u00e9"), "plain ascii, caf\u00e9");
}

std::vector<std::string> pieces(const std::vector<std::string> &patterns, std::string_view text) {
    tok::pre_tokenizer p;
    for (const std::string &s : patterns) p.splits.emplace_back(s, false, "test");
    std::vector<std::string_view> out;
    std::deque<std::string> storage;
    p.split(text, out, storage);
    return {out.begin(), out.end()};
}

const std::string kQwen =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kGlm =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(tokenizer_pretokenize, family_regexes) {
    using v = std::vector<std::string>;
    EXPECT_EQ(pieces({kGlm}, "    ctx"), (v{"   ", " ctx"}));
    EXPECT_EQ(pieces({kGlm}, "1234567"), (v{"123", "456", "7"}));
    EXPECT_EQ(pieces({kQwen}, "1234"), (v{"1", "2", "3", "4"}));
    EXPECT_EQ(pieces({kQwen}, "DON'T it'S"), (v{"DON", "'T", " it", "'S"}));
    EXPECT_EQ(pieces({kQwen}, "a\n\n b"), (v{"a", "\n\n", " b"}));
    // Unicode whitespace (needs PCRE2_UCP) and Unicode case folding in the contraction group, as HF splits them.
    EXPECT_EQ(pieces({kQwen}, "wide\u3000\u3000\u3000gap"), (v{"wide", "\u3000\u3000", "\u3000gap"}));
    EXPECT_EQ(pieces({kQwen}, "x\u00a0\u00a0"), (v{"x", "\u00a0\u00a0"}));
    EXPECT_EQ(pieces({kQwen}, "a\u180e\u180eb"), (v{"a", "\u180e\u180e", "b"}));
    EXPECT_EQ(pieces({kQwen}, "a\u0085\u0085b"), (v{"a", "\u0085", "\u0085b"}));
    EXPECT_EQ(pieces({kQwen}, "it\u2019s \u017fit'\u017f"), (v{"it", "\u2019s", " \u017fit", "'\u017f"}));
    const std::vector<std::string> deepseek = {
        R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
        "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
    EXPECT_EQ(pieces(deepseek, "ab中文12345 .x"), (v{"ab", "中文", "123", "45", " .", "x"}));
    EXPECT_EQ(pieces({tok::kGpt2Pattern}, "Hello  world's 42"), (v{"Hello", " ", " world", "'s", " 42"}));
}

// ---- chat templates ------------------------------------------------------------------------------------

const std::vector<chat_message> kChat = {
    {"system", "You are helpful."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "2+2?"},
};

TEST(tokenizer_chat, chatml) {
    auto r = render_chat(chat_format::chatml, kChat, true);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), "<|im_start|>system\nYou are helpful.<|im_end|>\n"
                         "<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\nHello!<|im_end|>\n"
                         "<|im_start|>user\n2+2?<|im_end|>\n"
                         "<|im_start|>assistant\n");
    // Qwen3: reasoning before the last user turn is dropped; after it, it is kept.
    const std::vector<chat_message> think = {{"user", "q1"},
                                             {"assistant", "<think>\nr1\n</think>\n\na1"},
                                             {"user", "q2"},
                                             {"assistant", "<think>r2</think>a2"}};
    auto t = render_chat(chat_format::chatml, think, false);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t.value(), "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
                         "<|im_start|>user\nq2<|im_end|>\n"
                         "<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n");
    const std::vector<chat_message> tool = {{"user", "q"}, {"tool", "r1"}, {"tool", "r2"}};
    EXPECT_EQ(render_chat(chat_format::chatml, tool, false).value(),
              "<|im_start|>user\nq<|im_end|>\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n"
              "<tool_response>\nr2\n</tool_response><|im_end|>\n");
}

TEST(tokenizer_chat, glm) {
    auto r = render_chat(chat_format::glm, kChat, true);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi"
                         "<|assistant|>\n<think></think>\nHello!<|user|>\n2+2?<|assistant|>");
    const std::vector<chat_message> think = {{"user", "q"}, {"assistant", "<think> r </think>\n a "}};
    EXPECT_EQ(render_chat(chat_format::glm, think, false).value(),
              "[gMASK]<sop><|user|>\nq<|assistant|>\n<think>r</think>\na");
}

TEST(tokenizer_chat, deepseek) {
    auto r = render_chat(chat_format::deepseek, kChat, true, "<｜begin▁of▁sentence｜>");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>"
                         "<｜User｜>2+2?<｜Assistant｜>");
}

TEST(tokenizer_chat, bad_role_and_no_format) {
    const std::vector<chat_message> bad = {{"narrator", "x"}};
    auto r = render_chat(chat_format::glm, bad, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.get_status().code(), status_code::invalid_argument);
    EXPECT_EQ(render_chat(chat_format::none, kChat, false).get_status().code(), status_code::unsupported);
}

TEST(tokenizer_chat, format_detected_from_checkpoint_files) {
    const std::string base = std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/tokenizer/";
    auto qwen = tokenizer::load(base + "qwen3/tokenizer.json"); // file form: siblings are read too
    auto glm = tokenizer::load(base + "glm4");                  // chat_template.jinja
    auto ds = tokenizer::load(base + "deepseek_v3");
    ASSERT_TRUE(qwen.ok() && glm.ok() && ds.ok());
    EXPECT_EQ(qwen.value().format(), chat_format::chatml);
    EXPECT_EQ(glm.value().format(), chat_format::glm);
    EXPECT_EQ(ds.value().format(), chat_format::deepseek);
    EXPECT_EQ(qwen.value().bos_id(), -1);
    EXPECT_EQ(qwen.value().eos_id(), qwen.value().token_to_id("<|im_end|>"));
    EXPECT_EQ(ds.value().bos_id(), ds.value().token_to_id("<｜begin▁of▁sentence｜>"));
    // stop ids: eos first, then config.json's eos_token_id list, deduplicated
    const auto stop = glm.value().stop_ids();
    EXPECT_EQ(std::vector<int32_t>(stop.begin(), stop.end()),
              (std::vector<int32_t>{*glm.value().token_to_id("<|endoftext|>"), 0, 1, 2}));
    const std::vector<chat_message> m = {{"user", "Hi"}};
    EXPECT_EQ(ds.value().apply_chat_template(m, true).value(), "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
    // The rendered prompt's markers encode to the special ids.
    auto ids = glm.value().encode(glm.value().apply_chat_template(m, true).value());
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids.value().front(), *glm.value().token_to_id("[gMASK]"));
    EXPECT_EQ(ids.value().back(), *glm.value().token_to_id("<|assistant|>"));
}

TEST(tokenizer_chat, format_from_model_type_when_no_template) {
    tok_dir d;
    d.write("tokenizer.json", tiny_tokenizer({}, json::array()).dump());
    d.write("config.json", R"({"model_type": "deepseek_v3", "eos_token_id": 1})");
    auto t = tokenizer::load(d.path());
    ASSERT_TRUE(t.ok()) << t.get_status().to_string();
    EXPECT_EQ(t.value().format(), chat_format::deepseek);
    EXPECT_EQ(detect_chat_format("{{ '<|im_start|>' }}"), chat_format::chatml);
    EXPECT_EQ(detect_chat_format("plain"), chat_format::none);
    EXPECT_STREQ(chat_format_name(chat_format::glm), "glm");
}

} // namespace
} // namespace fp4moe
