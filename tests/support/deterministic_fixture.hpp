// The deterministic actor system for protocol tests: CAF's test_coordinator runs nothing until the
// test says so, so a test reads as a message sequence chart:
//
//   inject(rec, rank, atom::configure_v, cfg);           // rec ──configure──► rank
//   run_once(rank);                                      // rank handles it
//   expect<atom::plan, model_layout, kv_plan_request>(rank, kv);  // rank ──plan──► kv (+ run kv)
//   auto plan = expect_reply<rank_plan>(rank, rec);      // rank ──rank_plan──► rec
//
// NOTE(deterministic_fixture): no helper ever blocks. Every check of a mailbox is a peek that
// reports a non-fatal failure (and returns nullopt/false) when the mailbox is empty or holds
// something else, so a broken protocol fails the test instead of hanging the binary.
#pragma once

#include <cxxabi.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/after.hpp>
#include <caf/atom.hpp>
#include <caf/exit_reason.hpp>
#include <caf/local_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>
#include <spdlog/spdlog.h>

#include "messages/caf_error.hpp"
#include "messages/register.hpp"

namespace kvactor::test {

// ---- naming things in failure messages -------------------------------------------------------

/// A readable type name (demangled typeid).
template <class T>
std::string type_name_of() {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> p{
      abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status), std::free};
  return status == 0 && p ? std::string{p.get()} : std::string{typeid(T).name()};
}

template <class... Ts>
std::string type_names_of() {
  std::string out;
  ((out += (out.empty() ? "" : ", ") + type_name_of<Ts>()), ...);
  return "(" + out + ")";
}

/// The actor's name (its state's `name`, "kvactor.rank" ...) and id, or "<anonymous>".
inline std::string actor_name(const caf::strong_actor_ptr& p) {
  if (!p) return "<anonymous>";
  auto* local = dynamic_cast<caf::local_actor*>(p->get());
  return std::string{local ? local->name() : "actor"} + "#" + std::to_string(p->id());
}

template <class Handle>
std::string actor_name(const Handle& h) {
  return actor_name(caf::actor_cast<caf::strong_actor_ptr>(h));
}

/// Log level for actors under test: quiet unless KVACTOR_TEST_LOG is set (e.g. "info").
inline void quiet_logs() {
  const char* level = std::getenv("KVACTOR_TEST_LOG");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::off);
}

// ---- the fixture -----------------------------------------------------------------------------

struct deterministic_config : caf::actor_system_config {
  deterministic_config() {
    set("scheduler.policy", caf::atom("testing"));
    register_types(*this);
  }
};

class deterministic_fixture : public ::testing::Test {
protected:
  deterministic_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& sched =
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  caf::scoped_actor self{sys, true}; // hidden: the system does not wait for it

  deterministic_fixture() { quiet_logs(); }

  // NOTE(deterministic_fixture): sched.run() does not fire timeouts; a pending one would keep its
  // requester alive and ~actor_system() would wait forever. So would an actor that awaits a reply
  // that never comes (its pending handler holds a reference to itself): every actor spawned
  // through spawn()/track() is killed first.
  ~deterministic_fixture() override {
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    spawned_.clear();
    do
      sched.run();
    while (sched.trigger_timeouts() > 0);
  }

  /// sys.spawn, and track() the actor.
  template <class... Ts>
  auto spawn(Ts&&... xs) {
    return track(sys.spawn(std::forward<Ts>(xs)...));
  }

  /// Kills `x` (a handle, or a struct whose `actor` member is one) when the test ends, so that a
  /// test that fails half-way through a protocol never hangs the binary. Returns `x`.
  template <class T>
  T track(T x) {
    if constexpr (requires { x.actor; })
      spawned_.push_back(caf::actor_cast<caf::actor>(x.actor));
    else
      spawned_.push_back(caf::actor_cast<caf::actor>(x));
    return x;
  }

  /// Lets `h` handle exactly one message (its first run also runs its initialization).
  /// A non-fatal failure and false when `h` has nothing to do.
  template <class Handle>
  bool run_once(const Handle& h) {
    if (!sched.prioritize(h)) {
      ADD_FAILURE() << "run_once: " << actor_name(h) << " has no job scheduled";
      return false;
    }
    sched.run_once();
    return true;
  }

  /// Runs every actor until nothing is left to do (timeouts excluded); the number of jobs run.
  size_t run_all() { return sched.run(); }

  /// Runs every actor except `observer` until only `observer` has work left (its mailbox stays
  /// untouched for expect_reply / expect_error); the number of jobs run.
  template <class Handle>
  size_t run_all_but(const Handle& observer) {
    auto* skip = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(observer));
    return sched.run_jobs_filtered([skip](caf::resumable* job) { return job != skip; });
  }

  /// Puts `xs...` into `to`'s mailbox as if `from` had sent it (caf::send_as; replies go to
  /// `from`). Runs nothing: follow with run_once(to) or run_all().
  template <class From, class To, class... Ts>
  void inject(const From& from, const To& to, Ts&&... xs) {
    caf::send_as(from, to, std::forward<Ts>(xs)...);
  }

  /// The content of the next message in `dst`'s mailbox, which must come from `src` and hold
  /// exactly Ts...; it stays in the mailbox. Otherwise a non-fatal failure and nullopt.
  template <class... Ts, class Src, class Dst>
  std::optional<std::tuple<Ts...>> peek_from(const Src& src, const Dst& dst) {
    auto* dst_ptr = caf::actor_cast<caf::abstract_actor*>(dst);
    if (dst_ptr == nullptr) {
      ADD_FAILURE() << "peek_from: invalid destination handle";
      return std::nullopt;
    }
    auto* elem = dst_ptr->peek_at_next_mailbox_element();
    if (elem == nullptr) {
      ADD_FAILURE() << "peek_from: the mailbox of " << actor_name(dst) << " is empty; expected "
                    << type_names_of<Ts...>() << " from " << actor_name(src);
      return std::nullopt;
    }
    const auto want = caf::actor_cast<caf::strong_actor_ptr>(src);
    if (elem->sender != want) {
      ADD_FAILURE() << "peek_from: the next message of " << actor_name(dst) << " comes from "
                    << actor_name(elem->sender) << ", expected " << actor_name(want) << ": "
                    << to_string(elem->content());
      return std::nullopt;
    }
    if (!elem->content().template match_elements<Ts...>()) {
      ADD_FAILURE() << "peek_from: " << actor_name(src) << " -> " << actor_name(dst) << " is "
                    << to_string(elem->content()) << ", expected " << type_names_of<Ts...>();
      return std::nullopt;
    }
    return elem->content().template get_as_tuple<Ts...>();
  }

  /// One step of a sequence chart: `src` -> `dst` with Ts..., then `dst` handles it.
  template <class... Ts, class Src, class Dst>
  std::optional<std::tuple<Ts...>> expect(const Src& src, const Dst& dst) {
    auto x = peek_from<Ts...>(src, dst);
    if (x) run_once(dst);
    return x;
  }

  /// The reply `src` sent to `rec` (a recorder, see recorder.hpp), which must be a T; `rec`
  /// then stores it. A non-fatal failure and nullopt otherwise (an error reply is printed).
  template <class T, class Src, class Rec>
  std::optional<T> expect_reply(const Src& src, const Rec& rec) {
    if (auto err = peek_error_quietly(src, rec)) {
      ADD_FAILURE() << "expect_reply: " << actor_name(src)
                    << " replied with an error: " << sys.render(*err);
      run_once(rec);
      return std::nullopt;
    }
    auto x = peek_from<T>(src, rec);
    if (!x) return std::nullopt;
    run_once(rec);
    return std::get<0>(std::move(*x));
  }

  /// The error `src` replied to `rec` with; nullopt and a non-fatal failure otherwise.
  template <class Src, class Rec>
  std::optional<caf::error> expect_error(const Src& src, const Rec& rec) {
    auto x = peek_from<caf::error>(src, rec);
    if (!x) return std::nullopt;
    run_once(rec);
    return std::get<0>(std::move(*x));
  }

  /// True when `dst` has no message waiting (reported as a failure otherwise).
  template <class Dst>
  bool expect_no_message(const Dst& dst) {
    auto* elem = caf::actor_cast<caf::abstract_actor*>(dst)->peek_at_next_mailbox_element();
    if (elem == nullptr) return true;
    ADD_FAILURE() << "expect_no_message: " << actor_name(dst) << " has "
                  << to_string(elem->content()) << " from " << actor_name(elem->sender);
    return false;
  }

  /// The down_msg for `h` in the hidden `self`'s mailbox (after self->monitor(h)); consumes it.
  template <class Handle>
  std::optional<caf::down_msg> expect_down(const Handle& h) {
    auto* elem = self->peek_at_next_mailbox_element();
    if (elem == nullptr || !elem->content().template match_elements<caf::down_msg>()) {
      ADD_FAILURE() << "expect_down: no down_msg for " << actor_name(h)
                    << " (mailbox: " << (elem ? to_string(elem->content()) : std::string{"empty"})
                    << ")";
      return std::nullopt;
    }
    auto msg = elem->content().template get_as<caf::down_msg>(0);
    if (msg.source != caf::actor_cast<caf::actor_addr>(h)) {
      ADD_FAILURE() << "expect_down: the down_msg is about another actor";
      return std::nullopt;
    }
    self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(0)) >> [] {});
    return msg;
  }

  /// Every scheduled actor named `name`, in job order (e.g. all of a rank's builders).
  std::vector<caf::actor> scheduled_actors_named(const std::string& name) {
    std::vector<caf::actor> out;
    for (auto* job : sched.jobs)
      if (auto* a = dynamic_cast<caf::local_actor*>(job); a != nullptr && a->name() == name)
        out.push_back(caf::actor_cast<caf::actor>(a));
    return out;
  }

  /// The scheduled actor named `name` (its state's name, e.g. "kvactor.kv_cache"), first in
  /// job order: how a test addresses children an actor spawned. Invalid handle if none.
  caf::actor scheduled_actor_named(const std::string& name) {
    for (auto* job : sched.jobs)
      if (auto* a = dynamic_cast<caf::local_actor*>(job); a != nullptr && a->name() == name)
        return caf::actor_cast<caf::actor>(a);
    ADD_FAILURE() << "no scheduled actor named " << name;
    return {};
  }

private:
  std::vector<caf::actor> spawned_;

  template <class Src, class Rec>
  std::optional<caf::error> peek_error_quietly(const Src& src, const Rec& rec) {
    auto* elem = caf::actor_cast<caf::abstract_actor*>(rec)->peek_at_next_mailbox_element();
    if (elem != nullptr && elem->sender == caf::actor_cast<caf::strong_actor_ptr>(src)
        && elem->content().template match_elements<caf::error>())
      return elem->content().template get_as<caf::error>(0);
    return std::nullopt;
  }
};

} // namespace kvactor::test
