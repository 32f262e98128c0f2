#include "deploy/serve_routes.hpp"

#include <chrono>
#include <optional>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deploy/version.hpp"

namespace kvactor {

namespace {

using json = nlohmann::ordered_json;

// A client of the ingress answered through the HTTP server (whose calls never block).
class http_client final : public openai::client {
public:
  explicit http_client(std::shared_ptr<http::responder> r) : r_(std::move(r)) {}
  void respond(int status, std::string body) override {
    r_->respond(status, "application/json", std::move(body));
  }
  void begin_stream() override {
    r_->begin_stream(200, "text/event-stream", {{"cache-control", "no-cache"}});
  }
  void send(std::string event) override { r_->write(std::move(event)); }
  void end_stream() override { r_->end_stream(); }

private:
  std::shared_ptr<http::responder> r_;
};

void answer_error(http::responder& r, int status, const char* type, const std::string& message) {
  const openai::api_error e{status, message, type, "", ""};
  r.respond(status, "application/json", e.body());
}

std::string path_of(const std::string& target) {
  return target.substr(0, target.find('?'));
}

bool authorized(const route_setup& s, const http::request& req) {
  if (s.api_key.empty()) return true;
  const auto got = http::header(req, "authorization");
  return got && *got == "Bearer " + s.api_key;
}

std::string models_body(const route_setup& s) {
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  json model = {{"id", s.model_name},
                {"object", "model"},
                {"created", created},
                {"owned_by", "kvactor"},
                {"root", s.model_name},
                {"parent", nullptr},
                {"max_model_len", s.max_model_len}};
  return json{{"object", "list"}, {"data", json::array({model})}}.dump();
}

// A generation call: queued for the ingress, which is woken when the queue was empty.
void to_ingress(const route_setup& s, openai::endpoint kind, http::request& req,
                std::shared_ptr<http::responder> r) {
  auto client = std::make_shared<http_client>(r);
  if (s.inbox->push(ingress_call{kind, std::move(req.body), client}))
    caf::anon_send(s.ingress, atom::wake_v);
  r->on_disconnect([inbox = s.inbox, ingress = s.ingress, client] {
    if (inbox->push(ingress_disconnect{client})) caf::anon_send(ingress, atom::wake_v);
  });
}

void answer_health(const route_setup& s, http::responder& r) {
  if (s.draining && s.draining->load())
    return answer_error(r, 503, "ServiceUnavailableError", "the server is shutting down");
  r.respond(200, "text/plain", "");
}

void answer_metrics(const route_setup& s, http::responder& r) {
  std::string text = s.metrics ? s.metrics->prometheus_text() : std::string{};
  if (s.board) text += ingress_metrics_text(s.board->read());
  r.respond(200, "text/plain; version=0.0.4", std::move(text));
}

// The POST endpoints the ingress answers.
std::optional<openai::endpoint> ingress_endpoint(const std::string& path) {
  if (path == "/v1/completions") return openai::endpoint::completions;
  if (path == "/v1/chat/completions") return openai::endpoint::chat_completions;
  if (path == "/tokenize") return openai::endpoint::tokenize;
  if (path == "/detokenize") return openai::endpoint::detokenize;
  return std::nullopt;
}

void route(const route_setup& s, http::request& req, std::shared_ptr<http::responder> r) {
  const auto path = path_of(req.target);
  const bool get = req.method == "GET", post = req.method == "POST";
  if (path == "/health" && get) return answer_health(s, *r);
  if (path == "/metrics" && get) return answer_metrics(s, *r);
  if (path == "/version" && get)
    return r->respond(200, "application/json", json{{"version", version_text()}}.dump());
  if (path.rfind("/v1/", 0) == 0 && !authorized(s, req))
    return answer_error(*r, 401, "AuthenticationError", "Unauthorized: a wrong or missing API key");
  if (path == "/v1/models" && get) return r->respond(200, "application/json", models_body(s));
  const auto kind = ingress_endpoint(path);
  if (kind && post) return to_ingress(s, *kind, req, std::move(r));
  const bool known =
      kind || path == "/health" || path == "/metrics" || path == "/version" || path == "/v1/models";
  if (known)
    return answer_error(*r, 405, "MethodNotAllowed", req.method + " is not allowed on " + path);
  answer_error(*r, 404, "NotFoundError", "no route " + path);
}

} // namespace

std::string ingress_metrics_text(const openai::ingress_counts& c) {
  std::string out;
  out += "# HELP kvactor:api_requests_total API requests answered, by HTTP status code.\n";
  out += "# TYPE kvactor:api_requests_total counter\n";
  for (const auto& [status, n] : c.by_status)
    out += fmt::format("kvactor:api_requests_total{{status=\"{}\"}} {}\n", status, n);
  out += "# HELP kvactor:api_requests_in_flight API requests taken and not yet answered.\n";
  out += "# TYPE kvactor:api_requests_in_flight gauge\n";
  out += fmt::format("kvactor:api_requests_in_flight {}\n", c.in_flight);
  out += "# HELP kvactor:api_streams_open Streamed answers (server-sent events) in progress.\n";
  out += "# TYPE kvactor:api_streams_open gauge\n";
  out += fmt::format("kvactor:api_streams_open {}\n", c.streams_open);
  return out;
}

http::handler make_routes(route_setup setup) {
  return [s = std::move(setup)](http::request req, std::shared_ptr<http::responder> r) {
    route(s, req, std::move(r));
  };
}

} // namespace kvactor
