// libFuzzer target: the bytes a peer sends on a node's or an injection port's connection, fed to
// the BASP frame guard in the chunk sizes the input's first byte chooses, as the accepting side
// and as the connecting side. The guard must refuse what CAF cannot take, never crash.
#include <algorithm>

#include "net/frame_guard.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const auto* bytes = reinterpret_cast<const std::byte*>(data + 1);
  const size_t n = size - 1;
  for (auto side : {connection_side::accepted, connection_side::connected}) {
    frame_limits limits;
    limits.max_message_bytes = uint64_t{1} << 20;
    basp_frame_guard guard(side, limits);
    for (size_t at = 0; at < n; at += chunk)
      if (!guard.feed(bytes + at, std::min(chunk, n - at))) break;
  }
  return 0;
}
