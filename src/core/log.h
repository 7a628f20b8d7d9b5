// Logging: printf-style, format-checked, one replaceable sink (embedders install their own).
// The sink is process-wide by nature (stderr is); it is set once at start-up, never per call.
#pragma once

#include <functional>
#include <string_view>

namespace deepinfer {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using LogSink = std::function<void(LogLevel, std::string_view)>;

/// Installs `sink` (nullptr restores stderr) and the minimum level printed.
void set_log_sink(LogSink sink, LogLevel min_level = LogLevel::kInfo);
LogLevel log_min_level();
void log_message(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace deepinfer

#define DI_LOG(level, ...) \
  ::deepinfer::log_message(::deepinfer::LogLevel::k##level, __FILE__, __LINE__, __VA_ARGS__)
