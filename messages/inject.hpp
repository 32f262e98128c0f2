// Live injection: one typed message, carried as its MessagePack envelope (codec.hpp), for one
// named actor of a running kvactor process (`kvactor inject`, `--inject-port`).
#pragma once

#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace kvactor {

struct inject_request {
  std::string target;         // "driver", "rank[N]"
  std::vector<char> envelope; // [type name, schema version, payload]

  bool operator==(const inject_request&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, inject_request& x) {
  return f(caf::meta::type_name("kvactor::inject_request"), x.target, x.envelope);
}

/// What the target answered: a typed reply as its envelope (empty when the reply is no message
/// type, e.g. a count) and one readable line.
struct inject_reply {
  std::string type;
  std::vector<char> envelope;
  std::string summary;

  bool operator==(const inject_reply&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, inject_reply& x) {
  return f(caf::meta::type_name("kvactor::inject_reply"), x.type, x.envelope, x.summary);
}

} // namespace kvactor
