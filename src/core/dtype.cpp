#include "fp4moe/dtype.h"

#include <array>
#include <utility>

namespace fp4moe {
namespace {

struct dtype_info {
    dtype type;
    std::string_view name;
    std::size_t size;
};

constexpr std::array<dtype_info, 15> kInfo = {{
    {dtype::f64, "F64", 8},
    {dtype::f32, "F32", 4},
    {dtype::f16, "F16", 2},
    {dtype::bf16, "BF16", 2},
    {dtype::f8_e4m3, "F8_E4M3", 1},
    {dtype::f8_e5m2, "F8_E5M2", 1},
    {dtype::i64, "I64", 8},
    {dtype::i32, "I32", 4},
    {dtype::i16, "I16", 2},
    {dtype::i8, "I8", 1},
    {dtype::u64, "U64", 8},
    {dtype::u32, "U32", 4},
    {dtype::u16, "U16", 2},
    {dtype::u8, "U8", 1},
    {dtype::boolean, "BOOL", 1},
}};

const dtype_info &info(dtype t) {
    return kInfo[static_cast<std::size_t>(t)];
}

} // namespace

std::size_t dtype_size(dtype t) {
    return info(t).size;
}

std::string_view dtype_name(dtype t) {
    return info(t).name;
}

std::optional<dtype> dtype_from_name(std::string_view name) {
    for (const auto &i : kInfo)
        if (i.name == name) return i.type;
    return std::nullopt;
}

} // namespace fp4moe
