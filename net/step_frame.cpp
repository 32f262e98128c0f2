#include "net/step_frame.hpp"

#include <cstring>

#include <fmt/format.h>

#include "messages/codec.hpp"

namespace kvactor {

namespace {

template <class T>
void put(std::vector<char>& out, T v) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(v);
  for (int i = static_cast<int>(sizeof(T)) - 1; i >= 0; --i)
    out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

template <class T>
T get(const char* p) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    u = static_cast<U>((u << 8) | static_cast<unsigned char>(p[i]));
  return static_cast<T>(u);
}

// A frame of `kind`: the header with room for the body, whose length is filled in by finish().
std::vector<char> start_frame(step_frame_kind kind, size_t body_hint) {
  std::vector<char> out;
  out.reserve(step_frame_header + body_hint);
  put<uint32_t>(out, 0);
  out.push_back(static_cast<char>(kind));
  out.push_back(static_cast<char>(step_frame_version));
  return out;
}

std::vector<char> finish(std::vector<char> frame) {
  const auto length = static_cast<uint32_t>(frame.size() - 4);
  for (int i = 0; i < 4; ++i)
    frame[static_cast<size_t>(i)] = static_cast<char>((length >> (8 * (3 - i))) & 0xff);
  return frame;
}

error malformed(const std::string& what) {
  return make_error(errc::parse_error, "step channel: " + what);
}

} // namespace

std::vector<char> step_frame(uint64_t seq, const node_step& step) {
  auto out = start_frame(step_frame_kind::step, 20 + 4 * step.slots.size() + step.plan.size());
  put<uint64_t>(out, seq);
  put<uint32_t>(out, static_cast<uint32_t>(step.slots.size()));
  for (auto s : step.slots)
    put<int32_t>(out, s);
  put<int64_t>(out, step.answer_within_ms);
  out.insert(out.end(), step.plan.begin(), step.plan.end());
  return finish(std::move(out));
}

std::vector<char> answer_frame(const node_step_done& done) {
  auto body = encode(done);
  auto out = start_frame(step_frame_kind::answer, body.size());
  out.insert(out.end(), body.begin(), body.end());
  return finish(std::move(out));
}

std::vector<char> refusal_frame(uint64_t seq, const error& why) {
  auto body = encode(why);
  auto out = start_frame(step_frame_kind::refusal, 8 + body.size());
  put<uint64_t>(out, seq);
  out.insert(out.end(), body.begin(), body.end());
  return finish(std::move(out));
}

expected<sequenced_step> read_step(const std::vector<char>& body) {
  if (body.size() < 12)
    return malformed(fmt::format("a step frame of 12 bytes or more, found {}", body.size()));
  sequenced_step out;
  out.seq = get<uint64_t>(body.data());
  const auto n = get<uint32_t>(body.data() + 8);
  const size_t fixed = 12 + 4 * static_cast<size_t>(n) + 8;
  if (body.size() < fixed)
    return malformed(fmt::format("a step frame names {} slots but holds {} bytes", n, body.size()));
  auto& step = out.step;
  step.slots.reserve(n);
  for (size_t i = 0; i < n; ++i)
    step.slots.push_back(get<int32_t>(body.data() + 12 + 4 * i));
  step.answer_within_ms = get<int64_t>(body.data() + fixed - 8);
  if (step.answer_within_ms < 0)
    return malformed(fmt::format("answer_within_ms {} is negative", step.answer_within_ms));
  step.plan.assign(body.begin() + static_cast<std::ptrdiff_t>(fixed), body.end());
  return out;
}

expected<step_refusal> read_refusal(const std::vector<char>& body) {
  if (body.size() < 8)
    return malformed(fmt::format("a refusal frame of 8 bytes or more, found {}", body.size()));
  step_refusal out;
  out.seq = get<uint64_t>(body.data());
  if (auto st = decode_into(body.data() + 8, body.size() - 8, out.why); !st) return st.err();
  return out;
}

expected<node_step_done> read_answer(const std::vector<char>& body) {
  return decode<node_step_done>(body);
}

status step_frame_reader::check_header(const char* head, uint32_t& length) const {
  length = get<uint32_t>(head);
  const auto kind = static_cast<uint8_t>(head[4]);
  const auto version = static_cast<uint8_t>(head[5]);
  if (length < 2 || length - 2 > max_)
    return malformed(fmt::format("a frame of {} bytes; the bound is {} (--max-message-bytes)",
                                 length, max_ + 2));
  if (kind < static_cast<uint8_t>(step_frame_kind::step)
      || kind > static_cast<uint8_t>(step_frame_kind::refusal))
    return malformed(fmt::format("frame kind {} is not step (1), answer (2) or refusal (3)", kind));
  if (version != step_frame_version)
    return malformed(
        fmt::format("frame version {}; this build speaks {}", version, step_frame_version));
  return ok();
}

status step_frame_reader::feed(const char* data, size_t n) {
  if (refused_) return *refused_;
  buf_.insert(buf_.end(), data, data + n);
  size_t at = 0;
  while (buf_.size() - at >= step_frame_header) {
    uint32_t length = 0;
    if (auto checked = check_header(buf_.data() + at, length); !checked) {
      refused_ = checked.err();
      buf_.clear();
      return *refused_;
    }
    if (buf_.size() - at < 4 + static_cast<size_t>(length)) break;
    const auto body = buf_.begin() + static_cast<std::ptrdiff_t>(at + step_frame_header);
    ready_.push_back(
        {static_cast<step_frame_kind>(buf_[at + 4]), std::vector<char>(body, body + (length - 2))});
    at += 4 + length;
  }
  buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(at));
  return ok();
}

std::optional<step_frame_body> step_frame_reader::next() {
  if (taken_ == ready_.size()) {
    ready_.clear();
    taken_ = 0;
    return std::nullopt;
  }
  return std::move(ready_[taken_++]);
}

} // namespace kvactor
