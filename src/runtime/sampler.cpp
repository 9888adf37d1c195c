#include "runtime/sampler.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

namespace fp4moe {

namespace {

status bad(std::string msg) {
    return {status_code::invalid_argument, std::move(msg)};
}

// A double in [0, 1) from the top 53 bits: the same stream on every standard library (uniform_real_distribution
// is implementation-defined).
double uniform01(std::mt19937_64 &rng) {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

} // namespace

status validate(const sampling_params &p, std::int64_t vocab_size) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
        return bad(fmt::format("temperature must be >= 0, got {}", p.temperature));
    if (p.top_k < -1) return bad(fmt::format("top_k must be -1 or 0 (off) or positive, got {}", p.top_k));
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad(fmt::format("top_p must be in (0, 1], got {}", p.top_p));
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad(fmt::format("min_p must be in [0, 1], got {}", p.min_p));
    if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
        return bad(fmt::format("repetition_penalty must be > 0, got {}", p.repetition_penalty));
    if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
        return bad(fmt::format("presence_penalty must be in [-2, 2], got {}", p.presence_penalty));
    if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
        return bad(fmt::format("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty));
    if (p.seed < -1) return bad(fmt::format("seed must be -1 (random) or >= 0, got {}", p.seed));
    if (p.max_tokens < 1) return bad(fmt::format("max_tokens must be >= 1, got {}", p.max_tokens));
    for (std::size_t i = 0; i < p.stop.size(); ++i)
        if (p.stop[i].empty()) return bad(fmt::format("stop[{}] must not be an empty string", i));
    for (auto id : p.stop_token_ids)
        if (id < 0 || (vocab_size > 0 && id >= vocab_size))
            return bad(vocab_size > 0
                           ? fmt::format("stop_token_ids: {} is outside the vocabulary [0, {})", id, vocab_size)
                           : fmt::format("stop_token_ids: {} is negative", id));
    return status::success();
}

sampler::sampler(const sampling_params &p, std::span<const std::int32_t> prompt) : p_(p) {
    seed_ = p.seed >= 0 ? static_cast<std::uint64_t>(p.seed)
                        : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    rng_.seed(seed_);
    if (p_.repetition_penalty != 1.0f) seen_.insert(prompt.begin(), prompt.end());
}

void sampler::accept(std::int32_t token) {
    if (p_.repetition_penalty != 1.0f) seen_.insert(token);
    if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) ++counts_[token];
}

void sampler::apply_penalties(std::span<float> logits) const {
    const auto vocab = static_cast<std::int64_t>(logits.size());
    const float r = p_.repetition_penalty;
    for (auto t : seen_)
        if (t >= 0 && t < vocab) logits[t] = logits[t] > 0.0f ? logits[t] / r : logits[t] * r;
    for (const auto &[t, n] : counts_)
        if (t >= 0 && t < vocab) logits[t] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
}

void sampler::build(std::span<float> logits) {
    const auto vocab = static_cast<std::int32_t>(logits.size());
    FP4MOE_ASSERT(vocab > 0);
    apply_penalties(logits);
    cand_.clear();
    cand_p_.clear();
    if (p_.temperature == 0.0f) {
        cand_.push_back(static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        cand_p_.push_back(1.0f);
        return;
    }
    const float inv_t = 1.0f / p_.temperature;
    if (inv_t != 1.0f)
        for (auto &l : logits) l *= inv_t;

    cand_.resize(vocab);
    std::iota(cand_.begin(), cand_.end(), 0);
    if (p_.top_k > 0 && p_.top_k < vocab) {
        // Keep everything tied with the k-th largest logit (vLLM masks logits < the k-th value).
        auto kth = cand_.begin() + (p_.top_k - 1);
        std::nth_element(cand_.begin(), kth, cand_.end(),
                         [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
        const float threshold = logits[*kth];
        std::erase_if(cand_, [&](std::int32_t t) { return logits[t] < threshold; });
    }

    float max_l = -std::numeric_limits<float>::infinity();
    for (auto t : cand_) max_l = std::max(max_l, logits[t]);
    cand_p_.resize(cand_.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < cand_.size(); ++i) sum += cand_p_[i] = std::exp(logits[cand_[i]] - max_l);
    for (auto &q : cand_p_) q = static_cast<float>(q / sum);

    if (p_.top_p < 1.0f) {
        // Sort keys: descending probability (the bits of a non-negative float order as unsigned integers), then
        // ascending id. Sorting packed 64-bit keys is several times faster than sorting indices through a
        // comparator on a 150k vocabulary.
        auto &keys = keys_;
        keys.resize(cand_.size());
        for (std::size_t i = 0; i < cand_.size(); ++i)
            keys[i] = (static_cast<std::uint64_t>(~std::bit_cast<std::uint32_t>(cand_p_[i])) << 32) |
                      static_cast<std::uint32_t>(cand_[i]);
        auto prob = [](std::uint64_t k) { return std::bit_cast<float>(~static_cast<std::uint32_t>(k >> 32)); };
        // A token survives while the mass strictly above it is < top_p (vLLM: masked when the ascending cumulative
        // sum up to it is <= 1 - top_p); the most likely token always survives. The nucleus is usually small:
        // sort a head first and widen it only when the head's mass falls short.
        std::size_t keep = 0;
        for (std::size_t head = std::min<std::size_t>(keys.size(), 1024);; head = std::min(keys.size(), head * 8)) {
            std::nth_element(keys.begin(), keys.begin() + (head - 1), keys.end());
            std::sort(keys.begin(), keys.begin() + head);
            double above = 0.0;
            keep = 0;
            while (keep < head && (keep == 0 || above < p_.top_p)) above += prob(keys[keep++]);
            if (keep < head || above >= p_.top_p || head == keys.size()) break;
        }
        cand_.resize(keep);
        cand_p_.resize(keep);
        for (std::size_t i = 0; i < keep; ++i)
            cand_[i] = static_cast<std::int32_t>(keys[i] & 0xFFFFFFFFu), cand_p_[i] = prob(keys[i]);
    }
    if (p_.min_p > 0.0f) {
        const float threshold = p_.min_p * *std::max_element(cand_p_.begin(), cand_p_.end());
        std::size_t w = 0;
        for (std::size_t i = 0; i < cand_.size(); ++i)
            if (cand_p_[i] >= threshold) cand_[w] = cand_[i], cand_p_[w++] = cand_p_[i];
        cand_.resize(w);
        cand_p_.resize(w);
    }
    if (p_.top_p < 1.0f || p_.min_p > 0.0f) {
        double s = 0.0;
        for (auto q : cand_p_) s += q;
        for (auto &q : cand_p_) q = static_cast<float>(q / s);
    }
}

sampler::choice sampler::sample(std::span<float> logits) {
    build(logits);
    choice c;
    if (cand_.size() == 1) {
        c.token = cand_[0];
    } else {
        // Inverse CDF over the survivors; a draw past the float-rounded total falls on the last one.
        const double u = uniform01(rng_);
        double acc = 0.0;
        c.token = cand_.back();
        for (std::size_t i = 0; i < cand_.size(); ++i) {
            acc += cand_p_[i];
            if (u < acc) {
                c.token = cand_[i];
                break;
            }
        }
    }
    if (p_.logprobs) {
        // logits now hold the penalized, temperature-scaled values (unscaled for greedy).
        const float max_l = *std::max_element(logits.begin(), logits.end());
        double sum = 0.0;
        for (auto l : logits) sum += std::exp(static_cast<double>(l - max_l));
        c.logprob = static_cast<float>(logits[c.token] - max_l - std::log(sum));
    }
    accept(c.token);
    return c;
}

std::vector<float> sampler::probabilities(std::span<const float> logits) {
    std::vector<float> work(logits.begin(), logits.end());
    build(work);
    std::vector<float> out(logits.size(), 0.0f);
    for (std::size_t i = 0; i < cand_.size(); ++i) out[cand_[i]] = cand_p_[i];
    return out;
}

} // namespace fp4moe
