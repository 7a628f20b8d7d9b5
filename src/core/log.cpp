#include "core/log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace deepinfer {
namespace {
struct LogState {
  std::mutex mu;
  LogSink sink;
  LogLevel min_level = LogLevel::kInfo;
};
LogState& state() {
  static LogState s;
  return s;
}
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}
}  // namespace

void set_log_sink(LogSink sink, LogLevel min_level) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().sink = std::move(sink);
  state().min_level = min_level;
}

LogLevel log_min_level() { return state().min_level; }

void log_message(LogLevel level, const char* file, int line, const char* fmt, ...) {
  if (static_cast<int>(level) < static_cast<int>(state().min_level)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().sink) {
    state().sink(level, buf);
  } else {
    std::fprintf(stderr, "[%s] %s\n", level_name(level), buf);
  }
}

}  // namespace deepinfer
