// Stop conditions of one request: stop token ids and stop strings matched on the streamed text.
//
// Stop strings are matched on the detokenized output as it grows. Text that could still become the start of a stop
// string is held back, so a streaming client never sees part of one; the stop string itself and everything after it
// are dropped (OpenAI / vLLM default).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

/// Not thread-safe; one per request.
class stop_checker {
public:
    /// `stop_strings` must be non-empty strings (validate() checks). `stop_ids`: tokens that end generation.
    stop_checker(std::vector<std::string> stop_strings, std::vector<std::int32_t> stop_ids);

    bool is_stop_token(std::int32_t id) const;

    /// Adds newly decoded text (whole UTF-8 characters); returns the part that is safe to emit now. Once a stop
    /// string is found, `stopped()` is true, the text before it is returned and later calls return "".
    std::string push(std::string_view text);
    /// End of the stream without a stop string: returns whatever is held back.
    std::string flush();

    bool stopped() const { return stopped_; }
    /// The stop string that matched (empty before).
    const std::string &matched() const { return matched_; }
    /// Bytes currently held back.
    std::size_t held_bytes() const { return held_.size(); }

private:
    std::vector<std::string> strings_;
    std::vector<std::int32_t> ids_;
    std::string held_;
    std::string matched_;
    bool stopped_ = false;
};

} // namespace fp4moe
