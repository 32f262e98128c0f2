// libFuzzer target for the codec's two decoders (messages/codec.hpp): the fast path that reads
// MessagePack in place and the tree decoder that explains errors. Whatever the fast path accepts,
// the tree decoder must accept with the same value, or a flaw would pass unreported; a crash, a
// sanitizer report or an escaped exception is a bug too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "messages/codec.hpp"
#include "messages/kv.hpp"
#include "messages/node.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"

namespace {

template <class T>
void check_agreement(const char* data, size_t size) {
  using namespace kvactor;
  T fast{};
  const auto type = detail::type_name_of(fast);
  bool in_place = false;
  try {
    in_place = detail::decode_in_place(data, size, type, schema_version, fast);
  } catch (const std::bad_alloc&) {
    return; // the codec catches it and asks the tree decoder
  }
  T tree{};
  const auto st = detail::decode_through_tree(data, size, type, tree);
  // Bytes, not operator==: a NaN that both decode alike is not equal to itself.
  if (in_place && (!st || kvactor::encode(fast) != kvactor::encode(tree))) std::abort();
}

template <class... Ts>
void check_all(const char* data, size_t size) {
  (check_agreement<Ts>(data, size), ...);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  check_all<step_plan, node_step_done, node_step, step_done, kv_cache_spec, kv_cache_config,
            rank_config, request_spec, run_summary>(reinterpret_cast<const char*>(data), size);
  return 0;
}
