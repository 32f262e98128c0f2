// The responder a handler receives: it turns each call into bytes on the caller's thread and posts
// them to its connection (an exchange_sink, the session), which checks the order of the calls and
// writes them on the connection's strand. The responder holds its connection weakly: a client
// that left frees its connection even while a handler still holds the responder.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "net/http/server.hpp"

namespace kvactor::http {

class responder_impl;

/// What a responder hands its connection: response bytes of one kind.
enum class piece_kind : uint8_t { whole, stream_head, chunk, stream_end };
struct piece {
  piece_kind kind = piece_kind::whole;
  std::string head; // the head, the framed chunk, or the last chunk
  std::string body; // whole: the body, kept apart so it is never copied
};

/// The connection a responder answers on. Both calls post onto the connection's strand and
/// return at once, from any thread.
class exchange_sink {
public:
  virtual ~exchange_sink() = default;
  virtual void post_piece(std::shared_ptr<responder_impl> from, piece p) = 0;
  virtual void post_watch(std::shared_ptr<responder_impl> from, std::function<void()> f) = 0;
};

/// Lets threads outside the server post to its I/O while the server lives: the server closes it,
/// under the exclusive lock, before its io_context goes away.
class post_gate {
public:
  template <class F>
  void run_if_open(F&& f) {
    std::shared_lock lock(mu_);
    if (open_) f();
  }
  void close() {
    std::unique_lock lock(mu_);
    open_ = false;
  }

private:
  std::shared_mutex mu_;
  bool open_ = true; // GUARDED_BY(mu_)
};

class responder_impl final : public responder, public std::enable_shared_from_this<responder_impl> {
public:
  /// `close_after`: the connection closes after this answer (its head says "Connection: close").
  responder_impl(std::weak_ptr<exchange_sink> sink, std::shared_ptr<post_gate> gate,
                 bool close_after);

  void respond(int status, std::string content_type, std::string body,
               header_list extra_headers) override;
  void begin_stream(int status, std::string content_type, header_list extra_headers) override;
  void write(std::string chunk) override;
  void end_stream() override;
  void on_disconnect(std::function<void()> f) override;
  bool closed() const override { return closed_.load(std::memory_order_acquire); }

  bool close_after() const { return close_after_; }

  // The exchange as its connection sees it: touched on the connection's strand only.
  enum class phase : uint8_t { awaiting, streaming, complete };
  phase state = phase::awaiting;
  std::vector<std::function<void()>> on_gone; // run if the client goes first

  /// On the strand, when the client went away before the answer completed.
  void mark_closed() { closed_.store(true, std::memory_order_release); }

private:
  void post(piece p);

  std::weak_ptr<exchange_sink> sink_;
  std::shared_ptr<post_gate> gate_;
  const bool close_after_;
  std::atomic<bool> closed_{false};
};

} // namespace kvactor::http
