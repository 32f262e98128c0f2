// libFuzzer target: the bytes on a step channel after its proof (net/step_frame.hpp),
// in the chunk sizes the input's first byte chooses, read as a node reads a driver's steps and as
// a driver reads a node's answers and refusals. No input may crash the reader or a frame's parser,
// and a step that parses must come out of its own encoding unchanged.
#include <cstdlib>

#include "net/step_frame.hpp"

namespace {

void parse(const kvactor::step_frame_body& frame) {
  using namespace kvactor;
  switch (frame.kind) {
  case step_frame_kind::step: {
    auto s = read_step(frame.body);
    if (!s) return;
    step_frame_reader again{1 << 20};
    const auto bytes = step_frame(s->seq, s->step);
    if (!again.feed(bytes.data(), bytes.size())) std::abort();
    auto back = again.next();
    if (!back || back->body != frame.body) std::abort(); // the encoding round-trips
    return;
  }
  case step_frame_kind::answer: (void)read_answer(frame.body); return;
  case step_frame_kind::refusal: (void)read_refusal(frame.body); return;
  }
  std::abort(); // the reader let an unknown kind through
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const auto* bytes = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  step_frame_reader reader{1 << 20};
  for (size_t at = 0; at < n; at += chunk) {
    if (!reader.feed(bytes + at, std::min(chunk, n - at))) break;
    while (auto frame = reader.next())
      parse(*frame);
  }
  return 0;
}
