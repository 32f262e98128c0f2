// libFuzzer target for the decoders that read untrusted bytes: the trace reader and the
// MessagePack codec of the messages a trace carries. Any crash, sanitizer report or escaped
// exception is a bug: decoders must return errors.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "messages/backend.hpp"
#include "messages/codec.hpp"
#include "messages/cudagraph.hpp"
#include "messages/inject.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/node.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/trace.hpp"

namespace {

template <class... Ts>
void decode_as(const char* data, size_t size) {
  ((void)kvactor::decode<Ts>(data, size), ...);
}

template <class... Ts>
void decode_record_as(const kvactor::trace_record& r) {
  ((void)kvactor::decode_record<Ts>(r), ...);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const char*>(data);
  // As a trace file: header, length prefixes, records, then each record's payload.
  std::istringstream in(std::string(bytes, size));
  kvactor::trace_reader reader(in);
  if (auto all = reader.read_all())
    for (const auto& r : *all)
      decode_record_as<kvactor::step_plan, kvactor::step_done, kvactor::rank_config,
                       kvactor::rank_ready, kvactor::request_spec>(r);
  // As one message envelope.
  using namespace kvactor;
  decode_as<step_plan, step_done, ubatch_work, metadata_ready, rank_config, rank_plan, rank_ready,
            request_spec, run_summary, kv_cache_config, kv_cache_spec, model_layout,
            backend_capabilities, cudagraph_plan, backend_assignment, step_rejected,
            cudagraph_request, cudagraph_captured, node_info, rank_spawn, node_step, node_step_done,
            inject_request, inject_reply>(bytes, size);
  (void)envelope_type(bytes, size); // what the injection gateway reads first
  return 0;
}
