// Interop with the Python `safetensors` library, both directions:
//  - ReadsPythonFixture: the committed tests/model/fixtures/pysafetensors.safetensors (written by
//    make_fixtures.py) matches its sidecar JSON: names, dtypes, shapes, FNV-1a hashes of the bytes.
//    FP4MOE_INTEROP_IN / FP4MOE_INTEROP_SIDECAR point it at a freshly written pair instead.
//  - WriteForPython: writes the file test_safetensors_python.py loads with Python; runs only when
//    FP4MOE_INTEROP_OUT names the output path. Keep its contents in step with that script.
#include "fp4moe/safetensors.h"
#include "safetensors_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

namespace fp4moe {
namespace {

std::string env_or(const char *name, const std::string &fallback) {
    const char *v = std::getenv(name);
    return v && *v ? v : fallback;
}

TEST(SafetensorsInterop, ReadsPythonFixture) {
    const std::string fixtures = std::string(FP4MOE_SOURCE_DIR) + "/tests/model/fixtures/";
    const std::string path = env_or("FP4MOE_INTEROP_IN", fixtures + "pysafetensors.safetensors");
    const std::string sidecar_path = env_or("FP4MOE_INTEROP_SIDECAR", fixtures + "pysafetensors.json");
    std::ifstream sf(sidecar_path);
    ASSERT_TRUE(sf.good()) << sidecar_path;
    const auto sidecar = nlohmann::json::parse(sf);

    auto r = checkpoint::open(path);
    ASSERT_TRUE(r.ok()) << r.get_status().to_string();
    const checkpoint &c = r.value();
    ASSERT_EQ(c.files().size(), 1u);
    using string_map = std::map<std::string, std::string>;
    EXPECT_EQ(c.files()[0].metadata(), sidecar["metadata"].get<string_map>());

    const auto &expected = sidecar["tensors"];
    ASSERT_EQ(c.tensors().size(), expected.size());
    ASSERT_GE(expected.size(), 20u);
    for (const auto &e : expected) {
        const auto name = e["name"].get<std::string>();
        SCOPED_TRACE(name);
        auto t = c.find(name);
        ASSERT_NE(t.info, nullptr);
        EXPECT_EQ(dtype_name(t.info->type), e["dtype"].get<std::string>());
        EXPECT_EQ(t.info->shape, e["shape"].get<std::vector<std::int64_t>>());
        EXPECT_EQ(t.info->nbytes(), e["nbytes"].get<std::uint64_t>());
        EXPECT_EQ(fmt::format("{:016x}", test::fnv1a64(t.data())), e["fnv1a64"].get<std::string>());
        if (e.contains("value")) {
            ASSERT_EQ(t.info->type, dtype::f32);
            float v = 0;
            std::memcpy(&v, t.data().data(), sizeof v);
            EXPECT_EQ(v, e["value"].get<float>());
        }
    }

    // The ModelOpt NVFP4 group, spelled out.
    const std::string p = "model.layers.0.mlp.experts.0.down_proj.";
    auto w = c.find(p + "weight"), s = c.find(p + "weight_scale"), s2 = c.find(p + "weight_scale_2");
    ASSERT_TRUE(w.info && s.info && s2.info);
    EXPECT_EQ(w.info->type, dtype::u8);
    EXPECT_EQ(w.info->shape, (std::vector<std::int64_t>{8, 16}));
    EXPECT_EQ(s.info->type, dtype::f8_e4m3);
    EXPECT_EQ(s.info->shape, (std::vector<std::int64_t>{8, 2}));
    EXPECT_TRUE(s2.info->shape.empty());
    EXPECT_EQ(s2.info->numel(), 1);
    EXPECT_EQ(c.find("empty.f32").info->numel(), 0);
    EXPECT_EQ(c.find("empty.f32").data().size(), 0u);
}

template <typename T>
std::vector<std::byte> bytes_of(std::initializer_list<T> v) {
    std::vector<std::byte> out(v.size() * sizeof(T));
    std::memcpy(out.data(), std::data(v), out.size());
    return out;
}

TEST(SafetensorsPyInterop, WriteForPython) {
    const char *out = std::getenv("FP4MOE_INTEROP_OUT");
    if (!out || !*out) GTEST_SKIP() << "FP4MOE_INTEROP_OUT is not set (test_safetensors_python.py sets it)";
    using i64 = std::numeric_limits<std::int64_t>;
    // Storage first: tensor_to_write only points at it.
    const std::vector<std::vector<std::byte>> data = {
        bytes_of<double>({-1.0, -0.75, -0.5, -0.25, 0.0, 0.25}),
        bytes_of<float>({-2.0f, -0.5f, 1.0f, 2.5f}),
        bytes_of<std::uint16_t>({0x3C00, 0xC000, 0x3800, 0x7BFF}), // f16: 1, -2, 0.5, 65504
        bytes_of<std::uint16_t>({0x3F80, 0xC000, 0x4049}),         // bf16: 1, -2, 3.140625
        bytes_of<std::uint8_t>({0x38, 0x7E, 0xB8, 0x00}),          // e4m3: 1, 448, -1, 0
        bytes_of<std::uint8_t>({0x3C, 0xC0}),                      // e5m2: 1, -2
        bytes_of<std::int64_t>({i64::min(), -1, i64::max()}),
        bytes_of<std::int32_t>({-7, 0, 7, std::numeric_limits<std::int32_t>::max()}),
        bytes_of<std::int16_t>({-32768, 32767}),
        bytes_of<std::int8_t>({-128, 0, 127}),
        bytes_of<std::uint64_t>({0, std::numeric_limits<std::uint64_t>::max()}),
        bytes_of<std::uint32_t>({1, 0xFFFFFFFFu}),
        bytes_of<std::uint16_t>({2, 65535}),
        bytes_of<std::uint8_t>({0, 128, 255}),
        bytes_of<std::uint8_t>({1, 0, 1}),
        bytes_of<float>({2.5f}),
        bytes_of<std::uint8_t>({42}),
    };
    const std::vector<tensor_to_write> ts = {
        {"f64", dtype::f64, {2, 3}, data[0]},      {"f32", dtype::f32, {4}, data[1]},
        {"f16", dtype::f16, {4}, data[2]},         {"bf16", dtype::bf16, {3}, data[3]},
        {"f8_e4m3", dtype::f8_e4m3, {4}, data[4]}, {"f8_e5m2", dtype::f8_e5m2, {2}, data[5]},
        {"i64", dtype::i64, {3}, data[6]},         {"i32", dtype::i32, {2, 2}, data[7]},
        {"i16", dtype::i16, {2}, data[8]},         {"i8", dtype::i8, {3}, data[9]},
        {"u64", dtype::u64, {2}, data[10]},        {"u32", dtype::u32, {2}, data[11]},
        {"u16", dtype::u16, {2}, data[12]},        {"u8", dtype::u8, {3}, data[13]},
        {"bool", dtype::boolean, {3}, data[14]},   {"scalar", dtype::f32, {}, data[15]},
        {"empty", dtype::i32, {0, 3}, {}},         {"unicode.\xC3\xA4", dtype::u8, {1}, data[16]},
    };
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"writer", "fp4moe"}, {"quote", "a \"b\" \\ c"}};
    status st = write_safetensors(out, ts, meta);
    ASSERT_TRUE(st.ok()) << st.to_string();
}

} // namespace
} // namespace fp4moe
