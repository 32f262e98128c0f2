// The server's life: it stops accepting while open connections go on, stops with clients
// connected, and holds thousands of open streams on one I/O thread.
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "tests/net/http/test_client.hpp"
#include "tests/net/http/test_support.hpp"

namespace kvactor::http::test {
namespace {

TEST(HttpLifecycle, StopAcceptingRefusesNewConnectionsAndOpenOnesGoOn) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client open(srv->port());
  ASSERT_TRUE(open.send(request_bytes("GET", "/1")));
  auto first = box.pop();
  ASSERT_TRUE(first);
  srv->stop_accepting();
  srv->stop_accepting(); // idempotent
  test_client late(srv->port());
  EXPECT_FALSE(late.connected());
  EXPECT_EQ(late.connect_errno(), ECONNREFUSED);
  first->res->respond(200, "text/plain", "one");
  EXPECT_EQ(open.read_response().body, "one");
  ASSERT_TRUE(open.send(request_bytes("GET", "/2")));
  auto second = box.pop();
  ASSERT_TRUE(second);
  second->res->respond(200, "text/plain", "two");
  EXPECT_EQ(open.read_response().body, "two");
}

TEST(HttpLifecycle, StopClosesConnectedClientsAndEndsTheirStreams) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client streaming(srv->port());
  test_client idle(srv->port());
  ASSERT_TRUE(streaming.send(request_bytes("GET", "/stream")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  event gone;
  ex->res->on_disconnect([&] { gone.set(); });
  ex->res->begin_stream(200, "text/event-stream");
  EXPECT_EQ(streaming.read_head().status, 200);
  srv->stop_accepting();
  srv->stop();
  EXPECT_TRUE(gone.wait(0ms)); // before stop returned
  EXPECT_TRUE(ex->res->closed());
  EXPECT_EQ(srv->open_connections(), 0u);
  EXPECT_TRUE(streaming.sees_close());
  EXPECT_TRUE(idle.sees_close());
  ex->res->write("data: after stop\n\n"); // dropped quietly
  srv->stop();                            // idempotent
  srv.reset();                            // the destructor too
  ex->res->end_stream();
}

TEST(HttpLifecycle, FinishLetsAStreamInProgressEndThenClosesEveryConnection) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client streaming(srv->port());
  test_client idle(srv->port());
  ASSERT_TRUE(streaming.send(request_bytes("GET", "/stream")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  ex->res->begin_stream(200, "text/event-stream");
  EXPECT_EQ(streaming.read_head().status, 200);
  // Once the server is finishing: the idle connection is closed at once, the stream in progress
  // ends as a request in flight would, then its connection closes too. Clients close on EOF, so
  // finish() returns without waiting for its deadline.
  std::thread clients([res = ex->res, &idle, &streaming] {
    EXPECT_TRUE(idle.sees_close());
    idle.close();
    res->write("data: last\n\n");
    res->end_stream();
    EXPECT_EQ(streaming.read_chunk(), "data: last\n\n");
    EXPECT_EQ(streaming.read_chunk(), "");
    EXPECT_TRUE(streaming.sees_close());
    streaming.close();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(srv->finish(t0 + 10s), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  clients.join();
  EXPECT_FALSE(test_client(srv->port()).connected());
}

TEST(HttpLifecycle, FinishCutsWhatIsStillOpenAtTheDeadline) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client waiting(srv->port());
  ASSERT_TRUE(waiting.send(request_bytes("GET", "/never")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  event gone;
  ex->res->on_disconnect([&] { gone.set(); });
  EXPECT_EQ(srv->finish(std::chrono::steady_clock::now() + 50ms), 1u);
  EXPECT_TRUE(gone.wait(0ms)); // before finish returned
  EXPECT_TRUE(waiting.sees_close());
}

// Raises the soft limit on open files to `need`; false if the hard limit is lower.
bool enough_files(rlim_t need) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= need) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < need) return false;
  limit.rlim_cur = need;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

TEST(HttpLifecycle, HoldsTwoThousandOpenStreamsOnOneIoThread) {
  constexpr int n = 2000;
  if (!enough_files(2 * n + 256))
    GTEST_SKIP() << "needs " << 2 * n + 256 << " open files (RLIMIT_NOFILE) and cannot raise it";
  std::mutex mu;
  std::condition_variable all_in;
  std::map<std::string, std::shared_ptr<responder>> streams; // by target
  server_options options;
  options.threads = 1;
  auto srv = must_start(options, [&](request req, std::shared_ptr<responder> res) {
    res->begin_stream(200, "text/event-stream");
    std::lock_guard lock(mu);
    streams.emplace(req.target, std::move(res));
    if (streams.size() == n) all_in.notify_all();
  });
  ASSERT_TRUE(srv);
  std::vector<std::unique_ptr<test_client>> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<test_client>(srv->port(), 30));
    ASSERT_TRUE(clients.back()->connected()) << "client " << i;
    ASSERT_TRUE(clients.back()->send(request_bytes("GET", "/s/" + std::to_string(i))));
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(all_in.wait_for(lock, 60s, [&] { return streams.size() == n; }))
        << streams.size() << " of " << n << " streams began";
  }
  EXPECT_EQ(srv->open_connections(), size_t{n});
  for (auto& [target, res] : streams) {
    res->write("data: " + target + "\n\n");
    res->end_stream();
  }
  for (int i = 0; i < n; ++i) {
    auto r = clients[i]->read_response();
    ASSERT_EQ(r.status, 200) << "client " << i;
    ASSERT_EQ(r.body, "data: /s/" + std::to_string(i) + "\n\n");
  }
}

} // namespace
} // namespace kvactor::http::test
