// A blocking HTTP client on a raw loopback socket, for the server's tests: it sends any bytes
// (garbage included) and reads responses piece by piece. Every read is bounded by a receive
// timeout, so a server that never answers fails the test instead of hanging it.
#pragma once

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/http/server.hpp"

namespace kvactor::http::test {

struct response {
  int status = 0;      // 0: no (complete) response came
  header_list headers; // names lower-cased
  std::string body;

  std::string header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers)
      if (name == lower_name) return value;
    return {};
  }
};

class test_client {
public:
  explicit test_client(uint16_t port, int timeout_s = 10) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    connect_errno_ = connected_ ? 0 : errno;
  }
  ~test_client() { close(); }
  test_client(const test_client&) = delete;
  test_client& operator=(const test_client&) = delete;

  bool connected() const { return connected_; }
  int connect_errno() const { return connect_errno_; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  /// The bytes up to and including `delim`; nullopt if the connection ended or timed out first.
  std::optional<std::string> read_until(std::string_view delim) {
    size_t at;
    while ((at = buffer_.find(delim)) == std::string::npos)
      if (!receive()) return std::nullopt;
    return take(at + delim.size());
  }

  std::optional<std::string> read_exactly(size_t n) {
    while (buffer_.size() < n)
      if (!receive()) return std::nullopt;
    return take(n);
  }

  /// The status line and headers of the next response (body still unread).
  response read_head() {
    response r;
    auto head = read_until("\r\n\r\n");
    if (!head || head->rfind("HTTP/1.1 ", 0) != 0) return r;
    r.status = std::stoi(head->substr(9, 3));
    size_t at = head->find("\r\n") + 2;
    for (size_t end; (end = head->find("\r\n", at)) != at; at = end + 2) {
      const std::string line = head->substr(at, end - at);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers.emplace_back(name, line.substr(line.find_first_not_of(' ', colon + 1)));
    }
    return r;
  }

  /// The next chunk of a chunked body; "" after the last chunk, nullopt if none came.
  std::optional<std::string> read_chunk() {
    auto size_line = read_until("\r\n");
    if (!size_line) return std::nullopt;
    const size_t size = std::stoul(*size_line, nullptr, 16);
    if (size == 0) return read_until("\r\n") ? std::optional<std::string>("") : std::nullopt;
    auto data = read_exactly(size);
    if (!data || !read_exactly(2)) return std::nullopt;
    return data;
  }

  /// A whole response: its body read by Content-Length or chunk by chunk.
  response read_response() {
    response r = read_head();
    if (r.status == 0) return r;
    if (r.header("transfer-encoding") == "chunked") {
      std::optional<std::string> chunk;
      while ((chunk = read_chunk()) && !chunk->empty())
        r.body += *chunk;
      if (!chunk) r.status = 0;
      return r;
    }
    auto body = read_exactly(std::stoul("0" + r.header("content-length")));
    if (!body) r.status = 0;
    r.body = body.value_or("");
    return r;
  }

  /// True when the server closed the connection (end of stream or reset) before the timeout;
  /// bytes still unread are skipped.
  bool sees_close() {
    buffer_.clear();
    for (;;) {
      char bytes[4096];
      const ssize_t n = ::recv(fd_, bytes, sizeof bytes, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  bool receive() {
    char bytes[16384];
    const ssize_t n = ::recv(fd_, bytes, sizeof bytes, 0);
    if (n <= 0) return false;
    buffer_.append(bytes, static_cast<size_t>(n));
    return true;
  }

  std::string take(size_t n) {
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }

  int fd_ = -1;
  bool connected_ = false;
  int connect_errno_ = 0;
  std::string buffer_;
};

/// A request with the given method, target and body (Content-Length when it has one).
inline std::string request_bytes(std::string_view method, std::string_view target,
                                 std::string_view body = {}, std::string_view extra_headers = {}) {
  std::string out = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n";
  out += extra_headers;
  if (!body.empty()) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}

} // namespace kvactor::http::test
