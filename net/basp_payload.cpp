#include "net/basp_payload.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace kvactor {

namespace {

// CAF 0.17's binary format, as its binary_serializer writes it (checked against CAF's own
// encoder in basp_payload_test.cpp): integers big-endian; lengths and counts as unsigned LEB128
// ("varbyte"); a node id as the atom naming its kind, then its data (for the default kind: a
// 4-byte process id and a 20-byte host id; the empty atom for no node); an actor reference as
// its 8-byte id and its node; an error as its 1-byte code, its 8-byte category and its context,
// a message; a message as a 16-bit zero, the string "@<>+name+name...", then each element.
constexpr uint64_t default_node_kind = 0x00003e9aab9bac79; // atom("default")
constexpr uint64_t no_node = 0xf;                          // the empty atom
constexpr size_t default_node_data = 4 + 20;
constexpr int deepest_message = 4;
constexpr size_t longest_name_shown = 64;

// How far the check could follow a message: to its end, or to an element whose end it cannot
// see (its size unknown, or past the bytes kept), from where it cannot tell the next one's start.
enum class followed : uint8_t { to_the_end, to_an_unknown_element };

// A type name as a log line may show it: printable ASCII, the rest escaped, at most 64 bytes.
std::string shown(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, longest_name_shown)) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return name.size() > longest_name_shown ? out + "..." : out;
}

class payload_reader {
public:
  payload_reader(const std::byte* data, size_t n, bool whole) : data_(data), n_(n), whole_(whole) {}

  bool skip(size_t k, std::string_view what) {
    if (n_ - at_ < k) return out_of_bytes(what);
    at_ += k;
    return true;
  }
  bool u8(uint8_t& x, std::string_view what) { return big_endian(x, what); }
  bool u16(uint16_t& x, std::string_view what) { return big_endian(x, what); }
  bool u64(uint64_t& x, std::string_view what) { return big_endian(x, what); }

  bool varbyte(uint32_t& x, std::string_view what) {
    x = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      uint8_t b = 0;
      if (!u8(b, what)) return false;
      x |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return fail(fmt::format("{} at byte {}: a length of more than 5 bytes", what, at_));
  }

  bool text(std::string& s, std::string_view what) {
    uint32_t len = 0;
    if (!varbyte(len, what)) return false;
    if (n_ - at_ < len) return out_of_bytes(what);
    s.assign(reinterpret_cast<const char*>(data_ + at_), len);
    at_ += len;
    return true;
  }

  // An element's bytes: skipped; or, when they run past the bytes kept of a longer payload, the
  // element is one whose end the check cannot see.
  bool element_bytes(size_t k, std::string_view what, followed& how) {
    if (n_ - at_ >= k || whole_) return skip(k, what);
    return past_the_cut(how);
  }
  // An element's string: its length, then its bytes; either may run past the bytes kept.
  bool element_text(std::string_view what, followed& how) {
    if (!whole_ && !length_ends_here()) return past_the_cut(how);
    uint32_t len = 0;
    return varbyte(len, what) && element_bytes(len, what, how);
  }

  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }
  const std::string& why() const { return why_; }

private:
  template <class T>
  bool big_endian(T& x, std::string_view what) {
    if (n_ - at_ < sizeof(T)) return out_of_bytes(what);
    x = read_big_endian<T>(data_ + at_);
    at_ += sizeof(T);
    return true;
  }

  // Whether a varbyte's last byte (no continuation bit) lies within the bytes kept.
  bool length_ends_here() const {
    for (size_t i = at_; i < n_ && i < at_ + 5; ++i)
      if ((std::to_integer<uint8_t>(data_[i]) & 0x80) == 0) return true;
    return n_ - at_ >= 5;
  }

  bool past_the_cut(followed& how) {
    at_ = n_;
    how = followed::to_an_unknown_element;
    return true;
  }

  bool out_of_bytes(std::string_view what) {
    if (whole_)
      return fail(fmt::format("the payload ends inside {} (byte {} of {})", what, at_, n_));
    return fail(fmt::format("{} lies past the first {} bytes, all the guard reads of a payload",
                            what, basp_payload_check_bytes));
  }

  const std::byte* data_;
  size_t n_;
  size_t at_ = 0;
  bool whole_;
  std::string why_;
};

bool node_id(payload_reader& r) {
  uint64_t kind = 0;
  if (!r.u64(kind, "a node id")) return false;
  if (kind == no_node) return true;
  if (kind == default_node_kind) return r.skip(default_node_data, "a node id");
  // Another kind (CAF 0.17 knows "uri", whose decoder throws on a bad variant like config_value's).
  return r.fail(fmt::format("a node id of kind {:#018x}: CAF 0.17 peers send only the default "
                            "kind",
                            kind));
}

bool actor_reference(payload_reader& r) {
  uint64_t id = 0;
  return r.u64(id, "an actor reference") && node_id(r);
}

bool string_list(payload_reader& r, std::string_view what) {
  uint32_t count = 0;
  std::string s;
  if (!r.varbyte(count, what)) return false;
  for (uint32_t i = 0; i < count; ++i)
    if (!r.text(s, what)) return false;
  return true;
}

std::optional<size_t> fixed_size(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, size_t>, 17> sizes = {{
      {"@i8", 1},
      {"@u8", 1},
      {"bool", 1},
      {"@i16", 2},
      {"@u16", 2},
      {"@i32", 4},
      {"@u32", 4},
      {"float", 4},
      {"@i64", 8},
      {"@u64", 8},
      {"double", 8},
      {"@atom", 8},
      {"@timespan", 8},
      {"@timestamp", 8},
      {"@message_id", 8},
      {"@duration", 12},
      {"@unit", 0},
  }};
  for (const auto& [n, size] : sizes)
    if (n == name) return size;
  return std::nullopt;
}

// Elements that hold a message: an error's context, a down or exit message's reason, a message.
bool holds_a_message(std::string_view name) {
  return name == "@error" || name == "@down" || name == "@exit" || name == "@message";
}

// Elements the check reads: sized, or holding a message it follows.
bool read_by_the_check(std::string_view name) {
  return fixed_size(name).has_value() || holds_a_message(name) || name == "@str"
         || name == "@strvec" || name == "@actor" || name == "@addr" || name == "@strong_actor_ptr"
         || name == "@node";
}

// Elements passed unread: kvactor's own types and CAF's that hold no variant and no message.
// Every other name is refused, CAF's config types first among them (a caf::config_value, CAF's
// settings, lists and dictionaries of them, lists of messages): kvactor never sends them.
bool passed_unread(std::string_view name) {
  static constexpr std::array<std::string_view, 10> caf_plain = {
      "@strset", "@strmap", "@charbuf", "@actorvec",       "@addrvec",
      "@u16str", "@u32str", "@ldouble", "@weak_actor_ptr", "std::vector<uint64_t>",
  };
  if (name.rfind("kvactor::", 0) == 0 || name.rfind("std::vector<kvactor::", 0) == 0) return true;
  for (const auto& plain : caf_plain)
    if (plain == name) return true;
  return false;
}

bool message(payload_reader& r, int depth, followed& how);

bool error_value(payload_reader& r, int depth, followed& how) {
  uint8_t code = 0;
  uint64_t category = 0;
  return r.u8(code, "an error's code") && r.u64(category, "an error's category")
         && message(r, depth + 1, how);
}

// One element the check reads, `how` set to to_an_unknown_element when its end is not seen.
bool element(payload_reader& r, std::string_view name, int depth, followed& how) {
  if (const auto size = fixed_size(name)) return r.element_bytes(*size, name, how);
  if (name == "@str") return r.element_text(name, how);
  if (name == "@strvec") {
    uint32_t count = 0;
    if (!r.varbyte(count, name)) return false;
    for (uint32_t i = 0; i < count && how == followed::to_the_end; ++i)
      if (!r.element_text(name, how)) return false;
    return true;
  }
  if (name == "@actor" || name == "@addr" || name == "@strong_actor_ptr") return actor_reference(r);
  if (name == "@node") return node_id(r);
  if (name == "@error") return error_value(r, depth, how);
  if (name == "@down" || name == "@exit") return actor_reference(r) && error_value(r, depth, how);
  return message(r, depth + 1, how); // "@message"
}

std::vector<std::string_view> element_names(std::string_view names) {
  std::vector<std::string_view> out;
  names.remove_prefix(3); // "@<>"
  while (!names.empty()) {
    names.remove_prefix(1); // '+'
    const auto end = names.find('+');
    out.push_back(names.substr(0, end));
    names = end == std::string_view::npos ? std::string_view{} : names.substr(end);
  }
  return out;
}

bool only_known_names(payload_reader& r, const std::vector<std::string_view>& names) {
  for (const auto& name : names)
    if (!read_by_the_check(name) && !passed_unread(name))
      return r.fail(fmt::format("a message carries a {}, a type kvactor never sends", shown(name)));
  return true;
}

bool elements(payload_reader& r, const std::vector<std::string_view>& names, int depth,
              followed& how) {
  std::string_view unseen;
  for (const auto& name : names) {
    if (!unseen.empty()) {
      if (holds_a_message(name))
        return r.fail(fmt::format("a {} follows a {}, whose end the guard cannot see, so it "
                                  "cannot be checked",
                                  name, shown(unseen)));
      continue;
    }
    if (passed_unread(name)) {
      how = followed::to_an_unknown_element;
    } else if (!element(r, name, depth, how)) {
      return false;
    }
    if (how == followed::to_an_unknown_element) unseen = name;
  }
  return true;
}

bool message(payload_reader& r, int depth, followed& how) {
  if (depth > deepest_message)
    return r.fail(fmt::format("messages nested more than {} deep", deepest_message));
  uint16_t type_number = 0;
  std::string names;
  if (!r.u16(type_number, "a message's type number") || !r.text(names, "a message's type names"))
    return false;
  if (type_number != 0)
    return r.fail(
        fmt::format("a message's type number is {}, where CAF 0.17 writes 0", type_number));
  if (names.rfind("@<>", 0) != 0 || (names.size() > 3 && names[3] != '+'))
    return r.fail(
        fmt::format("a message's type names \"{}\" do not start with \"@<>\"", shown(names)));
  const auto list = element_names(names);
  return only_known_names(r, list) && elements(r, list, depth, how);
}

bool forwarding_stack(payload_reader& r) {
  uint32_t count = 0;
  if (!r.varbyte(count, "the forwarding stack")) return false;
  for (uint32_t i = 0; i < count; ++i)
    if (!actor_reference(r)) return false;
  return true;
}

// Each operation's payload, as CAF 0.17's BASP instance reads it.
bool operation_payload(payload_reader& r, basp_operation op) {
  auto how = followed::to_the_end;
  uint64_t actor = 0;
  switch (op) {
  case basp_operation::server_handshake:
    return node_id(r) && string_list(r, "the application ids") && r.u64(actor, "the actor id")
           && string_list(r, "the actor's interface");
  case basp_operation::client_handshake: return node_id(r);
  case basp_operation::monitor_message: return node_id(r) && node_id(r);
  case basp_operation::down_message: return node_id(r) && node_id(r) && error_value(r, 0, how);
  case basp_operation::routed_message:
    return node_id(r) && node_id(r) && forwarding_stack(r) && message(r, 0, how);
  case basp_operation::direct_message: return forwarding_stack(r) && message(r, 0, how);
  default: return true; // heartbeats carry nothing
  }
}

} // namespace

bool basp_payload_is_checked(basp_operation op) {
  return op != basp_operation::heartbeat;
}

status check_basp_payload(basp_operation op, const std::byte* data, size_t n, bool whole) {
  payload_reader r(data, n, whole);
  if (operation_payload(r, op)) return ok();
  return make_error(
      errc::invalid_argument,
      fmt::format("{} frame refused: {}", basp_operation_name(static_cast<uint8_t>(op)), r.why()));
}

} // namespace kvactor
