#include "messages/trace.hpp"

#include <array>
#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>

namespace kvactor {

namespace {

constexpr std::array<char, 8> magic{'K', 'V', 'T', 'R', 'A', 'C', 'E', '\0'};

void put_u32(std::ostream& out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
                         static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 24) & 0xff)};
  out.write(bytes, 4);
}

uint32_t get_u32(const unsigned char* b) {
  return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

error corrupt(uint64_t index, const std::string& why) {
  return make_error(errc::parse_error, fmt::format("trace record {}: {}", index, why));
}

} // namespace

trace_writer::trace_writer(std::ostream& out) : out_(out) {
  out_.write(magic.data(), magic.size());
  put_u32(out_, trace_schema_version);
}

status trace_writer::write(int64_t timestamp_ns, std::string sender, std::string receiver,
                           std::string type, std::vector<char> payload) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(6);
  pk.pack(count_);
  pk.pack(timestamp_ns);
  pk.pack(sender);
  pk.pack(receiver);
  pk.pack(type);
  pk.pack_bin(static_cast<uint32_t>(payload.size()));
  pk.pack_bin_body(payload.data(), static_cast<uint32_t>(payload.size()));
  if (buf.size() > max_trace_record_bytes)
    return make_error(errc::invalid_argument,
                      fmt::format("trace record {}: {} bytes exceed the {} byte limit", count_,
                                  buf.size(), max_trace_record_bytes));
  put_u32(out_, static_cast<uint32_t>(buf.size()));
  out_.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (!out_)
    return make_error(errc::io_error, fmt::format("trace record {}: write failed", count_));
  ++count_;
  return ok();
}

trace_reader::trace_reader(std::istream& in) : in_(in) {
  std::array<char, 8> head{};
  unsigned char version[4] = {};
  in_.read(head.data(), head.size());
  if (in_.gcount() != static_cast<std::streamsize>(head.size()) || head != magic) {
    failure_ =
        make_error(errc::parse_error, "trace header: not a kvactor trace (no KVTRACE magic)");
    return;
  }
  in_.read(reinterpret_cast<char*>(version), 4);
  if (in_.gcount() != 4) {
    failure_ = make_error(errc::parse_error, "trace header: truncated before the schema version");
    return;
  }
  if (auto v = get_u32(version); v != trace_schema_version)
    failure_ = make_error(errc::parse_error,
                          fmt::format("trace header: schema version {}, this build reads {}", v,
                                      trace_schema_version));
}

expected<std::optional<trace_record>> trace_reader::next() {
  if (failure_) return *failure_;
  const uint64_t index = next_index_;
  unsigned char len_bytes[4] = {};
  in_.read(reinterpret_cast<char*>(len_bytes), 4);
  if (in_.gcount() == 0) return std::optional<trace_record>{};
  auto fail = [&](std::string why) -> error {
    failure_ = corrupt(index, std::move(why));
    return *failure_;
  };
  if (in_.gcount() != 4) return fail("truncated in its length prefix");
  const uint32_t len = get_u32(len_bytes);
  if (len == 0 || len > max_trace_record_bytes)
    return fail(fmt::format("length {} is outside [1, {}]", len, max_trace_record_bytes));
  std::vector<char> body(len);
  in_.read(body.data(), len);
  if (static_cast<uint32_t>(in_.gcount()) != len)
    return fail(fmt::format("truncated: {} of {} bytes", in_.gcount(), len));
  trace_record r;
  try {
    // Forged length headers must not allocate more than the record can hold.
    const msgpack::unpack_limit limit{6, 0, len, len, 0, 2};
    auto handle = msgpack::unpack(body.data(), body.size(), nullptr, nullptr, limit);
    const auto& o = handle.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 6)
      return fail("not a [index, timestamp, sender, receiver, type, payload] array");
    const auto* f = o.via.array.ptr;
    r.index = f[0].as<uint64_t>();
    r.timestamp_ns = f[1].as<int64_t>();
    r.sender = f[2].as<std::string>();
    r.receiver = f[3].as<std::string>();
    r.type = f[4].as<std::string>();
    if (f[5].type != msgpack::type::BIN) return fail("payload is not a byte string");
    r.payload.assign(f[5].via.bin.ptr, f[5].via.bin.ptr + f[5].via.bin.size);
  } catch (const std::exception& e) {
    return fail(fmt::format("not MessagePack of a record: {}", e.what()));
  }
  if (r.index != index)
    return fail(fmt::format("index {} out of order (expected {})", r.index, index));
  ++next_index_;
  return std::optional<trace_record>{std::move(r)};
}

expected<std::vector<trace_record>> trace_reader::read_all() {
  std::vector<trace_record> out;
  while (true) {
    auto r = next();
    if (!r) return r.err();
    if (!*r) return out;
    out.push_back(std::move(**r));
  }
}

} // namespace kvactor
