// Internal errors (tier 2) and assertions (tier 3); see docs/architecture.md "Errors".
#pragma once

#include "fp4moe/status.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fp4moe {

/// Thrown by loader, config and server internals with full context (file, tensor, field); caught once at
/// the public boundary by `to_status`. Never crosses a public API.
class error : public std::runtime_error {
public:
    error(status_code code, const std::string &message) : std::runtime_error(message), code_(code) {}
    status_code code() const { return code_; }
    status to_status() const { return {code_, what()}; }

private:
    status_code code_;
};

/// Throws `fp4moe::error` with a formatted message.
template <typename... Args>
[[noreturn]] void fail(status_code code, fmt::format_string<Args...> f, Args &&...args) {
    throw error(code, fmt::format(f, std::forward<Args>(args)...));
}

/// Runs `fn` and converts an escaping `fp4moe::error` (or any std::exception) into a status.
template <typename Fn>
status catch_status(Fn &&fn) {
    try {
        fn();
        return status::success();
    } catch (const error &e) {
        return e.to_status();
    } catch (const std::exception &e) {
        return {status_code::internal, e.what()};
    }
}

[[noreturn]] inline void assert_fail(const char *expr, const char *file, int line) {
    std::fprintf(stderr, "fp4moe: assertion failed: %s at %s:%d\n", expr, file, line);
    std::abort();
}

} // namespace fp4moe

/// Programmer errors: abort with file, line and expression (active in every build type).
#define FP4MOE_ASSERT(x)                                                                                               \
    do {                                                                                                               \
        if (!(x)) ::fp4moe::assert_fail(#x, __FILE__, __LINE__);                                                       \
    } while (0)
