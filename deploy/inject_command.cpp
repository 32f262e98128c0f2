#include "deploy/inject_command.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "deploy/transport/guarded_transport.hpp"
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "actors/interfaces.hpp"
#include "deploy/cli.hpp"
#include "deploy/trace_command.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"
#include "messages/register.hpp"
#include "messages/trace.hpp"

namespace kvactor {

namespace {

using json = nlohmann::ordered_json;

error bad_file(const std::string& path, const std::string& what) {
  return make_error(errc::parse_error, fmt::format("{}: {}", path, what));
}

expected<message_file> from_json(const std::string& path, const json& doc) {
  json envelope;
  message_file out;
  if (doc.is_array()) {
    if (doc.size() != 3)
      return bad_file(path, fmt::format("expected [type, schema_version, payload], found an array "
                                        "of {}",
                                        doc.size()));
    envelope = doc;
  } else if (doc.is_object()) {
    auto type = doc.find("type");
    if (type == doc.end() || !type->is_string())
      return bad_file(path, "field \"type\": missing or not a string");
    auto payload = doc.find("payload");
    if (payload == doc.end() || !payload->is_array())
      return bad_file(path, "field \"payload\": missing or not an array (fields in inspect() "
                            "order, as `kvactor trace show --json` prints them)");
    json version = schema_version;
    if (auto v = doc.find("version"); v != doc.end()) version = *v;
    envelope = json::array({*type, version, *payload});
    if (auto r = doc.find("receiver"); r != doc.end() && r->is_string())
      out.receiver = r->get<std::string>();
  } else {
    return bad_file(path, "expected a JSON array or object");
  }
  auto bytes = json::to_msgpack(envelope);
  out.envelope.assign(bytes.begin(), bytes.end());
  return out;
}

// "HOST:PORT" (the last colon splits, so "[::1]:7000" works too).
expected<std::pair<std::string, uint16_t>> parse_address(const std::string& to) {
  auto colon = to.rfind(':');
  auto bad =
      make_error(errc::invalid_argument, fmt::format("--to: expected HOST:PORT, found '{}'", to));
  if (colon == std::string::npos || colon == 0 || colon + 1 == to.size()) return bad;
  auto host = to.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  auto digits = std::string_view{to}.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
    return bad;
  return std::pair{host, static_cast<uint16_t>(port)};
}

// Without --actor and a recorded receiver, the message type names its natural target.
std::string default_actor(const std::string& type) {
  return type == "kvactor::step_plan" ? "rank[0]" : "driver";
}

} // namespace

expected<message_file> parse_message_file(const std::string& path, const std::string& bytes) {
  auto first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return bad_file(path, "the file is empty");
  if (bytes[first] == '[' || bytes[first] == '{') {
    json doc;
    try {
      doc = json::parse(bytes);
    } catch (const json::exception& e) { // parse_error, and out_of_range for a number overflow
      return bad_file(path, fmt::format("not valid JSON: {}", e.what()));
    }
    return from_json(path, doc);
  }
  message_file out;
  out.envelope.assign(bytes.begin(), bytes.end());
  if (auto type = envelope_type(out.envelope.data(), out.envelope.size()); !type)
    return bad_file(path, type.err().message);
  return out;
}

int run_inject(const inject_flags& flags, std::ostream& out, std::ostream& err) {
  auto fail = [&](int code, const std::string& message) {
    fmt::print(err, "kvactor inject: error: {}\n", message);
    if (flags.json) out << json{{"error", message}}.dump() << '\n';
    return code;
  };
  auto address = parse_address(flags.to);
  if (!address) return fail(exit_bad_input, address.err().message);
  if (!(flags.timeout_s > 0))
    return fail(exit_bad_input, fmt::format("--timeout: {} is not positive", flags.timeout_s));
  std::ifstream in(flags.message, std::ios::binary);
  if (!in) return fail(exit_bad_input, fmt::format("{}: cannot open the file", flags.message));
  std::stringstream buf;
  buf << in.rdbuf();
  auto msg = parse_message_file(flags.message, buf.str());
  if (!msg) return fail(exit_bad_input, msg.err().message);
  auto type = envelope_type(msg->envelope.data(), msg->envelope.size());
  if (!type) return fail(exit_bad_input, fmt::format("{}: {}", flags.message, type.err().message));
  inject_request req;
  req.target = !flags.actor.empty()     ? flags.actor
               : !msg->receiver.empty() ? msg->receiver
                                        : default_actor(*type);
  req.envelope = std::move(msg->envelope);

  auto limits = transport_limits_from(flags.max_message_bytes);
  if (!limits) return fail(exit_bad_input, limits.err().message);
  auto auth = transport_auth_for(false);
  if (!auth) return fail(exit_bad_input, auth.err().message);

  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  guarded_transport net{sys, *limits, std::move(*auth)};
  auto gateway = net.remote_actor<injector_actor>(address->first, address->second);
  if (!gateway)
    return fail(exit_failure, fmt::format("--to {}: no kvactor process listens for injection "
                                          "there ({}); start one with --inject-port",
                                          flags.to, gateway.err().message));
  caf::scoped_actor self{sys};
  std::optional<inject_reply> reply;
  std::string failure;
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(flags.timeout_s));
  // A request whose connection drops is not failed by CAF; the monitor says so at once.
  self->monitor(*gateway);
  self->send(*gateway, req);
  self->receive([&](inject_reply& r) { reply = std::move(r); },
                [&](caf::error& e) { failure = from_caf_error(e).message; },
                [&](caf::down_msg&) {
                  failure = fmt::format("the run closed the connection (the message is {} bytes: "
                                        "larger than its --max-message-bytes?)",
                                        req.envelope.size());
                },
                caf::after(timeout) >>
                    [&] { failure = fmt::format("no reply within {} s", flags.timeout_s); });
  if (!reply) return fail(exit_failure, fmt::format("{} into {}: {}", *type, req.target, failure));
  std::string detail;
  if (!reply->envelope.empty()) {
    trace_record r;
    r.type = reply->type;
    r.payload = reply->envelope;
    detail = describe_record(r);
  }
  if (flags.json) {
    json j{{"target", req.target}, {"type", *type}, {"summary", reply->summary}};
    if (!reply->envelope.empty()) {
      auto envelope = json::from_msgpack(reply->envelope);
      j["reply"] = json{{"type", reply->type}, {"summary", detail}, {"payload", envelope[2]}};
    }
    out << j.dump(2) << '\n';
    return exit_ok;
  }
  fmt::print(out, "{}\n", reply->summary);
  if (!reply->envelope.empty()) fmt::print(out, "reply: {}: {}\n", reply->type, detail);
  return exit_ok;
}

} // namespace kvactor
