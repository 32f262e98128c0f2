// What the server's tests share: a handler that hands each exchange to the test thread, and a
// mailbox that the test waits on with a generous timeout (never a sleep).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <gtest/gtest.h>

#include "net/http/server.hpp"

namespace kvactor::http::test {

using namespace std::chrono_literals;

constexpr auto patience = 10s; // how long a test waits for any one event

template <class T>
class mailbox {
public:
  // Notifies under the lock: the waiter may destroy the mailbox as soon as it wakes.
  void push(T x) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(x));
    cv_.notify_all();
  }
  /// The oldest item, waiting up to `timeout`; nullopt if none came.
  std::optional<T> pop(std::chrono::milliseconds timeout = patience) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    T x = std::move(items_.front());
    items_.pop_front();
    return x;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

/// One request as the handler saw it, with its responder.
struct exchange {
  request req;
  std::shared_ptr<responder> res;
};

/// A handler that answers nothing itself: the test takes each exchange from `box`.
inline handler hand_to(mailbox<exchange>& box) {
  return [&box](request req, std::shared_ptr<responder> res) {
    box.push({std::move(req), std::move(res)});
  };
}

/// A handler answering 200 with "METHOD TARGET BODY" at once.
inline handler echo() {
  return [](request req, std::shared_ptr<responder> res) {
    res->respond(200, "text/plain", req.method + " " + req.target + " " + req.body);
  };
}

/// The server started with `options`, or null after reporting why it did not start.
inline std::unique_ptr<server> must_start(server_options options, handler h) {
  auto s = server::start(std::move(options), std::move(h));
  if (!s) {
    ADD_FAILURE() << s.err().message;
    return nullptr;
  }
  return std::move(*s);
}

/// Set once from any thread; waited for with a timeout.
class event {
public:
  void set() { // notifies under the lock, as mailbox::push does
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = patience) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return set_; });
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

} // namespace kvactor::http::test
