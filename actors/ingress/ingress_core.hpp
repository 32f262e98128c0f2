// The server's ingress, the logic of its actor (pure: no CAF, no sockets): takes each generation
// request a client sends, checks it against the model served (its name, tokenizer, chat template
// and length), turns it into engine requests, and turns the engine's updates into what each
// client receives; a client that goes away has its engine requests aborted. Clients are reached
// through `client`, whose calls must not block (the HTTP server queues them on its own threads).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actors/ingress/serving_request.hpp"
#include "model/chat_template.hpp"

namespace kvactor::openai {

/// One client's answer: a whole response, or a stream of server-sent events.
class client {
public:
  virtual ~client() = default;
  virtual void respond(int status, std::string json_body) = 0;
  virtual void begin_stream() = 0; // 200, text/event-stream
  virtual void send(std::string event) = 0;
  virtual void end_stream() = 0;
};

/// The model served, as the ingress needs it, with the scheduler's limits as resolved for it
/// (max_model_len: the model's length).
struct served_model : scheduler_limits {
  std::string name;                    // --served-model-name: what requests' "model" must say
  const tokenizer* tok = nullptr;      // outlives the ingress
  const chat_template* chat = nullptr; // null: the chat endpoint answers 400
  std::vector<int32_t> eos_token_ids;
  int32_t vocab_size = 0;
};

/// How much the ingress takes.
struct ingress_limits {
  size_t max_waiting_requests = 0; // requests being served at once; more: 429 (0: no limit)
};

/// What the ingress counts for /metrics: answers by status code, streams open, requests served.
struct ingress_counts {
  std::map<int, int64_t> by_status;
  int64_t streams_open = 0;
  int64_t in_flight = 0;
};

class ingress_core {
public:
  ingress_core(served_model model, ingress_limits limits, std::function<int64_t()> unix_now,
               uint64_t seed);

  /// A body POSTed to a generation endpoint. Answers the client at once when it is refused;
  /// otherwise returns the engine requests to submit (none: answered), and `key` names the
  /// request for disconnect().
  std::vector<request_spec> accept(endpoint kind, std::string_view body, std::shared_ptr<client> c,
                                   uint64_t& key);

  /// The engine's updates: each client gets what they make of its request; returns the engine
  /// requests to abort (stop strings, failed siblings).
  std::vector<uint64_t> on_updates(const request_updates& updates);

  /// The client of request `key` went away: the engine requests still running, to abort.
  std::vector<uint64_t> disconnect(uint64_t key);
  /// The same, found by its client (none once its request was answered).
  std::vector<uint64_t> disconnect(const client* c);

  /// Refuse new requests with 503 from now on (the server is stopping).
  void drain() { draining_ = true; }
  /// Answers request `key` with a 500 naming `why` (the engine refused it).
  void fail(uint64_t key, const std::string& why);
  /// Fails every request still served with `why` (the shutdown deadline passed).
  void fail_all(const std::string& why);

  const ingress_counts& counts() const { return counts_; }
  size_t in_flight() const { return live_.size(); }

private:
  struct live_request {
    serving_request req;
    std::shared_ptr<client> to;
    bool streaming = false;
  };

  api_expected<serving_setup> setup_of(endpoint kind, std::string_view body);
  api_expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_special) const;
  api_expected<serving_setup> completion_setup(std::string_view body);
  api_expected<serving_setup> chat_setup(std::string_view body);
  api_expected<std::string> render_chat(const chat_request& r) const;
  void answer_tokenize(std::string_view body, client& c);
  void answer_detokenize(std::string_view body, client& c);
  std::optional<api_error> check_model(const std::string& asked) const;
  void answer_error(client& c, const api_error& e);
  void deliver(uint64_t key, live_request& r, ingress_output out, std::vector<uint64_t>& aborts);
  void forget(uint64_t key);
  void answer_failure(uint64_t key, const api_error& e);

  served_model model_;
  ingress_limits limits_;
  std::function<int64_t()> now_;
  uint64_t seed_;
  uint64_t next_engine_id_ = 1;
  bool draining_ = false;
  std::unordered_map<uint64_t, live_request> live_; // by key (its first engine id)
  std::unordered_map<uint64_t, uint64_t> key_of_;   // engine id -> key
  std::unordered_map<const client*, uint64_t> by_client_;
  ingress_counts counts_;
};

} // namespace kvactor::openai
