// OpenAI's batch file format (pure): each input line is a JSON object {"custom_id", "method":
// "POST", "url": "/v1/completions" or "/v1/chat/completions", "body": {...}}; each output line
// answers one input line by its custom_id: {"id", "custom_id", "response": {"status_code",
// "request_id", "body"}, "error"}. An API error (a 400 for a bad body, a failed request) is a
// response with its status and error object; a line that cannot be a request at all (not JSON,
// no custom_id, another url, a stream) has "response": null and an "error" saying why.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "actors/ingress/openai_request.hpp"
#include "actors/ingress/serving_request.hpp"

namespace kvactor::openai {

struct batch_request {
  std::string custom_id;
  endpoint kind = endpoint::completions;
  std::string body; // the request body, as the endpoint reads it
};

/// One input line: the request, or why it is none (custom_id kept when it could be read).
struct batch_line {
  std::optional<batch_request> request;
  std::string custom_id;
  std::string error; // "line N: ..."
};

/// `line_no` (1-based) names the line in errors. A blank line is an error too: the caller skips
/// blank lines before.
batch_line parse_batch_line(std::string_view text, size_t line_no);

/// The output line (no newline) of a request answered with `status` and `body` (the response,
/// or OpenAI's error object); `id` names the output line, `request_id` the request.
std::string batch_response_line(const std::string& id, const std::string& custom_id, int status,
                                const std::string& request_id, const std::string& body);

/// The output line of an input line that is no request.
std::string batch_error_line(const std::string& id, const std::string& custom_id,
                             const std::string& message);

} // namespace kvactor::openai
