#include "runtime/stop.h"

#include <algorithm>

namespace fp4moe {

stop_checker::stop_checker(std::vector<std::string> stop_strings, std::vector<std::int32_t> stop_ids)
    : strings_(std::move(stop_strings)), ids_(std::move(stop_ids)) {
    std::erase_if(strings_, [](const std::string &s) { return s.empty(); });
}

bool stop_checker::is_stop_token(std::int32_t id) const {
    return std::find(ids_.begin(), ids_.end(), id) != ids_.end();
}

std::string stop_checker::push(std::string_view text) {
    if (stopped_) return {};
    if (strings_.empty()) return std::string(text);
    held_ += text;
    // Emitted text never ends with the start of a stop string, so a match lies wholly inside held_. The earliest
    // match wins (the longest at that position).
    std::size_t first = std::string::npos;
    for (const auto &s : strings_) {
        const auto at = held_.find(s);
        if (at != std::string::npos && (at < first || (at == first && s.size() > matched_.size())))
            first = at, matched_ = s;
    }
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
    std::size_t hold = 0;
    for (const auto &s : strings_)
        for (std::size_t n = std::min(s.size() - 1, held_.size()); n > hold; --n)
            if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
                hold = n;
                break;
            }
    std::string out = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
    return out;
}

std::string stop_checker::flush() {
    std::string out;
    out.swap(held_);
    return stopped_ ? std::string{} : out;
}

} // namespace fp4moe
