#include "net/http/wire.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace kvactor::http {
namespace {

bool splits_head(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

bool equals_lower(std::string_view name, std::string_view lower) {
  return name.size() == lower.size()
         && std::equal(name.begin(), name.end(), lower.begin(), [](char a, char b) {
              return std::tolower(static_cast<unsigned char>(a)) == b;
            });
}

// The headers this writer owns: a handler's copy would contradict the framing.
bool is_framing(std::string_view name) {
  for (std::string_view owned : {"content-length", "transfer-encoding", "connection", "server"})
    if (equals_lower(name, owned)) return true;
  return false;
}

void append_header(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

} // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 304: return "Not Modified";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 413: return "Content Too Large";
  case 415: return "Unsupported Media Type";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Unknown";
  }
}

std::string response_head(int status, std::string_view content_type,
                          const header_list& extra_headers, std::optional<size_t> content_length,
                          bool close) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
  append_header(out, "Server", "kvactor");
  if (!content_type.empty() && !splits_head(content_type))
    append_header(out, "Content-Type", content_type);
  if (content_length)
    append_header(out, "Content-Length", std::to_string(*content_length));
  else
    append_header(out, "Transfer-Encoding", "chunked");
  if (close) append_header(out, "Connection", "close");
  for (const auto& [name, value] : extra_headers)
    if (!name.empty() && !splits_head(name) && !splits_head(value) && !is_framing(name))
      append_header(out, name, value);
  out.append("\r\n");
  return out;
}

std::string chunk_of(std::string_view data) {
  std::string out = fmt::format("{:x}\r\n", data.size());
  out.reserve(out.size() + data.size() + 2);
  out.append(data).append("\r\n");
  return out;
}

// JSON in the error-object shape HTTP APIs (OpenAI's among them) answer with, so that a client
// reads a refusal of the server as it reads the application's own errors.
std::string refusal(int status) {
  std::string body = fmt::format(
      "{{\"error\":{{\"message\":\"{} {}\",\"type\":\"{}\",\"param\":null,\"code\":{}}}}}", status,
      reason_phrase(status), status >= 500 ? "ServiceUnavailableError" : "BadRequestError", status);
  return response_head(status, "application/json", {}, body.size(), true) + body;
}

} // namespace kvactor::http
