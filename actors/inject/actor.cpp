#include "actors/inject/actor.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/inject/target.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"

namespace kvactor {

namespace {

// An injected message must never leave the client waiting on an actor that does not answer.
constexpr auto reply_timeout = std::chrono::seconds(30);

// "request 3 finished (length): 16 tokens", or why it failed.
std::string describe(const request_result& r) {
  if (!r.finished)
    return fmt::format("request {} failed after {} tokens: {}", r.request_id, r.output.size(),
                       r.failure);
  return fmt::format("request {} finished ({}): {} tokens", r.request_id, to_string(r.reason),
                     r.output.size());
}

// A request_await waits as long as the request runs: the client bounds it with its --timeout.
caf::result<inject_reply> await_result(injector_actor::stateful_pointer<injector_state> self,
                                       const inject_request& req) {
  auto await = decode<request_await>(req.envelope);
  if (!await) return to_caf_error(await.err());
  auto rp = self->make_response_promise<inject_reply>();
  self->request(self->state.setup.driver, caf::infinite, *await)
      .then(
          [rp](request_result& r) mutable {
            auto summary = describe(r);
            rp.deliver(inject_reply{"kvactor::request_result", encode(r), std::move(summary)});
          },
          [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
  return rp;
}

} // namespace

injector_actor::behavior_type injector(injector_actor::stateful_pointer<injector_state> self,
                                       injector_setup setup) {
  refuse_unexpected(self);
  self->state.setup = std::move(setup);
  return {
      [self](const inject_request& req) -> caf::result<inject_reply> {
        auto& st = self->state;
        auto target = parse_inject_target(req.target, static_cast<int32_t>(st.setup.ranks.size()));
        if (!target) return to_caf_error(target.err());
        auto type = envelope_type(req.envelope.data(), req.envelope.size());
        if (!type) return to_caf_error(type.err());
        if (auto ok = check_injectable(*target, *type); !ok) return to_caf_error(ok.err());
        const auto to = to_string(*target);
        spdlog::info("inject: {} into {}", *type, to);
        // NOTE(inject): decode before make_response_promise: once a promise exists, an error
        // returned from the handler is never sent.
        if (*type == "kvactor::request_await") return await_result(self, req);
        if (target->k == inject_target::kind::driver) {
          auto spec = decode<request_spec>(req.envelope);
          if (!spec) return to_caf_error(spec.err());
          auto rp = self->make_response_promise<inject_reply>();
          auto fail = [rp](caf::error& e) mutable { rp.deliver(std::move(e)); };
          if (st.setup.recorder) st.setup.recorder->record("inject", to, *spec);
          const auto id = spec->request_id;
          self->request(st.setup.driver, reply_timeout, atom::submit_v,
                        std::vector<request_spec>{std::move(*spec)})
              .then(
                  [rp, id](int64_t total) mutable {
                    rp.deliver(inject_reply{
                        "",
                        {},
                        fmt::format("driver accepted request {} ({} submitted)", id, total)});
                  },
                  fail);
          return rp;
        }
        auto plan = decode<step_plan>(req.envelope);
        if (!plan) return to_caf_error(plan.err());
        auto rp = self->make_response_promise<inject_reply>();
        auto fail = [rp](caf::error& e) mutable { rp.deliver(std::move(e)); };
        if (st.setup.recorder) st.setup.recorder->record("inject", to, *plan);
        self->request(st.setup.ranks[static_cast<size_t>(target->index)], reply_timeout, *plan)
            .then(
                [rp, self, to](step_done& d) mutable {
                  if (self->state.setup.recorder)
                    self->state.setup.recorder->record(to, "inject", d);
                  auto type = std::string{detail::type_name_of(d)};
                  rp.deliver(inject_reply{std::move(type), encode(d),
                                          fmt::format("{} answered step {}", to, d.seq)});
                },
                fail);
        return rp;
      },
  };
}

} // namespace kvactor
