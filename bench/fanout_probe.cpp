// Where a cluster step's time goes: round trips of the pieces a remote
// step is made of, each timed alone on the same machine in the same run.
//   tcp               a 64-byte ping-pong on a raw TCP socket (the wire's floor on loopback)
//   local hop         a step_plan request/response between two event-based actors of one process
//   local detached    the same to a detached actor (a GPU rank's case: a thread wake-up)
//   remote empty      a step_plan without requests through CAF's middleman to another process,
//                     behind kvactor's guarded transport (cookie proof, frame guard)
//   remote 64         the same with 64 decodes (the plan and the step_done of cluster_fanout.sh)
// Remote minus local is what the middleman adds per round trip; remote 64 minus remote empty is
// what the bigger messages cost to serialise and copy.
//   usage: kvactor_fanout_probe serve [SETTINGS]              (prints "probe: caf PORT tcp PORT")
//          kvactor_fanout_probe ping HOST CAF_PORT TCP_PORT [SETTINGS] [--rounds N]
//   SETTINGS: --mm-workers N (CAF's BASP deserialising workers; -1: CAF's default)
//             --threads N (scheduler threads; 0: kvactor's default) --poll tuned|caf|spin|timed
//             --timer-slack-ns N (how late a sleeping thread may wake; Linux's default 50 us)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/runtime_config.hpp"
#include "actors/spawn_plain.hpp"
#include "deploy/cluster.hpp"
#include "messages/register.hpp"
#include "messages/step.hpp"
#include "net/guarded_transport.hpp"

namespace {

using namespace kvactor;
using clock_type = std::chrono::steady_clock;
using probe_actor = caf::typed_actor<caf::replies_to<step_plan>::with<step_done>>;

struct probe_settings {
  int mm_workers = -1;
  int threads = 0;
  std::string poll = "tuned";
  long timer_slack_ns = 0; // 0: the kernel's default (50 us)
};

void add_settings(CLI::App& app, probe_settings& s) {
  app.add_option("--mm-workers", s.mm_workers, "BASP workers (-1: CAF's default)");
  app.add_option("--threads", s.threads, "scheduler threads (0: as kvactor)");
  app.add_option("--poll", s.poll,
                 "tuned (kvactor's: spin briefly, then wait until notified), caf (CAF's "
                 "defaults), spin (never sleep), timed (polls 5 us apart, kvactor's before)")
      ->check(CLI::IsMember({"tuned", "caf", "spin", "timed"}));
  app.add_option("--timer-slack-ns", s.timer_slack_ns, "the threads' timer slack (0: default)");
}

void configure(caf::actor_system_config& cfg, const probe_settings& s) {
  // Inherited by every thread created after it (CAF's workers and multiplexer).
  if (s.timer_slack_ns > 0)
    ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(s.timer_slack_ns));
  register_types(cfg);
  if (s.poll == "tuned") configure_step_latency(cfg);
  if (s.poll == "spin") {
    configure_step_latency(cfg);
    cfg.set("work-stealing.aggressive-poll-attempts", 100'000'000); // never sleeps while busy
  }
  if (s.poll == "timed") {
    // The timed polling CAF's defaults suggest: 1000 polls with a 5 us sleep between them.
    configure_step_latency(cfg);
    cfg.set("work-stealing.moderate-poll-attempts", 1000);
    cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(5)});
  }
  if (s.threads > 0) cfg.set("scheduler.max-threads", s.threads);
  configure_cluster_middleman(cfg, tls_files{});
  if (s.mm_workers >= 0) cfg.set("middleman.workers", s.mm_workers);
}

// The step_done a rank would send for `plan`: one token per sampling request.
step_done answer(const step_plan& plan) {
  step_done d;
  d.seq = plan.seq;
  d.epoch = plan.epoch;
  for (const auto& s : plan.scheduled)
    if (s.sample) d.sampled.push_back({s.request_id, 1});
  return d;
}

probe_actor::behavior_type echo(probe_actor::pointer) {
  return {[](const step_plan& plan) { return answer(plan); }};
}

// A decode step of `n` requests, as the driver sends it (one token each, 128 computed).
step_plan decoding_step(int n) {
  step_plan p;
  p.seq = 1;
  p.epoch = 1;
  for (int i = 0; i < n; ++i)
    p.scheduled.push_back({static_cast<uint64_t>(i), 128, {42}, true});
  return p;
}

// ---- raw TCP ------------------------------------------------------------------------------

constexpr size_t tcp_message = 64;

bool full_io(int fd, char* buf, size_t n, bool write_side) {
  size_t done = 0;
  while (done < n) {
    const ssize_t k =
        write_side ? ::write(fd, buf + done, n - done) : ::read(fd, buf + done, n - done);
    if (k <= 0) return false;
    done += static_cast<size_t>(k);
  }
  return true;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Listens on 127.0.0.1 (any port); echoes every connection's 64-byte messages on a thread.
uint16_t start_tcp_echo() {
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(lfd, 4) != 0)
    return 0;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread([lfd] {
    for (int fd; (fd = ::accept(lfd, nullptr, nullptr)) >= 0;) {
      no_delay(fd);
      std::thread([fd] {
        char buf[tcp_message];
        while (full_io(fd, buf, sizeof buf, false) && full_io(fd, buf, sizeof buf, true)) {
        }
        ::close(fd);
      }).detach();
    }
  }).detach();
  return ntohs(a.sin_port);
}

std::vector<double> tcp_round_trips(const std::string& host, uint16_t port, int rounds) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  std::vector<double> us;
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return us;
  no_delay(fd);
  char buf[tcp_message] = {};
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = clock_type::now();
    if (!full_io(fd, buf, sizeof buf, true) || !full_io(fd, buf, sizeof buf, false)) break;
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  ::close(fd);
  return us;
}

// ---- actor round trips --------------------------------------------------------------------

struct pinger_state {
  probe_actor target;
  step_plan plan;
  int rounds = 0;
  std::vector<double> us;
  std::promise<std::vector<double>> done;
  clock_type::time_point t0;
};

using pinger_actor = caf::stateful_actor<pinger_state>;

void ping_once(pinger_actor* self) {
  auto& st = self->state;
  st.t0 = clock_type::now();
  self->request(st.target, caf::infinite, st.plan)
      .then(
          [self](const step_done&) {
            auto& st = self->state;
            st.us.push_back(
                std::chrono::duration<double, std::micro>(clock_type::now() - st.t0).count());
            if (static_cast<int>(st.us.size()) < st.rounds) return ping_once(self);
            st.done.set_value(std::move(st.us));
            self->quit();
          },
          [self](caf::error& e) {
            std::cerr << "probe: round trip failed: " << caf::to_string(e) << "\n";
            self->state.done.set_value({});
            self->quit();
          });
}

std::vector<double> actor_round_trips(caf::actor_system& sys, const probe_actor& target,
                                      const step_plan& plan, int rounds) {
  std::promise<std::vector<double>> done;
  auto result = done.get_future();
  // The ignored nullptr: CAF 0.17 binds a null reference for a spawn without arguments.
  sys.spawn(
      [&](pinger_actor* self, std::nullptr_t) -> caf::behavior {
        self->state.target = target;
        self->state.plan = plan;
        self->state.rounds = rounds;
        self->state.done = std::move(done);
        ping_once(self);
        return {[](int32_t) {}}; // alive until the last answer
      },
      nullptr);
  return result.get();
}

void report(const char* what, std::vector<double> us, int warmup) {
  if (static_cast<int>(us.size()) <= warmup) {
    std::printf("%-16s no answer\n", what);
    return;
  }
  us.erase(us.begin(), us.begin() + warmup);
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))];
  };
  std::printf("%-16s p50 %8.1f us  p90 %8.1f us  p99 %8.1f us  (%zu round trips)\n", what, at(0.5),
              at(0.9), at(0.99), us.size());
}

// The settings' actor system behind kvactor's guarded transport (no TLS: the cluster cookie).
struct probe_config : caf::actor_system_config {
  explicit probe_config(const probe_settings& s) { configure(*this, s); }
};

template <class T>
T or_exit(expected<T> x) {
  if (!x) {
    std::cerr << "probe: " << x.err().message << "\n";
    std::exit(2);
  }
  return std::move(*x);
}

struct probe_system {
  explicit probe_system(const probe_settings& s)
      : cfg(s), sys(cfg), net(sys, or_exit(transport_limits_from(default_max_message_bytes)),
                              or_exit(transport_auth_for(false))) {}
  probe_config cfg;
  caf::actor_system sys;
  guarded_transport net;
};

int serve(const probe_settings& s) {
  probe_system p(s);
  auto& sys = p.sys;
  auto& net = p.net;
  auto e = sys.spawn(plain<&echo>, nullptr);
  auto port = net.publish(e, 0, "127.0.0.1");
  if (!port) {
    std::cerr << "probe: cannot listen: " << port.err().message << "\n";
    return 1;
  }
  std::printf("probe: caf %u tcp %u\n", *port, start_tcp_echo());
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line); // ends when the caller closes stdin
  caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  return 0;
}

int ping(const probe_settings& s, const std::string& host, uint16_t caf_port, uint16_t tcp_port,
         int rounds) {
  constexpr int warmup = 100;
  probe_system p(s);
  auto& sys = p.sys;
  auto& net = p.net;
  auto remote = net.remote_actor<probe_actor>(host, caf_port);
  if (!remote) {
    std::cerr << "probe: cannot connect: " << remote.err().message << "\n";
    return 1;
  }
  const auto empty = decoding_step(0), decodes = decoding_step(64);
  report("tcp", tcp_round_trips(host, tcp_port, rounds + warmup), warmup);
  auto local = sys.spawn(plain<&echo>, nullptr);
  auto detached = sys.spawn<caf::detached>(plain<&echo>, nullptr);
  report("local hop", actor_round_trips(sys, local, decodes, rounds + warmup), warmup);
  report("local detached", actor_round_trips(sys, detached, decodes, rounds + warmup), warmup);
  report("remote empty", actor_round_trips(sys, *remote, empty, rounds + warmup), warmup);
  report("remote 64", actor_round_trips(sys, *remote, decodes, rounds + warmup), warmup);
  caf::anon_send_exit(local, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(detached, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"round trips of the pieces of a cluster step"};
  app.require_subcommand(1);
  probe_settings s;
  auto* srv = app.add_subcommand("serve", "an echo actor and a TCP echo on 127.0.0.1");
  add_settings(*srv, s);
  auto* png = app.add_subcommand("ping", "time round trips to a serving probe");
  std::string host;
  uint16_t caf_port = 0, tcp_port = 0;
  int rounds = 2000;
  png->add_option("host", host)->required();
  png->add_option("caf_port", caf_port)->required();
  png->add_option("tcp_port", tcp_port)->required();
  png->add_option("--rounds", rounds);
  add_settings(*png, s);
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  if (srv->parsed()) return serve(s);
  return ping(s, host, caf_port, tcp_port, rounds);
}
