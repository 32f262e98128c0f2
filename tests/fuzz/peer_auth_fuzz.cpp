// libFuzzer target: the bytes a peer sends during the cookie proof (peer_auth), before any BASP
// byte, in the chunk sizes the input's first byte chooses: to a node or an injection port (the
// accepting side, which reads a client's greeting and proof) and to a driver (the connecting
// side, which reads a server's greeting and proof). Without the cookie no input may complete the
// proof, and none may crash or make the reader take more than the peer owes.
#include <algorithm>
#include <cstdlib>

#include "net/peer_auth.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 48;
  const auto* bytes = reinterpret_cast<const std::byte*>(data + 1);
  const size_t n = size - 1;
  for (auto side : {connection_side::accepted, connection_side::connected}) {
    peer_auth auth(side, "fuzz-cookie", peer_auth::nonce{});
    (void)auth.take_output();
    size_t at = 0;
    while (at < n && auth.wanted() > 0) {
      const size_t take = std::min({chunk, n - at, auth.wanted()});
      if (!auth.feed(bytes + at, take)) break;
      at += take;
      (void)auth.take_output();
    }
    if (auth.done()) std::abort(); // a proof without the cookie
  }
  return 0;
}
