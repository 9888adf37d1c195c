// Helpers of the routing tests (test_moe_route.cpp) and the routing timing test (test_moe_route_timings.cpp):
// seeds, routing rules, inputs, and a plan's buffers on the host and on the device.
#pragma once

#include "cuda_test_util.h"
#include "kernels/moe_route.h"

#include "fp4moe/moe.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fp4moe::test::route {

namespace fc = fp4moe::cuda;

inline unsigned fresh_seed() {
    return std::random_device{}();
}

inline std::string seed_trace(unsigned seed) {
    return "seed " + std::to_string(seed) + " (std::mt19937)";
}

// ---- rules -----------------------------------------------------------------------------------------------

struct named_rule {
    std::string name;
    fp4moe::moe_desc d;
};

inline fp4moe::moe_desc make_desc(int experts, int top_k, int shared, fp4moe::moe_routing r) {
    fp4moe::moe_desc d;
    d.hidden = 16;
    d.intermediate = 16;
    d.experts = experts;
    d.top_k = top_k;
    d.shared = shared;
    d.routing = r;
    return d;
}

inline fp4moe::moe_routing softmax_routing(bool renormalize) {
    fp4moe::moe_routing r;
    r.scoring = fp4moe::moe_scoring::softmax;
    r.renormalize = renormalize;
    return r;
}

inline fp4moe::moe_routing sigmoid_routing(bool bias, int n_group, int topk_group, float scale,
                                           bool renormalize = true) {
    fp4moe::moe_routing r;
    r.scoring = fp4moe::moe_scoring::sigmoid;
    r.renormalize = renormalize;
    r.correction_bias = bias;
    r.n_group = n_group;
    r.topk_group = topk_group;
    r.routed_scaling_factor = scale;
    return r;
}

inline fc::route_rule to_rule(const fp4moe::moe_desc &d) {
    fc::route_rule r;
    r.experts = static_cast<int>(d.experts);
    r.top_k = static_cast<int>(d.top_k);
    r.shared = static_cast<int>(d.shared);
    r.softmax = d.routing.scoring == fp4moe::moe_scoring::softmax;
    r.renormalize = d.routing.renormalize;
    r.correction_bias = d.routing.correction_bias;
    r.n_group = d.routing.n_group;
    r.topk_group = d.routing.topk_group;
    r.routed_scaling_factor = d.routing.routed_scaling_factor;
    return r;
}

enum class input_kind { random, hot, ties };

inline const char *name_of(input_kind k) {
    return k == input_kind::random ? "random" : k == input_kind::hot ? "hot" : "ties";
}

inline std::vector<float> make_bias(input_kind kind, int experts, std::mt19937 &rng) {
    std::vector<float> b(experts);
    if (kind == input_kind::ties) {
        std::uniform_int_distribution<int> q(-1, 1);
        for (auto &v : b) v = static_cast<float>(q(rng)) * 0.125f;
        return b;
    }
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (auto &v : b) v = normal(rng);
    if (kind == input_kind::hot) b[std::uniform_int_distribution<int>(0, experts - 1)(rng)] += 1.0f;
    return b;
}

// A plan on the host: the CPU's arrays, or what the GPU wrote.
struct host_plan {
    std::vector<std::int32_t> counts, offsets, perm, inv_perm, masked_pairs;
};

// Device buffers of one plan, poisoned on construction.
struct device_plan {
    int num_experts, pairs, max_tokens;
    device_buffer<std::int32_t> counts, offsets, perm, inv_perm, masked;
    device_plan(int num_experts_, int pairs_, int max_tokens_)
        : num_experts(num_experts_), pairs(pairs_), max_tokens(max_tokens_), counts(num_experts_),
          offsets(num_experts_ + 1), perm(pairs_), inv_perm(pairs_),
          masked(static_cast<std::size_t>(num_experts_) * max_tokens_) {
        poison();
    }
    void poison(cudaStream_t s = nullptr) {
        counts.poison(s), offsets.poison(s), perm.poison(s), inv_perm.poison(s), masked.poison(s);
    }
    fc::plan_buffers buffers(bool with_masked = true) {
        return {counts.ptr, offsets.ptr, perm.ptr, inv_perm.ptr, with_masked ? masked.ptr : nullptr};
    }
    host_plan download() const {
        return {counts.download(), offsets.download(), perm.download(), inv_perm.download(), masked.download()};
    }
};

} // namespace fp4moe::test::route
