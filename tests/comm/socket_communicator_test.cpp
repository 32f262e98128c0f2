// The socket communicator: CPU ranks of different processes (here: threads over loopback) run the
// host communicator's collectives with the same bits, and a peer that dies, disagrees or never
// joins is an error that says so, at once or within the deadline, never a hang.
#include "kvactor/comm/socket_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collective_support.hpp"
#include "kvactor/comm/host_communicator.h"

namespace kvactor::comm {
namespace {

using namespace std::chrono_literals;

// A group of `world` socket communicators on loopback, joined concurrently.
std::vector<std::shared_ptr<communicator>> join_group(int world,
                                                      std::chrono::milliseconds timeout = 10s) {
  auto listener = socket_listener::open("127.0.0.1");
  const auto address = listener->address();
  std::vector<std::future<std::shared_ptr<communicator>>> joining;
  for (int r = 0; r < world; ++r)
    joining.push_back(std::async(std::launch::async, [&, r]() mutable {
      return make_socket_communicator(address, world, r, r == 0 ? std::move(listener) : nullptr,
                                      {timeout});
    }));
  std::vector<std::shared_ptr<communicator>> out;
  for (auto& j : joining)
    out.push_back(j.get());
  return out;
}

// Runs f(rank) on one thread per rank.
void on_every_rank(int world, const std::function<void(int)>& f) {
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back(f, r);
  for (auto& t : ts)
    t.join();
}

TEST(SocketCommunicator, FourRanksReduceToTheSameBitsAsAnInProcessGroup) {
  constexpr int world = 4;
  constexpr size_t n = 5000;
  std::vector<std::vector<float>> data(world);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& d : data)
    for (size_t i = 0; i < n; ++i)
      d.push_back(u(rng));
  auto sockets = join_group(world);
  auto hosts = host_communicator::create_group(world);
  auto via_sockets = data, via_host = data;
  std::vector<int64_t> agreed(world);
  std::vector<std::vector<float>> gathered(world, std::vector<float>(world * 3));
  std::vector<std::vector<float>> broadcast(world);
  on_every_rank(world, [&](int r) {
    const auto i = static_cast<size_t>(r);
    sockets[i]->all_reduce(via_sockets[i].data(), n);
    hosts[i]->all_reduce(via_host[i].data(), n);
    agreed[i] = sockets[i]->agree(100 + r, reduce_op::min);
    std::vector<float> mine{float(r), float(r) + 0.5f, float(-r)};
    sockets[i]->all_gather(mine.data(), gathered[i].data(), 3, collective_dtype::float32);
    broadcast[i] = data[i];
    sockets[i]->broadcast(broadcast[i].data(), n, collective_dtype::float32, 2);
    sockets[i]->barrier();
  });
  for (int r = 0; r < world; ++r) {
    const auto i = static_cast<size_t>(r);
    EXPECT_EQ(std::memcmp(via_sockets[i].data(), via_host[0].data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from the in-process group";
    EXPECT_EQ(agreed[i], 100);
    EXPECT_EQ(gathered[i], (std::vector<float>{0, 0.5f, 0, 1, 1.5f, -1, 2, 2.5f, -2, 3, 3.5f, -3}));
    EXPECT_EQ(broadcast[i], data[2]);
    const auto entries = sockets[i]->ledger().entries();
    ASSERT_EQ(entries.size(), 5u);
    for (const auto& e : entries)
      EXPECT_EQ(e.status, collective_status::completed);
  }
}

TEST(SocketCommunicator, APeerThatDiesFailsTheOthersAtOnceNotAfterTheTimeout) {
  auto group = join_group(3, 60s);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<test::caught> caught(3);
  on_every_rank(3, [&](int r) {
    if (r == 2) {
      group[2].reset(); // its sockets close, as when its process is killed
      return;
    }
    std::vector<float> x(16, 1.0f);
    caught[static_cast<size_t>(r)] =
        test::catch_collective([&] { group[static_cast<size_t>(r)]->all_reduce(x.data(), 16); });
  });
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 5s) << "a dead peer must not cost the 60 s timeout";
  for (int r = 0; r < 2; ++r) {
    const auto& c = caught[static_cast<size_t>(r)];
    ASSERT_TRUE(c.thrown) << "rank " << r;
    EXPECT_EQ(c.kind, collective_failure::transport) << c.what;
    EXPECT_NE(c.what.find("closed its connection"), std::string::npos) << c.what;
  }
  EXPECT_NE(caught[0].what.find("rank 2"), std::string::npos) << caught[0].what;
}

TEST(SocketCommunicator, RanksThatEnterDifferentCollectivesFailNamingBoth) {
  auto group = join_group(2);
  std::vector<test::caught> caught(2);
  on_every_rank(2, [&](int r) {
    std::vector<float> x(8, 1.0f);
    const size_t count = r == 0 ? 8 : 4;
    caught[static_cast<size_t>(r)] =
        test::catch_collective([&] { group[static_cast<size_t>(r)]->all_reduce(x.data(), count); });
  });
  ASSERT_TRUE(caught[0].thrown);
  EXPECT_EQ(caught[0].kind, collective_failure::mismatch);
  EXPECT_NE(caught[0].what.find("of 8"), std::string::npos) << caught[0].what;
  EXPECT_NE(caught[0].what.find("rank 1 entered all_reduce(sum) #1 of 4"), std::string::npos)
      << caught[0].what;
  ASSERT_TRUE(caught[1].thrown) << "rank 1 learns of it when rank 0 closes";
  // An aborted communicator refuses at once, without a ledger entry.
  std::vector<float> x(8);
  auto again = test::catch_collective([&] { group[0]->all_reduce(x.data(), 8); });
  EXPECT_EQ(again.kind, collective_failure::aborted);
  EXPECT_EQ(group[0]->ledger().entries().size(), 1u);
}

TEST(SocketCommunicator, ARankThatNeverJoinsIsNamedWhenTheDeadlinePasses) {
  auto listener = socket_listener::open("127.0.0.1");
  const auto address = listener->address();
  auto one = std::async(std::launch::async, [&] {
    return make_socket_communicator(address, 3, 1, nullptr, {socket_options{800ms}});
  });
  auto zero = test::catch_collective([&] {
    (void)make_socket_communicator(address, 3, 0, std::move(listener), {socket_options{800ms}});
  });
  ASSERT_TRUE(zero.thrown);
  EXPECT_EQ(zero.kind, collective_failure::timeout);
  EXPECT_NE(zero.what.find("rank(s) 2 did not join"), std::string::npos) << zero.what;
  // Rank 1 was let in; its communicator then fails on first use (rank 0 is gone).
  try {
    auto c = one.get();
    std::vector<float> x(4);
    auto late = test::catch_collective([&] { c->all_reduce(x.data(), 4); });
    EXPECT_TRUE(late.thrown);
  } catch (const collective_error&) {
  }
}

// A plain TCP connection to host:port ("127.0.0.1:N"), or -1.
int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(SocketCommunicator, StrangersOnTheBootstrapPortDoNotHoldTheGroupUp) {
  auto listener = socket_listener::open("127.0.0.1");
  const auto address = listener->address();
  // Queued before the ranks: one says nothing, one sends bytes that are no hello.
  const int silent = connect_to(address);
  const int noisy = connect_to(address);
  ASSERT_GE(silent, 0);
  ASSERT_GE(noisy, 0);
  const char junk[64] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(noisy, junk, sizeof junk, 0), static_cast<ssize_t>(sizeof junk));
  const auto t0 = std::chrono::steady_clock::now();
  auto one = std::async(std::launch::async, [&] {
    return make_socket_communicator(address, 2, 1, nullptr, {socket_options{60s}});
  });
  auto zero = make_socket_communicator(address, 2, 0, std::move(listener), {socket_options{60s}});
  auto peer = one.get();
  const auto waited = std::chrono::steady_clock::now() - t0;
  // The silent stranger costs its hello wait (2 s), never the group's 60 s deadline.
  EXPECT_LT(waited, 10s);
  on_every_rank(2, [&](int r) { (r == 0 ? zero : peer)->barrier(); });
  ::close(silent);
  ::close(noisy);
}

TEST(SocketCommunicator, BadAddressesAndRanksAreRefusedByName) {
  auto bad = test::catch_collective(
      [] { (void)make_socket_communicator("nohost", 2, 1, nullptr, {socket_options{1s}}); });
  EXPECT_EQ(bad.kind, collective_failure::invalid_argument);
  EXPECT_NE(bad.what.find("'nohost' is not host:port"), std::string::npos) << bad.what;
  auto rank = test::catch_collective(
      [] { (void)make_socket_communicator("127.0.0.1:9", 2, 5, nullptr, {socket_options{1s}}); });
  EXPECT_EQ(rank.kind, collective_failure::invalid_argument);
  EXPECT_NE(rank.what.find("rank 5 of world 2"), std::string::npos) << rank.what;
  auto no_listener = test::catch_collective(
      [] { (void)make_socket_communicator("127.0.0.1:9", 2, 0, nullptr, {socket_options{1s}}); });
  EXPECT_NE(no_listener.what.find("needs the listener"), std::string::npos) << no_listener.what;
}

} // namespace
} // namespace kvactor::comm
