// fp4moe public API: status codes and result<T>.
//
// Every public entry point returns a `status` (or a `result<T>`) and never throws. Internals may throw
// `fp4moe::error` (see src/core/error.h); it is caught once at the API boundary and turned into a status.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace fp4moe {

/// What went wrong, coarsely. The message carries the detail (file, tensor, field, parameter).
enum class status_code {
    ok = 0,
    invalid_argument, ///< the caller passed something malformed (bad shape, NaN input, bad flag)
    not_found,        ///< a file, tensor or key that should exist does not
    io_error,         ///< the OS refused a read, write, open or mmap
    corrupt,          ///< a file's contents are inconsistent (bad header, offsets out of range)
    unsupported,      ///< valid input that this build or device cannot handle (yet)
    internal,         ///< a bug: an invariant broke
};

/// Short lower-case name of a code ("invalid_argument"); never null.
const char *status_code_name(status_code code);

/// Outcome of an operation: `ok()` or a code plus a human-readable message naming the problem.
/// Cheap to copy when ok (empty message). Thread-compatible (no shared state).
class status {
public:
    status() = default;
    status(status_code code, std::string message) : code_(code), message_(std::move(message)) {}

    static status success() { return {}; }

    bool ok() const { return code_ == status_code::ok; }
    status_code code() const { return code_; }
    /// The message alone; empty when ok.
    const std::string &message() const { return message_; }
    /// "code: message", or "ok".
    std::string to_string() const;

private:
    status_code code_ = status_code::ok;
    std::string message_;
};

/// Either a value or a non-ok status. Access the value only after checking `ok()`.
template <typename T>
class result {
public:
    result(T value) : v_(std::move(value)) {}
    result(status st) : v_(std::move(st)) {}

    bool ok() const { return std::holds_alternative<T>(v_); }
    /// The status: success when a value is held.
    status get_status() const { return ok() ? status::success() : std::get<status>(v_); }
    T &value() & { return std::get<T>(v_); }
    const T &value() const & { return std::get<T>(v_); }
    T &&value() && { return std::get<T>(std::move(v_)); }

private:
    std::variant<T, status> v_;
};

} // namespace fp4moe
