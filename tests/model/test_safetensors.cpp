// safetensors reader, writer and checkpoints: round trips for every dtype, sharded checkpoints, and hostile
// files that must be rejected with an error naming the file and the tensor.
#include "fp4moe/safetensors.h"
#include "safetensors_test_util.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sys/stat.h>
#include <vector>

namespace fp4moe {
namespace {

using test::file_bytes;
using test::temp_dir;
using test::write_bytes;

constexpr dtype kAllDtypes[] = {dtype::f64,     dtype::f32, dtype::f16, dtype::bf16, dtype::f8_e4m3,
                                dtype::f8_e5m2, dtype::i64, dtype::i32, dtype::i16,  dtype::i8,
                                dtype::u64,     dtype::u32, dtype::u16, dtype::u8,   dtype::boolean};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) & 0xFF);
    return v;
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

std::string read_all(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// ---------------------------------------------------------------------------------------------------------
// Round trips

TEST(Safetensors, RoundTripEveryDtype) {
    temp_dir dir;
    const std::string path = dir.file("all.safetensors");
    std::vector<std::vector<std::byte>> buffers;
    std::vector<tensor_to_write> ts;
    unsigned seed = 0;
    for (dtype t : kAllDtypes) {
        const std::vector<std::int64_t> shape = {2, 3};
        buffers.push_back(pattern(6 * dtype_size(t), seed++));
        ts.push_back({fmt::format("t.{}", dtype_name(t)), t, shape, buffers.back()});
    }
    buffers.push_back(pattern(4, 99));
    ts.push_back({"scalar", dtype::f32, {}, buffers.back()});
    ts.push_back({"empty", dtype::bf16, {0, 5}, {}});
    ts.push_back({"last", dtype::u8, {3}, std::span<const std::byte>(buffers[0]).first(3)});
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcödé \"quoted\""}};
    ASSERT_TRUE(write_safetensors(path, ts, meta).ok());
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

    auto r = safetensors_file::open(path);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const auto &f = r.value();
    EXPECT_EQ(f.metadata(), meta);
    ASSERT_EQ(f.tensors().size(), ts.size());
    std::uint64_t expect_begin = 0;
    for (std::size_t i = 0; i < ts.size(); ++i) {
        const tensor_info &got = f.tensors()[i]; // file order == write order (data is contiguous)
        SCOPED_TRACE(ts[i].name);
        EXPECT_EQ(got.name, ts[i].name);
        EXPECT_EQ(got.type, ts[i].type);
        EXPECT_EQ(got.shape, ts[i].shape);
        EXPECT_EQ(got.begin, expect_begin);
        expect_begin = got.end;
        EXPECT_TRUE(same_bytes(f.data(got), ts[i].data));
        EXPECT_EQ(f.find(ts[i].name), &got);
    }
    EXPECT_EQ(f.find("scalar")->numel(), 1);
    EXPECT_EQ(f.find("empty")->numel(), 0);
    EXPECT_EQ(f.find("missing"), nullptr);

    // Layout as the Python library writes it: header length a multiple of 8, padded with spaces.
    const std::string raw = read_all(path);
    EXPECT_EQ(f.file_size(), raw.size());
    std::uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(raw.size(), 8 + n + expect_begin);
    const std::string header = raw.substr(8, n);
    EXPECT_EQ(header.substr(0, 15), "{\"__metadata__\"");
    const auto close = header.find_last_of('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
}

TEST(Safetensors, NoTensorsNoMetadata) {
    temp_dir dir;
    const std::string path = dir.file("none.safetensors");
    ASSERT_TRUE(write_safetensors(path, {}).ok());
    EXPECT_EQ(read_all(path), file_bytes("{}      ", ""));
    auto r = safetensors_file::open(path);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    EXPECT_TRUE(r.value().tensors().empty());
    EXPECT_TRUE(r.value().metadata().empty());
}

TEST(Safetensors, OverwritesAndSurvivesMove) {
    temp_dir dir;
    const std::string path = dir.file("m.safetensors");
    auto a = pattern(8, 1), b = pattern(4, 2);
    tensor_to_write t1[] = {{"x", dtype::f32, {2}, a}};
    tensor_to_write t2[] = {{"y", dtype::i32, {1}, b}};
    ASSERT_TRUE(write_safetensors(path, t1).ok());
    ASSERT_TRUE(write_safetensors(path, t2).ok());
    auto r = safetensors_file::open(path);
    ASSERT_TRUE(r.ok());
    safetensors_file f = std::move(r).value();
    safetensors_file g = std::move(f);
    ASSERT_EQ(g.tensors().size(), 1u);
    EXPECT_EQ(g.tensors()[0].name, "y");
    EXPECT_TRUE(same_bytes(g.data(g.tensors()[0]), b));
}

// Files from other writers: gaps, trailing bytes, header order unlike data order, extra entry fields.
TEST(Safetensors, AcceptsGapsTrailingBytesAndAnyHeaderOrder) {
    temp_dir dir;
    const std::string path = dir.file("gaps.safetensors");
    const std::string header = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8],"extra":1},)"
                               R"("z":{"dtype":"F32","shape":[0],"data_offsets":[6,6]},)"
                               R"("a":{"dtype":"I16","shape":[],"data_offsets":[0,2]}}  )";
    write_bytes(path, file_bytes(header, "\x01\x02....\x03\x04trailing"));
    auto r = safetensors_file::open(path);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const auto &ts = r.value().tensors();
    ASSERT_EQ(ts.size(), 3u);
    EXPECT_EQ(ts[0].name, "a");
    EXPECT_EQ(ts[1].name, "z");
    EXPECT_EQ(ts[2].name, "b");
    EXPECT_TRUE(ts[0].shape.empty());
    auto d = r.value().data(ts[2]);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(static_cast<int>(d[0]), 3);
    EXPECT_EQ(static_cast<int>(d[1]), 4);
}

TEST(Safetensors, ParseHeaderDirectly) {
    auto r = parse_safetensors_header(R"({"w":{"dtype":"F8_E4M3","shape":[4,2],"data_offsets":[0,8]}})", 8, "lbl");
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    ASSERT_EQ(r.value().tensors.size(), 1u);
    EXPECT_EQ(r.value().tensors[0].type, dtype::f8_e4m3);
    EXPECT_EQ(r.value().tensors[0].numel(), 8);

    auto bad = parse_safetensors_header(R"({"w":{"dtype":"F32","shape":[4,2],"data_offsets":[0,8]}})", 8, "lbl");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.get_status().code(), status_code::corrupt);
    EXPECT_EQ(bad.get_status().message(), "lbl: tensor 'w': shape [4, 2] x F32 = 32 bytes but data_offsets span 8");
}

// ---------------------------------------------------------------------------------------------------------
// Hostile files

struct hostile_case {
    const char *what;
    std::string bytes;   ///< the whole file
    const char *tensor;  ///< must appear quoted in the message; null when no tensor is involved
    const char *message; ///< another fragment the message must contain
};

void PrintTo(const hostile_case &c, std::ostream *os) {
    *os << c.what;
}

std::string entry(const char *name, const char *body) {
    return fmt::format("\"{}\":{{{}}}", name, body);
}
std::string one(const char *body) {
    return fmt::format("{{{}}}", entry("w", body));
}
std::string two(const char *a, const char *b) {
    return fmt::format("{{{},{}}}", entry("a", a), entry("b", b));
}

std::vector<hostile_case> hostile_cases() {
    const std::string d8(8, '\0');
    return {
        {"empty file", "", nullptr, "0 bytes, too short"},
        {"7 bytes", std::string(7, '\0'), nullptr, "7 bytes, too short"},
        {"header length past the end", file_bytes("{}", "", 1000), nullptr, "runs past the end"},
        {"header length over the limit", file_bytes("{}", "", kMaxSafetensorsHeader + 1), nullptr, "limit"},
        {"header length 2^64-1", file_bytes("{}", "", ~0ull - 1), nullptr, "limit"},
        {"overlong UTF-8", file_bytes("{\"w\xC0\x80\":{}}", ""), nullptr, "not valid UTF-8 (byte 3"},
        {"UTF-8 surrogate", file_bytes("{\"\xED\xA0\x80\":{}}", ""), nullptr, "not valid UTF-8"},
        {"UTF-8 above U+10FFFF", file_bytes("{\"\xF4\x90\x80\x80\":{}}", ""), nullptr, "not valid UTF-8"},
        {"truncated UTF-8", file_bytes("{\"w\":{}}\xE2\x82", ""), nullptr, "not valid UTF-8"},
        {"stray continuation byte", file_bytes("{\"\x80\":{}}", ""), nullptr, "not valid UTF-8"},
        {"not JSON", file_bytes("{\"w\":", ""), nullptr, "not valid JSON"},
        {"JSON array", file_bytes("[1,2]", ""), nullptr, "not a JSON object (got array)"},
        {"JSON string", file_bytes("\"w\"", ""), nullptr, "not a JSON object (got string)"},
        {"entry not an object", file_bytes(R"({"w":5})", ""), "w", "entry is not an object (got integer)"},
        {"missing dtype", file_bytes(one(R"("shape":[2],"data_offsets":[0,8])"), d8), "w", "missing \"dtype\""},
        {"missing shape", file_bytes(one(R"("dtype":"F32","data_offsets":[0,8])"), d8), "w", "missing \"shape\""},
        {"missing data_offsets", file_bytes(one(R"("dtype":"F32","shape":[2])"), d8), "w", "missing \"data_offsets\""},
        {"dtype a number", file_bytes(one(R"("dtype":1,"shape":[2],"data_offsets":[0,8])"), d8), "w", "not a string"},
        {"unknown dtype", file_bytes(one(R"("dtype":"F128","shape":[2],"data_offsets":[0,8])"), d8), "w",
         "unknown dtype 'F128'"},
        {"lower-case dtype", file_bytes(one(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])"), d8), "w",
         "unknown dtype"},
        {"shape a string", file_bytes(one(R"("dtype":"F32","shape":"2","data_offsets":[0,8])"), d8), "w",
         "not an array"},
        {"shape element a float", file_bytes(one(R"("dtype":"F32","shape":[2.0],"data_offsets":[0,8])"), d8), "w",
         "not a non-negative integer"},
        {"negative dimension", file_bytes(one(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), d8), "w",
         "negative (-2)"},
        {"dimension past int64",
         file_bytes(one(R"("dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8])"), d8), "w",
         "larger than 2^63"},
        {"shape product overflows",
         file_bytes(one(R"("dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0])"), d8), "w",
         "more than 2^64 elements"},
        {"byte size overflows",
         file_bytes(one(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8])"), d8), "w",
         "2^64 or more bytes"},
        {"size mismatch", file_bytes(one(R"("dtype":"F32","shape":[4,8],"data_offsets":[0,64])"), std::string(64, 'x')),
         "w", "shape [4, 8] x F32 = 128 bytes but data_offsets span 64"},
        {"data_offsets one number", file_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[0])"), d8), "w",
         "data_offsets"},
        {"data_offsets three numbers", file_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[0,8,8])"), d8), "w",
         "data_offsets"},
        {"data_offsets negative", file_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), d8), "w",
         "data_offsets"},
        {"data_offsets float", file_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[0,8.0])"), d8), "w",
         "data_offsets"},
        {"begin after end", file_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[16,8])"), std::string(16, 'x')),
         "w", "begin after end"},
        {"end past the data", file_bytes(one(R"("dtype":"F32","shape":[4],"data_offsets":[0,16])"), d8), "w",
         "run past the 8-byte data buffer"},
        {"end near 2^64",
         file_bytes(one(R"("dtype":"U8","shape":[2],"data_offsets":[18446744073709551614,18446744073709551615])"), d8),
         "w", "run past"},
        {"overlap",
         file_bytes(two(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])",
                        R"("dtype":"F32","shape":[2],"data_offsets":[4,12])"),
                    std::string(12, 'x')),
         "b", "'a' [0, 8) and 'b' [4, 12) overlap"},
        {"same offsets twice",
         file_bytes(two(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])",
                        R"("dtype":"I32","shape":[2],"data_offsets":[0,8])"),
                    d8),
         "a", "overlap"},
        {"duplicate tensor name",
         file_bytes(fmt::format("{{{},{}}}", entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"),
                                entry("w", R"("dtype":"F32","shape":[0],"data_offsets":[0,0])")),
                    d8),
         "w", "repeats the key"},
        {"metadata value a number", file_bytes(R"({"__metadata__":{"k":1}})", ""), "k", "not a string"},
        {"metadata not an object", file_bytes(R"({"__metadata__":"k"})", ""), nullptr, "__metadata__"},
        {"deep nesting", file_bytes(fmt::format("{{\"w\":{}{}}}", std::string(40, '['), std::string(40, ']')), ""),
         nullptr, "deeper than"},
    };
}

class SafetensorsHostile : public ::testing::TestWithParam<hostile_case> {};

TEST_P(SafetensorsHostile, RejectedNamingFileAndTensor) {
    const hostile_case &c = GetParam();
    temp_dir dir;
    const std::string path = dir.file("model-00001.safetensors");
    write_bytes(path, c.bytes);
    auto r = safetensors_file::open(path);
    ASSERT_FALSE(r.ok()) << c.what;
    const status st = r.get_status();
    EXPECT_EQ(st.code(), status_code::corrupt) << st.to_string();
    EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
    if (c.tensor) {
        EXPECT_NE(st.message().find(fmt::format("'{}'", c.tensor)), std::string::npos) << st.message();
    }
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();

    // The pure parser agrees when the length prefix is sound.
    if (c.bytes.size() >= 8) {
        std::uint64_t n = 0;
        std::memcpy(&n, c.bytes.data(), 8);
        if (n <= c.bytes.size() - 8) {
            auto h = parse_safetensors_header(std::string_view(c.bytes).substr(8, n), c.bytes.size() - 8 - n, "L");
            ASSERT_FALSE(h.ok());
            EXPECT_EQ(h.get_status().message().rfind("L: ", 0), 0u);
        }
    }
}

std::string case_name(const ::testing::TestParamInfo<hostile_case> &info) {
    std::string s = info.param.what;
    for (char &ch : s) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return s;
}

INSTANTIATE_TEST_SUITE_P(Cases, SafetensorsHostile, ::testing::ValuesIn(hostile_cases()), case_name);

TEST(Safetensors, OpenErrors) {
    temp_dir dir;
    auto missing = safetensors_file::open(dir.file("nope.safetensors"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.get_status().code(), status_code::not_found);
    EXPECT_NE(missing.get_status().message().find("nope.safetensors"), std::string::npos);

    const std::string fifo = dir.file("fifo.safetensors");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    auto pipe = safetensors_file::open(fifo); // must not block waiting for a writer
    ASSERT_FALSE(pipe.ok());
    EXPECT_EQ(pipe.get_status().code(), status_code::io_error);

    auto directory = safetensors_file::open(dir.path().string());
    ASSERT_FALSE(directory.ok());
    EXPECT_EQ(directory.get_status().code(), status_code::io_error);
    EXPECT_NE(directory.get_status().message().find("not a regular file"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
// Writer errors

TEST(SafetensorsWrite, RejectsBadInput) {
    temp_dir dir;
    const std::string path = dir.file("out.safetensors");
    auto buf = pattern(16, 3);
    struct bad {
        std::vector<tensor_to_write> ts;
        const char *fragment;
    };
    const bad cases[] = {
        {{{"a", dtype::f32, {2}, std::span(buf).first(8)}, {"a", dtype::f32, {2}, std::span(buf).first(8)}},
         "tensor 'a' is given twice"},
        {{{"", dtype::u8, {1}, std::span(buf).first(1)}}, "empty name"},
        {{{"__metadata__", dtype::u8, {1}, std::span(buf).first(1)}}, "reserved"},
        {{{"w", dtype::f32, {4, 8}, std::span(buf)}}, "tensor 'w': shape [4, 8] x F32 = 128 bytes but 16 bytes given"},
        {{{"w", dtype::f32, {-1}, {}}}, "negative dimension"},
        {{{"w", dtype::f64, {1ll << 62, 1ll << 62}, {}}}, "too large"},
        {{{"w\xFF", dtype::u8, {1}, std::span(buf).first(1)}}, "not valid UTF-8"},
    };
    for (const auto &c : cases) {
        status st = write_safetensors(path, c.ts);
        ASSERT_FALSE(st.ok()) << c.fragment;
        EXPECT_EQ(st.code(), status_code::invalid_argument);
        EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
        EXPECT_NE(st.message().find(c.fragment), std::string::npos) << st.message();
        EXPECT_FALSE(std::filesystem::exists(path));
        EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    }
    status st = write_safetensors(path, {}, {{"k", "\xC0\x80"}});
    EXPECT_EQ(st.code(), status_code::invalid_argument) << st.to_string();
}

TEST(SafetensorsWrite, IoErrorNamesPath) {
    temp_dir dir;
    const std::string path = dir.file("no/such/dir/out.safetensors");
    status st = write_safetensors(path, {});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), status_code::io_error);
    EXPECT_NE(st.message().find(path + ".tmp"), std::string::npos) << st.message();

    // Renaming onto a directory fails after the data is written; the temporary file is removed.
    const std::string blocked = dir.file("blocked");
    std::filesystem::create_directories(blocked + "/child");
    st = write_safetensors(blocked, {});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), status_code::io_error);
    EXPECT_NE(st.message().find(blocked), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(blocked + ".tmp"));
}

// ---------------------------------------------------------------------------------------------------------
// Checkpoints

class SafetensorsCheckpoint : public ::testing::Test {
protected:
    void write(const std::string &name, const std::vector<std::pair<std::string, std::int32_t>> &tensors) {
        std::vector<tensor_to_write> ts;
        for (const auto &[n, v] : tensors) {
            values_.push_back(std::make_unique<std::int32_t>(v));
            ts.push_back({n, dtype::i32, {}, std::as_bytes(std::span(values_.back().get(), 1))});
        }
        ASSERT_TRUE(write_safetensors(dir_.file(name), ts).ok());
    }
    void index(const std::string &weight_map) {
        write_bytes(dir_.file("model.safetensors.index.json"),
                    fmt::format(R"({{"metadata":{{"total_size":12}},"weight_map":{}}})", weight_map));
    }
    static std::int32_t value_of(const checkpoint::entry &e) {
        std::int32_t v = 0;
        std::memcpy(&v, e.data().data(), sizeof v);
        return v;
    }
    void expect_error(status_code code, const std::vector<std::string> &fragments) {
        auto r = checkpoint::open(dir_.path().string());
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.get_status().code(), code) << r.get_status().to_string();
        for (const auto &f : fragments)
            EXPECT_NE(r.get_status().message().find(f), std::string::npos) << r.get_status().message();
    }

    temp_dir dir_;
    std::vector<std::unique_ptr<std::int32_t>> values_;
};

TEST_F(SafetensorsCheckpoint, SingleFileAndDirectory) {
    write("model.safetensors", {{"z", 3}, {"a", 1}});
    for (const std::string &p : {dir_.file("model.safetensors"), dir_.path().string()}) {
        auto r = checkpoint::open(p);
        ASSERT_TRUE(r.ok()) << r.get_status().to_string();
        const checkpoint &c = r.value();
        EXPECT_EQ(c.path(), p);
        ASSERT_EQ(c.files().size(), 1u);
        ASSERT_EQ(c.tensors().size(), 2u);
        EXPECT_EQ(c.tensors()[0].info->name, "a");
        EXPECT_EQ(value_of(c.find("z")), 3);
        EXPECT_EQ(c.find("y").info, nullptr);
    }
}

TEST_F(SafetensorsCheckpoint, Sharded) {
    write("model-00001-of-00002.safetensors", {{"layers.1.w", 11}, {"embed", 5}});
    write("model-00002-of-00002.safetensors", {{"layers.0.w", 10}, {"unlisted", 7}});
    write("model.safetensors", {{"decoy", 0}}); // the index takes precedence
    index(R"({"embed":"model-00001-of-00002.safetensors","layers.1.w":"model-00001-of-00002.safetensors",)"
          R"("layers.0.w":"model-00002-of-00002.safetensors"})");
    auto r = checkpoint::open(dir_.path().string());
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    checkpoint c = std::move(r).value(); // entries point into the moved files
    ASSERT_EQ(c.files().size(), 2u);
    std::vector<std::string> names;
    for (const auto &e : c.tensors()) names.push_back(e.info->name);
    EXPECT_EQ(names, (std::vector<std::string>{"embed", "layers.0.w", "layers.1.w", "unlisted"}));
    EXPECT_EQ(value_of(c.find("layers.0.w")), 10);
    EXPECT_EQ(value_of(c.find("layers.1.w")), 11);
    EXPECT_EQ(value_of(c.find("embed")), 5);
    EXPECT_NE(c.find("layers.0.w").file->path().find("00002"), std::string::npos);
    EXPECT_EQ(c.find("decoy").info, nullptr);
}

TEST_F(SafetensorsCheckpoint, MissingShard) {
    write("a.safetensors", {{"x", 1}});
    index(R"({"x":"a.safetensors","y":"b.safetensors"})");
    expect_error(status_code::not_found, {"model.safetensors.index.json", "b.safetensors", "'y'"});
}

TEST_F(SafetensorsCheckpoint, TensorNotInItsShard) {
    write("a.safetensors", {{"x", 1}});
    write("b.safetensors", {{"y", 2}});
    index(R"({"x":"a.safetensors","y":"a.safetensors"})");
    expect_error(status_code::corrupt, {"model.safetensors.index.json", "'y'", "a.safetensors"});
}

TEST_F(SafetensorsCheckpoint, TensorInTwoShards) {
    write("a.safetensors", {{"x", 1}, {"y", 2}});
    write("b.safetensors", {{"y", 3}});
    index(R"({"x":"a.safetensors","y":"b.safetensors"})");
    expect_error(status_code::corrupt, {"'y'", "a.safetensors", "b.safetensors"});
}

TEST_F(SafetensorsCheckpoint, BadIndex) {
    write("a.safetensors", {{"x", 1}});
    index(R"({"x":"../a.safetensors"})");
    expect_error(status_code::corrupt, {"'x'", "not a plain file name"});
    index(R"({"x":1})");
    expect_error(status_code::corrupt, {"'x'", "not a string"});
    index(R"({"x":"a.safetensors","x":"a.safetensors"})");
    expect_error(status_code::corrupt, {"repeats the key 'x'"});
    write_bytes(dir_.file("model.safetensors.index.json"), "{\"metadata\":{}}");
    expect_error(status_code::corrupt, {"model.safetensors.index.json", "weight_map"});
    write_bytes(dir_.file("model.safetensors.index.json"), "{\"weight_map\":");
    expect_error(status_code::corrupt, {"model.safetensors.index.json", "not valid JSON"});
}

TEST_F(SafetensorsCheckpoint, ShardErrorNamesShard) {
    write_bytes(dir_.file("a.safetensors"),
                file_bytes(one(R"("dtype":"F32","shape":[4],"data_offsets":[0,8])"), std::string(8, '\0')));
    index(R"({"w":"a.safetensors"})");
    expect_error(status_code::corrupt, {"a.safetensors: tensor 'w'"});
}

TEST_F(SafetensorsCheckpoint, EmptyDirectoryAndMissingPath) {
    expect_error(status_code::not_found, {dir_.path().string(), "model.safetensors"});
    auto r = checkpoint::open(dir_.file("nope"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.get_status().code(), status_code::not_found);
    EXPECT_NE(r.get_status().message().find("nope"), std::string::npos);
}

} // namespace
} // namespace fp4moe
