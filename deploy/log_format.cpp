#include "deploy/log_format.hpp"

#include <ctime>
#include <mutex>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvactor {

namespace {

// UTC with milliseconds, ISO 8601.
std::string iso_time(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03d}Z", buf, ms);
}

class json_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string line =
        json_log_line(msg.time, std::string_view(level.data(), level.size()),
                      std::string_view(msg.logger_name.data(), msg.logger_name.size()),
                      std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

} // namespace

std::string json_log_line(std::chrono::system_clock::time_point time, std::string_view level,
                          std::string_view logger, std::string_view message) {
  nlohmann::ordered_json j;
  j["time"] = iso_time(time);
  j["level"] = std::string(level);
  j["logger"] = std::string(logger);
  j["message"] = std::string(message);
  static const std::regex request("\\brequest (\\d{1,19})\\b");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(message.begin(), message.end(), m, request))
    j["request_id"] = std::stoull(m[1].str());
  // Invalid UTF-8 in a message is replaced, never a throw from the logger.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::unique_ptr<spdlog::formatter> json_log_formatter() {
  return std::make_unique<json_formatter>();
}

class json_lines_stream::buffer final : public std::streambuf {
public:
  explicit buffer(std::ostream& target) : target_(target) {}
  ~buffer() override { emit(); }

protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    std::lock_guard lock{mutex_};
    put(traits_type::to_char_type(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard lock{mutex_};
    for (std::streamsize i = 0; i < n; ++i)
      put(s[i]);
    return n;
  }
  int sync() override {
    target_.flush();
    return 0;
  }

private:
  void put(char c) {
    if (c == '\n' || c == '\r')
      emit();
    else
      line_.push_back(c);
  }
  void emit() {
    if (line_.find_first_not_of(' ') == std::string::npos) {
      line_.clear();
      return;
    }
    const auto level = line_.find(": error:") != std::string::npos     ? "error"
                       : line_.find(": warning:") != std::string::npos ? "warning"
                                                                       : "info";
    target_ << json_log_line(std::chrono::system_clock::now(), level, "kvactor", line_) << '\n';
    line_.clear();
  }

  std::ostream& target_;
  std::mutex mutex_;
  std::string line_;
};

json_lines_stream::json_lines_stream(std::ostream& target)
    : std::ostream(nullptr), buf_(std::make_unique<buffer>(target)) {
  rdbuf(buf_.get());
}

json_lines_stream::~json_lines_stream() {
  rdbuf(nullptr);
}

} // namespace kvactor
