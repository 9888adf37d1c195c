// Helpers shared by the safetensors tests: a per-test temporary directory, raw file writing, FNV-1a.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace fp4moe::test {

/// The whole file as bytes (empty when unreadable).
inline std::string read_file(const std::filesystem::path &p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// A fresh directory under the system temp dir, removed (with its contents) on destruction.
class temp_dir {
public:
    temp_dir() {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string leaf = "fp4moe_" + std::to_string(::getpid());
        if (info) leaf += std::string("_") + info->test_suite_name() + "_" + info->name();
        path_ = std::filesystem::temp_directory_path() / leaf;
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir &) = delete;
    temp_dir &operator=(const temp_dir &) = delete;

    std::string file(std::string_view name) const { return (path_ / name).string(); }
    const std::filesystem::path &path() const { return path_; }

private:
    std::filesystem::path path_;
};

inline void write_bytes(const std::string &path, std::string_view bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << path;
}

/// A safetensors file from raw parts: 8-byte LE `header_len` (default: the header's size), header, data.
inline std::string file_bytes(std::string_view header, std::string_view data, std::uint64_t header_len = ~0ull) {
    if (header_len == ~0ull) header_len = header.size();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header_len >> (8 * i)) & 0xFF);
    out.append(header);
    out.append(data);
    return out;
}

/// FNV-1a 64-bit, as tests/model/fixtures/make_fixtures.py computes it.
inline std::uint64_t fnv1a64(std::span<const std::byte> bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (auto b : bytes) {
        h ^= static_cast<std::uint8_t>(b);
        h *= 0x100000001b3ull;
    }
    return h;
}

} // namespace fp4moe::test
