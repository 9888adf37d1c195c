#include "fp4moe/status.h"

namespace fp4moe {

const char *status_code_name(status_code code) {
    switch (code) {
    case status_code::ok:
        return "ok";
    case status_code::invalid_argument:
        return "invalid_argument";
    case status_code::not_found:
        return "not_found";
    case status_code::io_error:
        return "io_error";
    case status_code::corrupt:
        return "corrupt";
    case status_code::unsupported:
        return "unsupported";
    case status_code::internal:
        return "internal";
    }
    return "unknown";
}

std::string status::to_string() const {
    if (ok()) return "ok";
    return std::string(status_code_name(code_)) + ": " + message_;
}

} // namespace fp4moe
