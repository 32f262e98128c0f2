// --log-format json: one JSON object per log line, for log collectors (Loki, Elasticsearch,
// Cloud Logging) that would otherwise parse spdlog's text.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

namespace kvactor {

/// {"time": "2026-12-04T05:01:53.885Z", "level": "info", "logger": "kvactor", "message": "...",
///  "request_id": 42} — request_id when the message names one request as "request N" (the form
/// every kvactor log line about a request uses), absent otherwise.
std::string json_log_line(std::chrono::system_clock::time_point time, std::string_view level,
                          std::string_view logger, std::string_view message);

/// A spdlog formatter that writes json_log_line and a newline.
std::unique_ptr<spdlog::formatter> json_log_formatter();

} // namespace kvactor
