#include "net/frame_guard.hpp"

#include "net/basp_payload.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace kvactor {

namespace {

template <class T>
void write_big_endian(std::byte* p, T x) {
  for (size_t i = sizeof(T); i-- > 0;) {
    p[i] = static_cast<std::byte>(x & 0xff);
    x = static_cast<T>(x >> 8);
  }
}

error refuse(const basp_header& h, const std::string& why) {
  return make_error(errc::invalid_argument,
                    fmt::format("{} frame refused: {}", basp_operation_name(h.operation), why));
}

constexpr uint8_t known_flags = 0x01 | 0x02; // named receiver, select connection

// The handshake this side expects from its peer, and the one it must never receive.
basp_operation peer_handshake(connection_side side) {
  return side == connection_side::accepted ? basp_operation::client_handshake
                                           : basp_operation::server_handshake;
}

status check_framing(const basp_header& h, const frame_limits& limits) {
  if (h.operation > static_cast<uint8_t>(basp_operation::heartbeat))
    return refuse(h, fmt::format("operation {:#04x} is not a BASP operation", h.operation));
  if (h.padding1 != 0 || h.padding2 != 0)
    return refuse(
        h, fmt::format("padding bytes are {:#04x} {:#04x}, not zero", h.padding1, h.padding2));
  if ((h.flags & ~known_flags) != 0)
    return refuse(h, fmt::format("flags {:#04x} set bits BASP does not define", h.flags));
  if (h.payload_len > limits.max_message_bytes)
    return refuse(h, fmt::format("payload_len {} bytes is larger than the bound of {} bytes "
                                 "(--max-message-bytes); nothing was allocated",
                                 h.payload_len, limits.max_message_bytes));
  return ok();
}

status check_handshake(const basp_header& h, connection_side side, const frame_limits& limits) {
  const auto op = static_cast<basp_operation>(h.operation);
  if (op != peer_handshake(side))
    return refuse(h, side == connection_side::accepted
                         ? "a peer that connected to us sent a server handshake"
                         : "the peer we connected to sent a client handshake");
  if (h.payload_len == 0) return refuse(h, "payload_len 0: a handshake carries a payload");
  if (h.payload_len > limits.max_handshake_bytes)
    return refuse(h, fmt::format("payload_len {} bytes is larger than a handshake's bound of {} "
                                 "bytes",
                                 h.payload_len, limits.max_handshake_bytes));
  if (op == basp_operation::server_handshake && h.operation_data == 0)
    return refuse(h, "operation_data 0: a server handshake carries its BASP version");
  if (op == basp_operation::client_handshake && (h.source_actor != 0 || h.dest_actor != 0))
    return refuse(h, fmt::format("source_actor {} / dest_actor {}: a client handshake names no "
                                 "actor",
                                 h.source_actor, h.dest_actor));
  return ok();
}

// operation_data is the message id. Its category bits 60-61 say 0 urgent, 1 normal, 2 upstream,
// 3 downstream; CAF 0.17 files a stream category into the actor's stream queues and reads the
// content as a stream message without checking it (a segfault for anything else). kvactor uses
// no CAF streams, so no peer of ours sends them.
status check_message_id(const basp_header& h) {
  const auto category = (h.operation_data >> 60) & 0x3;
  if (category >= 2)
    return refuse(h, fmt::format("operation_data {:#018x}: message category {} is a CAF stream "
                                 "message, which kvactor never sends",
                                 h.operation_data, category == 2 ? "upstream" : "downstream"));
  return ok();
}

status check_message(const basp_header& h) {
  switch (static_cast<basp_operation>(h.operation)) {
  case basp_operation::direct_message:
  case basp_operation::routed_message:
    if (h.dest_actor == 0) return refuse(h, "dest_actor 0: a message needs a receiver");
    if (h.payload_len == 0) return refuse(h, "payload_len 0: a message carries a payload");
    return check_message_id(h);
  case basp_operation::monitor_message:
    if (h.payload_len == 0) return refuse(h, "payload_len 0: a monitor message names nodes");
    if (h.operation_data != 0) return refuse(h, "operation_data is not 0");
    return ok();
  case basp_operation::down_message:
    if (h.source_actor == 0 || h.dest_actor != 0)
      return refuse(h, fmt::format("source_actor {} / dest_actor {}: a down message names the "
                                   "actor that went down and no receiver",
                                   h.source_actor, h.dest_actor));
    if (h.payload_len == 0 || h.operation_data != 0)
      return refuse(h, "a down message carries a payload and no operation_data");
    return ok();
  case basp_operation::heartbeat:
    if (h.payload_len != 0 || h.operation_data != 0 || h.source_actor != 0 || h.dest_actor != 0)
      return refuse(h, "a heartbeat carries nothing but its operation");
    return ok();
  default: return ok(); // handshakes are checked by check_handshake
  }
}

bool is_handshake(const basp_header& h) {
  return h.operation == static_cast<uint8_t>(basp_operation::server_handshake)
         || h.operation == static_cast<uint8_t>(basp_operation::client_handshake);
}

} // namespace

const char* basp_operation_name(uint8_t op) {
  static constexpr const char* names[] = {"server_handshake", "client_handshake", "direct_message",
                                          "routed_message",   "monitor_message",  "down_message",
                                          "heartbeat"};
  return op < std::size(names) ? names[op] : "unknown";
}

basp_header decode_basp_header(const std::array<std::byte, basp_header::size>& b) {
  basp_header h;
  h.operation = std::to_integer<uint8_t>(b[0]);
  h.padding1 = std::to_integer<uint8_t>(b[1]);
  h.padding2 = std::to_integer<uint8_t>(b[2]);
  h.flags = std::to_integer<uint8_t>(b[3]);
  h.payload_len = read_big_endian<uint32_t>(&b[4]);
  h.operation_data = read_big_endian<uint64_t>(&b[8]);
  h.source_actor = read_big_endian<uint64_t>(&b[16]);
  h.dest_actor = read_big_endian<uint64_t>(&b[24]);
  return h;
}

std::array<std::byte, basp_header::size> encode_basp_header(const basp_header& h) {
  std::array<std::byte, basp_header::size> b{};
  b[0] = std::byte{h.operation};
  b[1] = std::byte{h.padding1};
  b[2] = std::byte{h.padding2};
  b[3] = std::byte{h.flags};
  write_big_endian(&b[4], h.payload_len);
  write_big_endian(&b[8], h.operation_data);
  write_big_endian(&b[16], h.source_actor);
  write_big_endian(&b[24], h.dest_actor);
  return b;
}

status check_basp_header(const basp_header& h, connection_side side, bool handshaken,
                         const frame_limits& limits) {
  if (auto framed = check_framing(h, limits); !framed) return framed;
  if (is_handshake(h)) return check_handshake(h, side, limits);
  if (!handshaken) return refuse(h, "the peer has not sent its handshake yet");
  return check_message(h);
}

status basp_frame_guard::feed(const std::byte* data, size_t n) {
  if (refused_) return refusal_;
  while (n > 0) {
    if (payload_left_ > 0) {
      const auto skip = static_cast<size_t>(std::min<uint64_t>(payload_left_, n));
      take_payload(data, skip);
      if (payload_wanted_ > 0 && payload_.size() == payload_wanted_)
        if (auto judged = judge_payload(); !judged) return judged;
      payload_left_ -= skip;
      data += skip;
      n -= skip;
      continue;
    }
    const size_t take = std::min(basp_header::size - header_fill_, n);
    std::memcpy(header_.data() + header_fill_, data, take);
    header_fill_ += take;
    data += take;
    n -= take;
    if (header_fill_ < basp_header::size) break;
    if (auto taken = take_header(); !taken) return taken;
  }
  return ok();
}

status basp_frame_guard::take_header() {
  header_fill_ = 0;
  const auto h = decode_basp_header(header_);
  if (auto checked = check_basp_header(h, side_, handshaken_, limits_); !checked)
    return refuse(checked.err());
  if (is_handshake(h)) handshaken_ = true;
  payload_left_ = h.payload_len;
  const bool judged = basp_payload_is_checked(static_cast<basp_operation>(h.operation));
  payload_wanted_ =
      judged ? static_cast<size_t>(std::min<uint64_t>(h.payload_len, basp_payload_check_bytes)) : 0;
  payload_header_ = h;
  payload_.clear();
  payload_.reserve(payload_wanted_);
  ++frames_;
  return ok();
}

void basp_frame_guard::take_payload(const std::byte* data, size_t n) {
  if (payload_.size() >= payload_wanted_) return;
  const auto keep = std::min(n, payload_wanted_ - payload_.size());
  payload_.insert(payload_.end(), data, data + keep);
}

status basp_frame_guard::judge_payload() {
  const bool whole = payload_header_.payload_len <= basp_payload_check_bytes;
  auto judged = check_basp_payload(static_cast<basp_operation>(payload_header_.operation),
                                   payload_.data(), payload_.size(), whole);
  payload_wanted_ = 0;
  std::vector<std::byte>().swap(payload_); // a connection keeps no buffer between messages
  if (!judged) return refuse(judged.err());
  return ok();
}

status basp_frame_guard::refuse(error why) {
  refused_ = true;
  refusal_ = std::move(why);
  return refusal_;
}

} // namespace kvactor
