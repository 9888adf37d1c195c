// Compares the codecs and the quantizer with reference answers computed by tests/quant/test_ml_dtypes.py
// (ml_dtypes and a numpy transcription of ModelOpt). Skipped unless FP4MOE_MLDTYPES_REF names that file; the
// script runs this with it set. See the script for the file layout and the documented differences.
#include "fp4moe/nvfp4.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace nv = fp4moe::nvfp4;

namespace {

struct reader {
    std::vector<char> data;
    std::size_t pos = 0;

    template <typename T>
    T get() {
        T v{};
        if (pos + sizeof(T) > data.size()) throw std::runtime_error("reference file truncated");
        std::memcpy(&v, data.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    template <typename T>
    std::vector<T> get_n(std::size_t n) {
        std::vector<T> v(n);
        for (auto &e : v) e = get<T>();
        return v;
    }
};

struct encode_case {
    std::vector<float> x;
    std::vector<std::uint8_t> code;
};

struct quant_case {
    std::int64_t rows, cols;
    float amax, global;
    std::vector<float> w;
    std::vector<std::uint8_t> scales, packed;
};

struct reference {
    std::vector<float> dec2, dec8;
    encode_case enc2, enc8;
    std::vector<quant_case> quant;
};

encode_case read_encode(reader &r) {
    encode_case c;
    const auto n = r.get<std::uint32_t>();
    c.x = r.get_n<float>(n);
    c.code = r.get_n<std::uint8_t>(n);
    return c;
}

// Loads the file once; null when the variable is unset (the test then skips).
const reference *load() {
    static const reference *ref = []() -> const reference * {
        const char *path = std::getenv("FP4MOE_MLDTYPES_REF");
        if (path == nullptr) return nullptr;
        std::ifstream f(path, std::ios::binary);
        if (!f) throw std::runtime_error(std::string("cannot open ") + path);
        reader r{std::vector<char>(std::istreambuf_iterator<char>(f), {})};
        if (r.data.size() < 8 || std::memcmp(r.data.data(), "FP4MLDT1", 8) != 0)
            throw std::runtime_error("bad magic in reference file");
        r.pos = 8;
        auto *out = new reference;
        out->dec2 = r.get_n<float>(r.get<std::uint32_t>());
        out->dec8 = r.get_n<float>(r.get<std::uint32_t>());
        out->enc2 = read_encode(r);
        out->enc8 = read_encode(r);
        const auto nq = r.get<std::uint32_t>();
        for (std::uint32_t i = 0; i < nq; ++i) {
            quant_case q{};
            q.rows = r.get<std::int64_t>();
            q.cols = r.get<std::int64_t>();
            q.amax = r.get<float>();
            q.global = r.get<float>();
            q.w = r.get_n<float>(static_cast<std::size_t>(q.rows * q.cols));
            q.scales = r.get_n<std::uint8_t>(static_cast<std::size_t>(q.rows * q.cols / 16));
            q.packed = r.get_n<std::uint8_t>(static_cast<std::size_t>(q.rows * q.cols / 2));
            out->quant.push_back(std::move(q));
        }
        if (r.pos != r.data.size()) throw std::runtime_error("trailing bytes in reference file");
        return out;
    }();
    return ref;
}

#define LOAD_OR_SKIP(ref)                                                                                              \
    const reference *ref = load();                                                                                     \
    if (ref == nullptr) GTEST_SKIP() << "FP4MOE_MLDTYPES_REF not set (tests/quant/test_ml_dtypes.py sets it)"

void expect_same_float(float got, float want, const std::string &what) {
    if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << what;
    } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << what;
    }
}

} // namespace

TEST(MlDtypes, DecodeEveryCode) {
    LOAD_OR_SKIP(ref);
    ASSERT_EQ(ref->dec2.size(), 16u);
    ASSERT_EQ(ref->dec8.size(), 256u);
    for (int c = 0; c < 16; ++c)
        expect_same_float(nv::e2m1_decode(static_cast<std::uint8_t>(c)), ref->dec2[c], "e2m1 " + std::to_string(c));
    for (int c = 0; c < 256; ++c)
        expect_same_float(nv::e4m3_decode(static_cast<std::uint8_t>(c)), ref->dec8[c], "e4m3 " + std::to_string(c));
}

TEST(MlDtypes, EncodeE2M1) {
    LOAD_OR_SKIP(ref);
    ASSERT_GT(ref->enc2.x.size(), 100000u);
    int failures = 0;
    for (std::size_t i = 0; i < ref->enc2.x.size() && failures < 20; ++i) {
        const float x = ref->enc2.x[i];
        const int got = nv::e2m1_encode(x), want = ref->enc2.code[i];
        if (got != want) ++failures;
        EXPECT_EQ(got, want) << "x = " << x << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ")";
    }
}

TEST(MlDtypes, EncodeE4M3) {
    LOAD_OR_SKIP(ref);
    ASSERT_GT(ref->enc8.x.size(), 100000u);
    int failures = 0;
    for (std::size_t i = 0; i < ref->enc8.x.size() && failures < 20; ++i) {
        const float x = ref->enc8.x[i];
        const int got = nv::e4m3_encode(x), want = ref->enc8.code[i];
        if (got != want) ++failures;
        EXPECT_EQ(got, want) << "x = " << x << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ")";
    }
}

TEST(MlDtypes, QuantizeMatchesModelOptTranscription) {
    LOAD_OR_SKIP(ref);
    ASSERT_FALSE(ref->quant.empty());
    for (std::size_t i = 0; i < ref->quant.size(); ++i) {
        const quant_case &q = ref->quant[i];
        SCOPED_TRACE("case " + std::to_string(i) + ": " + std::to_string(q.rows) + "x" + std::to_string(q.cols));
        auto r = nv::quantize(q.w, q.rows, q.cols, q.amax);
        ASSERT_TRUE(r.ok()) << r.get_status().to_string();
        const nv::matrix &m = r.value();
        EXPECT_EQ(std::bit_cast<std::uint32_t>(m.global_scale), std::bit_cast<std::uint32_t>(q.global));
        EXPECT_EQ(m.scales, q.scales);
        EXPECT_EQ(m.packed, q.packed);
    }
}
