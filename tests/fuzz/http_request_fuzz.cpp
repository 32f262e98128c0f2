// libFuzzer target: the bytes a client sends on a connection of the HTTP server, fed to its
// request parser in the chunk sizes the input's first byte chooses, as a session feeds it (the
// unconsumed rest kept and fed again with the next bytes; a new parser after each request). Each
// request ends in a request or a refusal (400, 413, 431), never a crash, and the bytes held back
// stay bounded by the header limit.
#include <algorithm>
#include <string>

#include "net/http/request_parser.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

constexpr kvactor::http::parse_limits limits{.max_body_bytes = 4096, .max_header_bytes = 1024};

void require(bool ok) {
  if (!ok) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor::http;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view bytes = kvactor::fuzz::text_of(data + 1, size - 1);
  auto parser = std::make_unique<request_parser>(limits);
  std::string pending;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    pending.append(bytes.substr(at, chunk));
    for (;;) {
      const size_t used = parser->feed(pending);
      require(used <= pending.size());
      pending.erase(0, used);
      if (const int status = parser->refused()) {
        require(status == 400 || status == 413 || status == 431);
        require(!parser->done());
        return 0; // the session answers and closes
      }
      if (!parser->done()) break;
      const request req = parser->take();
      require(!req.method.empty() && req.body.size() <= limits.max_body_bytes);
      parser = std::make_unique<request_parser>(limits);
    }
    require(pending.size() <= limits.max_header_bytes + chunk);
  }
  return 0;
}
