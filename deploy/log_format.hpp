// --log-format json: one JSON object per log line, for log collectors (Loki, Elasticsearch,
// Cloud Logging) that would otherwise parse spdlog's text.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
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

/// What a command writes to stderr itself (its "kvactor run: error: ..." lines, warnings, the
/// progress line), one json_log_line per line, so that with --log-format json every stderr line is
/// JSON: level "error" for a line with ": error:", "warning" for ": warning:", else "info". A
/// carriage return ends a line too (the progress line). Safe to write from several threads.
class json_lines_stream : public std::ostream {
public:
  explicit json_lines_stream(std::ostream& target);
  ~json_lines_stream() override;

private:
  class buffer;
  std::unique_ptr<buffer> buf_;
};

} // namespace kvactor
