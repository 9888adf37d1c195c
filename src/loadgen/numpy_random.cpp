#include "loadgen/numpy_random.h"

#include "core/error.h"

#include <cmath>

namespace fp4moe::loadgen {

std::vector<std::int64_t> numpy_legacy_rng::randint(std::int64_t low, std::int64_t high, std::size_t n) {
    FP4MOE_ASSERT(low < high);
    const auto rng = static_cast<std::uint64_t>(high - low - 1); // numpy works with the inclusive span
    FP4MOE_ASSERT(rng <= 0xFFFFFFFFull);
    std::vector<std::int64_t> out(n, low);
    if (rng == 0) return out; // numpy returns `low` without drawing
    if (rng == 0xFFFFFFFFull) {
        for (auto &v : out) v = low + static_cast<std::int64_t>(next_uint32());
        return out;
    }
    std::uint32_t mask = static_cast<std::uint32_t>(rng);
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    for (auto &v : out) {
        std::uint32_t x;
        while ((x = next_uint32() & mask) > rng) {
        }
        v = low + static_cast<std::int64_t>(x);
    }
    return out;
}

double numpy_legacy_rng::next_double() {
    const std::uint32_t a = next_uint32() >> 5, b = next_uint32() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

double numpy_legacy_rng::exponential(double scale) {
    return scale * -std::log(1.0 - next_double());
}

} // namespace fp4moe::loadgen
