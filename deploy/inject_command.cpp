#include "deploy/inject_command.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "net/guarded_transport.hpp"
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

namespace {

using clock_type = std::chrono::steady_clock;

// The time left until `deadline`, at least 1 ms (0 would mean no limit).
std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  return std::max(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()),
      std::chrono::milliseconds{1});
}

// Sends one inject_request and waits for its reply until `deadline`; the error says why not.
expected<inject_reply> exchange(caf::actor_system& sys, const injector_actor& gateway,
                                const inject_request& req, clock_type::time_point deadline,
                                double timeout_s) {
  caf::scoped_actor self{sys};
  std::optional<inject_reply> reply;
  std::string failure;
  // A request whose connection drops is not failed by CAF; the monitor says so at once.
  self->monitor(gateway);
  self->send(gateway, req);
  self->receive([&](inject_reply& r) { reply = std::move(r); },
                [&](caf::error& e) { failure = from_caf_error(e).message; },
                [&](caf::down_msg&) {
                  failure = fmt::format("the run closed the connection (the message is {} bytes: "
                                        "larger than its --max-message-bytes?)",
                                        req.envelope.size());
                },
                caf::after(left_until(deadline)) >>
                    [&] { failure = fmt::format("no reply within {} s", timeout_s); });
  if (!reply) return make_error(errc::io_error, failure);
  return std::move(*reply);
}

// The reply's own message, readable ("" when it carries none).
std::string detail_of(const inject_reply& reply) {
  if (reply.envelope.empty()) return "";
  trace_record r;
  r.type = reply.type;
  r.payload = reply.envelope;
  return describe_record(r);
}

json reply_json(const inject_reply& reply) {
  auto envelope = json::from_msgpack(reply.envelope);
  return json{{"type", reply.type}, {"summary", detail_of(reply)}, {"payload", envelope[2]}};
}

// --wait: the injected request's result (finished or failed, with its tokens).
expected<inject_reply> await_request(caf::actor_system& sys, const injector_actor& gateway,
                                     const std::vector<char>& envelope,
                                     clock_type::time_point deadline, double timeout_s) {
  auto spec = decode<request_spec>(envelope);
  if (!spec) return spec.err();
  inject_request await{"driver", encode(request_await{spec->request_id})};
  auto reply = exchange(sys, gateway, await, deadline, timeout_s);
  if (!reply)
    return make_error(reply.err().code,
                      fmt::format("--wait: request {}: {}", spec->request_id, reply.err().message));
  return reply;
}

void print_reply(const inject_reply& reply, std::ostream& out) {
  fmt::print(out, "{}\n", reply.summary);
  if (!reply.envelope.empty()) fmt::print(out, "reply: {}: {}\n", reply.type, detail_of(reply));
}

} // namespace

int run_inject(const inject_flags& flags, std::ostream& out, std::ostream& err) {
  const auto deadline = clock_type::now()
                        + std::chrono::duration_cast<clock_type::duration>(
                            std::chrono::duration<double>(flags.timeout_s));
  auto fail = [&](int code, const std::string& message) {
    fmt::print(err, "kvactor inject: error: {}\n", message);
    if (flags.json) out << json{{"error", message}}.dump() << '\n';
    return code;
  };
  auto address = parse_address(flags.to);
  if (!address) return fail(exit_bad_input, address.err().message);
  if (!(flags.timeout_s > 0) || flags.timeout_s > 86'400)
    return fail(exit_bad_input,
                fmt::format("--timeout: {} is outside (0, 86400] seconds", flags.timeout_s));
  std::ifstream in(flags.message, std::ios::binary);
  if (!in) return fail(exit_bad_input, fmt::format("{}: cannot open the file", flags.message));
  std::stringstream buf;
  buf << in.rdbuf();
  auto msg = parse_message_file(flags.message, buf.str());
  if (!msg) return fail(exit_bad_input, msg.err().message);
  auto type = envelope_type(msg->envelope.data(), msg->envelope.size());
  if (!type) return fail(exit_bad_input, fmt::format("{}: {}", flags.message, type.err().message));
  if (flags.wait && *type != "kvactor::request_spec")
    return fail(exit_bad_input, fmt::format("--wait: only a request waits for its result; {} is a "
                                            "{}",
                                            flags.message, *type));
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
  auto gateway =
      net.remote_actor<injector_actor>(address->first, address->second, left_until(deadline));
  if (!gateway)
    return fail(exit_failure, fmt::format("--to {}: no kvactor process listens for injection "
                                          "there ({}); start one with --inject-port",
                                          flags.to, gateway.err().message));
  auto reply = exchange(sys, *gateway, req, deadline, flags.timeout_s);
  if (!reply)
    return fail(exit_failure,
                fmt::format("{} into {}: {}", *type, req.target, reply.err().message));
  std::optional<inject_reply> result;
  if (flags.wait) {
    auto awaited = await_request(sys, *gateway, req.envelope, deadline, flags.timeout_s);
    if (!awaited) return fail(exit_failure, awaited.err().message);
    result = std::move(*awaited);
  }
  if (flags.json) {
    json j{{"target", req.target}, {"type", *type}, {"summary", reply->summary}};
    if (!reply->envelope.empty()) j["reply"] = reply_json(*reply);
    if (result) j["result"] = reply_json(*result);
    out << j.dump(2) << '\n';
    return exit_ok;
  }
  print_reply(*reply, out);
  if (result) print_reply(*result, out);
  return exit_ok;
}

} // namespace kvactor
