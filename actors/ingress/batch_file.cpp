#include "actors/ingress/batch_file.hpp"

#include <fmt/format.h>

#include "actors/ingress/json_fields.hpp"

namespace kvactor::openai {

namespace {

batch_line refused(size_t line_no, std::string custom_id, const std::string& why) {
  batch_line out;
  out.custom_id = std::move(custom_id);
  out.error = fmt::format("line {}: {}", line_no, why);
  return out;
}

std::optional<endpoint> endpoint_of(const std::string& url) {
  if (url == "/v1/completions") return endpoint::completions;
  if (url == "/v1/chat/completions") return endpoint::chat_completions;
  return std::nullopt;
}

// A batch answers whole responses: a body that asks for a stream is refused.
bool asks_for_stream(const json& body) {
  const json* s = field(body, "stream");
  return s != nullptr && s->is_boolean() && s->get<bool>();
}

} // namespace

batch_line parse_batch_line(std::string_view text, size_t line_no) {
  auto root = parse_object(text);
  if (!root) return refused(line_no, "", root.err().message);
  std::string custom_id;
  const json* id = field(*root, "custom_id");
  if (id == nullptr || !id->is_string() || id->get<std::string>().empty())
    return refused(line_no, "", "'custom_id' (a non-empty string) is required");
  custom_id = id->get<std::string>();
  std::string method = "POST", url;
  if (auto e = read_string(*root, "method", method)) return refused(line_no, custom_id, e->message);
  if (method != "POST")
    return refused(line_no, custom_id, fmt::format("'method': {} is not POST", method));
  if (auto e = read_string(*root, "url", url)) return refused(line_no, custom_id, e->message);
  const auto kind = endpoint_of(url);
  if (!kind)
    return refused(line_no, custom_id,
                   fmt::format("'url': '{}' is not /v1/completions or /v1/chat/completions", url));
  const json* body = field(*root, "body");
  if (body == nullptr || !body->is_object())
    return refused(line_no, custom_id, "'body' (the request, an object) is required");
  if (asks_for_stream(*body))
    return refused(line_no, custom_id, "'body.stream': a batch answers whole responses");
  batch_line out;
  out.custom_id = custom_id;
  out.request = batch_request{custom_id, *kind, body->dump()};
  return out;
}

std::string batch_response_line(const std::string& id, const std::string& custom_id, int status,
                                const std::string& request_id, const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) parsed = body; // never expected: the ingress writes JSON
  const json response = {
      {"status_code", status}, {"request_id", request_id}, {"body", std::move(parsed)}};
  return json{{"id", id}, {"custom_id", custom_id}, {"response", response}, {"error", nullptr}}
      .dump();
}

std::string batch_error_line(const std::string& id, const std::string& custom_id,
                             const std::string& message) {
  const json error = {{"code", "invalid_request"}, {"message", message}};
  return json{{"id", id},
              {"custom_id", custom_id.empty() ? json() : json(custom_id)},
              {"response", nullptr},
              {"error", error}}
      .dump();
}

} // namespace kvactor::openai
