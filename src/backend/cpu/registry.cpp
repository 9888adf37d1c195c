#include "backend/cpu/registry.h"

#include "backend/cpu/runners.h"

#include <fmt/format.h>

#include <fstream>

namespace fp4moe::cpu {

runner_registry::runner_registry(int threads) {
    owned_.push_back(make_ref_runner());
    candidates_.push_back({owned_.back().get(), /*autotune=*/false});
    owned_.push_back(make_fast_runner(threads));
    candidates_.push_back({owned_.back().get(), /*autotune=*/true});
}

const moe_runner *runner_registry::find(std::string_view name) const {
    for (const auto &c : candidates_)
        if (c.runner->name() == name) return c.runner;
    return nullptr;
}

std::string runner_registry::names() const {
    std::string s;
    for (const auto &c : candidates_) s += fmt::format("{}{}", s.empty() ? "" : ", ", c.runner->name());
    return s;
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) break;
        const auto first = line.find_first_not_of(" \t", colon + 1);
        return first == std::string::npos ? "unknown" : line.substr(first);
    }
    return "unknown";
}

moe_tune_target cpu_tune_target(int threads) {
    moe_tune_target t;
    t.device = cpu_device(threads);
    t.device_name = fmt::format("cpu {} ({} threads)", cpu_model_name(), t.device.threads);
    t.driver = "none";
    return t;
}

} // namespace fp4moe::cpu
