#include "core/log.h"

#include "core/env.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace fp4moe {

void log_init() {
    static const bool done = [] {
        auto logger = spdlog::stderr_color_mt("fp4moe");
        logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
        spdlog::set_default_logger(logger);
        const auto level = spdlog::level::from_str(env().log_level);
        // from_str returns `off` for unknown names; only honour "off" when asked for by name.
        if (level != spdlog::level::off || env().log_level == "off") {
            spdlog::set_level(level);
        } else {
            spdlog::set_level(spdlog::level::info);
            spdlog::warn("FP4MOE_LOG_LEVEL={} is not a level (trace|debug|info|warn|error|off); using info",
                         env().log_level);
        }
        return true;
    }();
    (void)done;
}

} // namespace fp4moe
