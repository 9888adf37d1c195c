// The random numbers sglang.bench_serving draws, reproduced bit for bit: numpy's legacy global generator
// (`np.random.seed(s)`, i.e. `RandomState`, MT19937) with the two calls the benchmark makes, `randint` (request
// lengths, token offsets) and `exponential` (Poisson inter-arrival gaps). The same seed gives the same lengths and
// arrival times as `python3 -m sglang.bench_serving --seed s`.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace fp4moe::loadgen {

/// numpy `RandomState(seed)`. Not thread-safe; copy it to fork a stream (copies continue identically).
class numpy_legacy_rng {
public:
    /// `np.random.seed(seed)`: MT19937 initialised by Knuth's recurrence (numpy's `mt19937_seed`), which is exactly
    /// what `std::mt19937(seed)` does.
    explicit numpy_legacy_rng(std::uint32_t seed) : mt_(seed) {}

    /// `np.random.randint(low, high, size=n)`: n integers uniform on [low, high). numpy's legacy path draws 32-bit
    /// words and rejects those above the range after masking to the smallest all-ones mask (no Lemire); a range of
    /// one value draws nothing. Requires low < high and high - low <= 2^32 (what the benchmark needs).
    std::vector<std::int64_t> randint(std::int64_t low, std::int64_t high, std::size_t n);

    /// `np.random.exponential(scale)`: scale * -log(1 - u), u a 53-bit double from two 32-bit words.
    double exponential(double scale);

    /// The next raw 32-bit word (numpy's `next_uint32`).
    std::uint32_t next_uint32() { return static_cast<std::uint32_t>(mt_()); }
    /// numpy's legacy double on [0, 1): (a >> 5) * 2^26 + (b >> 6), over 2^53.
    double next_double();

private:
    std::mt19937 mt_;
};

} // namespace fp4moe::loadgen
