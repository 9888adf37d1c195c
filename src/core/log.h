// Logging: spdlog, one logger for the process, level from FP4MOE_LOG_LEVEL (see docs/env.md).
#pragma once

#include <spdlog/spdlog.h>

namespace fp4moe {

/// Configures the default logger (stderr, level from the environment). Idempotent; call once from main.
void log_init();

} // namespace fp4moe

#define FP4MOE_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define FP4MOE_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define FP4MOE_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define FP4MOE_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
