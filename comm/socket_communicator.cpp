#include "kvactor/comm/socket_communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "kvactor/comm/collective_ledger.h"
#include "rank_order_reduce.h"
#include "timeouts.h"

namespace kvactor::comm {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr uint32_t frame_magic = 0x4b564143;         // "KVAC"
constexpr auto hello_wait = std::chrono::seconds(2); // a joining rank sends its hello at once

// Every message on a connection: this header, then `bytes` of payload.
struct frame {
  uint32_t magic = frame_magic;
  uint8_t kind = 0, op = 0, dtype = 0, pad = 0;
  int32_t root = -1;
  int32_t rank = 0; // the sender
  uint64_t seq = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct hello {
  uint32_t magic = frame_magic;
  int32_t rank = 0;
  int32_t world = 0;
};

[[noreturn]] void fail(collective_failure kind, const std::string& why) {
  throw collective_error(kind, why);
}

int remaining_ms(clock_type::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline: false on timeout.
bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true; // let the read/write report it
  }
}

// `who`: "rank 3" for messages; throws timeout or transport.
void send_all(int fd, const void* data, size_t n, clock_type::time_point deadline,
              const std::string& who) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_for(fd, POLLOUT, deadline))
      fail(collective_failure::timeout, "sending to " + who + " timed out");
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail(collective_failure::transport,
           "sending to " + who + ": " + std::strerror(errno) + " (its process died or it aborted)");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void recv_all(int fd, void* data, size_t n, clock_type::time_point deadline,
              const std::string& who) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline))
      fail(collective_failure::timeout, "waiting for " + who + " timed out");
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0)
      fail(collective_failure::transport,
           who + " closed its connection (its process died or it aborted)");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail(collective_failure::transport, "receiving from " + who + ": " + std::strerror(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::pair<std::string, uint16_t> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    fail(collective_failure::invalid_argument,
         "socket communicator: address '" + address + "' is not host:port");
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port <= 0 || port > 65535)
    fail(collective_failure::invalid_argument,
         "socket communicator: port of '" + address + "' is not in [1, 65535]");
  return {address.substr(0, colon), static_cast<uint16_t>(port)};
}

addrinfo* resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    fail(collective_failure::transport,
         "socket communicator: cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return res;
}

// One connection attempt after another until the deadline (rank 0 may not listen yet).
int connect_until(const std::string& host, uint16_t port, clock_type::time_point deadline) {
  std::string last = "no attempt";
  while (clock_type::now() < deadline) {
    addrinfo* res = resolve(host, port, false);
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc == 0) {
      no_delay(fd);
      return fd;
    }
    last = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::usleep(20'000);
  }
  fail(collective_failure::timeout, "socket communicator: connecting to rank 0 at " + host + ":"
                                        + std::to_string(port) + " failed until the deadline ("
                                        + last + ")");
}

class socket_communicator final : public communicator {
public:
  socket_communicator(int rank, int world, std::vector<int> peers, std::chrono::milliseconds t)
      : rank_(rank), world_(world), timeout_(t), peers_(std::move(peers)) {}

  ~socket_communicator() override {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  memory_space space() const override { return memory_space::host; }

  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void*) override {
    require(buffer != nullptr || count == 0, "all_reduce: buffer is null");
    run({collective_kind::all_reduce, op, dtype, count, -1}, buffer, count * size_of(dtype),
        buffer);
  }
  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void*) override {
    require((send != nullptr && recv != nullptr) || count == 0, "all_gather: a buffer is null");
    run({collective_kind::all_gather, reduce_op::sum, dtype, count, -1}, send,
        count * size_of(dtype), recv);
  }
  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root, void*) override {
    require(root >= 0 && root < world_, "broadcast: root " + std::to_string(root)
                                            + " is outside [0, " + std::to_string(world_) + ")");
    require(buffer != nullptr || count == 0, "broadcast: buffer is null");
    run({collective_kind::broadcast, reduce_op::sum, dtype, count, root}, buffer,
        count * size_of(dtype), buffer);
  }
  void barrier() override {
    run({collective_kind::barrier, reduce_op::sum, collective_dtype::int64, 0, -1}, nullptr, 0,
        nullptr);
  }
  int64_t agree(int64_t value, reduce_op op) override {
    all_reduce(&value, 1, collective_dtype::int64, op, nullptr);
    return value;
  }
  void synchronize() override {}

  void abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      reason_ = why;
      aborted_ = true;
    }
    // Peers blocked on these sockets see them close and fail at once.
    for (int fd : peers_)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    ledger_.finish_pending(collective_status::aborted);
  }
  bool aborted() const override { return aborted_; }
  const collective_ledger& ledger() const override { return ledger_; }

private:
  struct shape {
    collective_kind kind;
    reduce_op op;
    collective_dtype dtype;
    size_t count;
    int root;
  };

  void require(bool ok, const std::string& what) const {
    if (!ok) fail(collective_failure::invalid_argument, "socket communicator: " + what);
  }

  std::string name(int r) const { return "rank " + std::to_string(r); }

  // The collective's bytes on rank 0 from every rank (in rank order), the result back.
  void run(const shape& c, const void* send, size_t send_bytes, void* recv) {
    if (aborted_) {
      std::lock_guard<std::mutex> lock(mu_);
      fail(collective_failure::aborted,
           "socket communicator of rank " + std::to_string(rank_) + " was aborted: " + reason_);
    }
    const uint64_t seq = ledger_.enter(c.kind, c.op, c.dtype, c.count, c.root);
    const auto deadline = clock_type::now() + timeout_;
    frame mine;
    mine.kind = static_cast<uint8_t>(c.kind);
    mine.op = static_cast<uint8_t>(c.op);
    mine.dtype = static_cast<uint8_t>(c.dtype);
    mine.root = c.root;
    mine.rank = rank_;
    mine.seq = seq;
    mine.count = c.count;
    mine.bytes = send_bytes;
    try {
      if (world_ == 1)
        finish_alone(c, send, send_bytes, recv);
      else if (rank_ == 0)
        gather_reduce_scatter(c, mine, send, send_bytes, recv, deadline);
      else
        contribute(mine, send, send_bytes, recv, deadline, c);
      ledger_.finish(seq, collective_status::completed);
    } catch (const collective_error& e) {
      const auto status = e.kind() == collective_failure::timeout ? collective_status::timed_out
                          : aborted_                              ? collective_status::aborted
                                                                  : collective_status::failed;
      ledger_.finish(seq, status);
      std::string why = "rank " + std::to_string(rank_) + ": " + e.what();
      if (e.kind() == collective_failure::timeout) why += " after " + detail::seconds(timeout_);
      why += "; " + ledger_.tail();
      abort(why);
      throw collective_error(e.kind(), why);
    }
  }

  size_t result_bytes(const shape& c) const {
    if (c.kind == collective_kind::all_gather)
      return c.count * size_of(c.dtype) * static_cast<size_t>(world_);
    if (c.kind == collective_kind::barrier) return 0;
    return c.count * size_of(c.dtype);
  }

  void finish_alone(const shape& c, const void* send, size_t send_bytes, void* recv) {
    if (c.kind == collective_kind::all_gather && send_bytes > 0 && send != recv)
      std::memcpy(recv, send, send_bytes);
  }

  void contribute(const frame& mine, const void* send, size_t send_bytes, void* recv,
                  clock_type::time_point deadline, const shape& c) {
    const int fd = peers_[0];
    send_all(fd, &mine, sizeof mine, deadline, name(0));
    if (send_bytes > 0) send_all(fd, send, send_bytes, deadline, name(0));
    frame back;
    recv_all(fd, &back, sizeof back, deadline, name(0));
    if (back.magic != frame_magic || back.seq != mine.seq || back.bytes != result_bytes(c))
      fail(collective_failure::mismatch,
           "rank 0 answered collective #" + std::to_string(back.seq) + " with "
               + std::to_string(back.bytes) + " bytes to this rank's #" + std::to_string(mine.seq));
    if (back.bytes > 0) recv_all(fd, recv, back.bytes, deadline, name(0));
  }

  void gather_reduce_scatter(const shape& c, const frame& mine, const void* send, size_t send_bytes,
                             void* recv, clock_type::time_point deadline) {
    std::vector<std::vector<std::byte>> in(static_cast<size_t>(world_));
    for (int r = 1; r < world_; ++r) {
      frame f;
      recv_all(peers_[static_cast<size_t>(r)], &f, sizeof f, deadline, name(r));
      if (f.magic != frame_magic || f.seq != mine.seq || f.kind != mine.kind || f.op != mine.op
          || f.dtype != mine.dtype || f.count != mine.count || f.root != mine.root
          || f.bytes != mine.bytes)
        fail(collective_failure::mismatch, "collective mismatch: rank 0 entered " + describe(mine)
                                               + ", " + name(r) + " entered " + describe(f));
      in[static_cast<size_t>(r)].resize(f.bytes);
      if (f.bytes > 0)
        recv_all(peers_[static_cast<size_t>(r)], in[static_cast<size_t>(r)].data(), f.bytes,
                 deadline, name(r));
    }
    std::vector<const void*> parts(static_cast<size_t>(world_));
    parts[0] = send;
    for (int r = 1; r < world_; ++r)
      parts[static_cast<size_t>(r)] = in[static_cast<size_t>(r)].data();
    std::vector<std::byte> result(result_bytes(c));
    switch (c.kind) {
    case collective_kind::all_reduce:
      detail::reduce_in_rank_order(c.dtype, parts, c.count, c.op, result.data());
      break;
    case collective_kind::all_gather:
      for (int r = 0; r < world_; ++r)
        if (send_bytes > 0)
          std::memcpy(result.data() + static_cast<size_t>(r) * send_bytes,
                      parts[static_cast<size_t>(r)], send_bytes);
      break;
    case collective_kind::broadcast:
      if (send_bytes > 0)
        std::memcpy(result.data(), parts[static_cast<size_t>(c.root)], send_bytes);
      break;
    case collective_kind::barrier: break;
    }
    frame back = mine;
    back.rank = 0;
    back.bytes = result.size();
    for (int r = 1; r < world_; ++r) {
      send_all(peers_[static_cast<size_t>(r)], &back, sizeof back, deadline, name(r));
      if (!result.empty())
        send_all(peers_[static_cast<size_t>(r)], result.data(), result.size(), deadline, name(r));
    }
    if (!result.empty() && recv != nullptr) std::memcpy(recv, result.data(), result.size());
  }

  static std::string describe(const frame& f) {
    collective_record r;
    r.seq = f.seq;
    r.kind = static_cast<collective_kind>(f.kind);
    r.op = static_cast<reduce_op>(f.op);
    r.dtype = static_cast<collective_dtype>(f.dtype);
    r.count = f.count;
    r.root = f.root;
    return operation_name(r) + " #" + std::to_string(f.seq) + " of " + std::to_string(f.count);
  }

  const int rank_, world_;
  const std::chrono::milliseconds timeout_;
  std::vector<int> peers_; // rank 0: [world] (index r: rank r's socket); others: [1] rank 0's
  collective_ledger ledger_;
  mutable std::mutex mu_;
  std::atomic<bool> aborted_{false};
  std::string reason_;
};

} // namespace

std::unique_ptr<socket_listener> socket_listener::open(const std::string& host, uint16_t port) {
  addrinfo* res = resolve(host, port, true);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok =
      fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 64) == 0;
  ::freeaddrinfo(res);
  if (!ok) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fail(collective_failure::transport,
         "socket communicator: cannot listen on " + host + ":" + std::to_string(port) + ": " + why);
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return std::unique_ptr<socket_listener>(new socket_listener(fd, host, ntohs(bound.sin_port)));
}

socket_listener::~socket_listener() {
  if (fd_ >= 0) ::close(fd_);
}

std::string socket_listener::address() const {
  return host_ + ":" + std::to_string(port_);
}

int socket_listener::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::shared_ptr<communicator> make_socket_communicator(const std::string& address, int world_size,
                                                       int rank,
                                                       std::unique_ptr<socket_listener> listener,
                                                       const socket_options& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    fail(collective_failure::invalid_argument, "socket communicator: rank " + std::to_string(rank)
                                                   + " of world " + std::to_string(world_size)
                                                   + " is not a rank of the group");
  if (options.timeout.count() <= 0)
    fail(collective_failure::invalid_argument, "socket communicator: the timeout must be > 0");
  const auto [host, port] = split_address(address);
  const auto deadline = clock_type::now() + options.timeout;
  const hello mine{frame_magic, rank, world_size};
  if (rank != 0) {
    const int fd = connect_until(host, port, deadline);
    try {
      send_all(fd, &mine, sizeof mine, deadline, "rank 0");
      hello ack;
      recv_all(fd, &ack, sizeof ack, deadline, "rank 0");
      if (ack.magic != frame_magic || ack.world != world_size)
        fail(collective_failure::transport,
             "socket communicator: rank 0 at " + address + " answered as a group of "
                 + std::to_string(ack.world) + " ranks, this rank joins "
                 + std::to_string(world_size));
    } catch (...) {
      ::close(fd);
      throw;
    }
    return std::make_shared<socket_communicator>(rank, world_size, std::vector<int>{fd},
                                                 options.timeout);
  }
  if (!listener)
    fail(collective_failure::invalid_argument,
         "socket communicator: rank 0 needs the listener its id was made from");
  const int lfd = listener->release();
  std::vector<int> peers(static_cast<size_t>(world_size), -1);
  auto close_all = [&] {
    ::close(lfd);
    for (int fd : peers)
      if (fd >= 0) ::close(fd);
  };
  try {
    for (int joined = 1; joined < world_size;) {
      if (!wait_for(lfd, POLLIN, deadline)) {
        std::string missing;
        for (int r = 1; r < world_size; ++r)
          if (peers[static_cast<size_t>(r)] < 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        fail(collective_failure::timeout, "socket communicator: rank(s) " + missing
                                              + " did not join within "
                                              + detail::seconds(options.timeout));
      }
      const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      no_delay(fd);
      hello h;
      try {
        // A stranger that connects and says nothing must not hold the group's bootstrap up.
        const auto hello_deadline = std::min(deadline, clock_type::now() + hello_wait);
        recv_all(fd, &h, sizeof h, hello_deadline, "a joining rank");
      } catch (const collective_error&) {
        ::close(fd);
        continue; // not one of ours (or gone): keep listening
      }
      if (h.magic != frame_magic || h.world != world_size || h.rank <= 0 || h.rank >= world_size
          || peers[static_cast<size_t>(h.rank)] >= 0) {
        ::close(fd);
        continue;
      }
      send_all(fd, &mine, sizeof mine, deadline, "rank " + std::to_string(h.rank));
      peers[static_cast<size_t>(h.rank)] = fd;
      ++joined;
    }
  } catch (...) {
    close_all();
    throw;
  }
  ::close(lfd);
  return std::make_shared<socket_communicator>(0, world_size, std::move(peers), options.timeout);
}

} // namespace kvactor::comm
