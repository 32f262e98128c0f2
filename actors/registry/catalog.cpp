#include "actors/registry/catalog.hpp"

namespace kvactor {

namespace {

using k = kv_cache_spec_kind;

backend_capabilities reference() {
  backend_capabilities b;
  b.name = "reference";
  b.spec_kinds = {k::full,         k::sliding_window,     k::chunked_local,
                  k::mla,          k::sliding_window_mla, k::cross_attention,
                  k::encoder_only, k::sink_full};
  b.cudagraph_support = graph_support::never; // a CPU backend has nothing to capture
  b.supports_sinks = true;
  b.query_lens_mismatch_ok = true;
  b.priority = 0;
  return b;
}

backend_capabilities paged() {
  backend_capabilities b;
  b.name = "paged";
  b.kernel_block_sizes = {multiple_of(16)};
  b.spec_kinds = {k::full,         k::sliding_window, k::chunked_local, k::cross_attention,
                  k::encoder_only, k::sink_full};
  b.kv_dtypes = {dtype::float16, dtype::bfloat16, dtype::fp8_e4m3};
  b.head_sizes = {64, 80, 96, 112, 128, 192, 256};
  b.cudagraph_support = graph_support::always;
  b.supports_sinks = true;
  b.query_lens_mismatch_ok = true; // reads query lengths from the device only
  b.requires_gpu = true;
  b.priority = 10;
  return b;
}

backend_capabilities mla() {
  backend_capabilities b;
  b.name = "mla";
  b.kernel_block_sizes = {multiple_of(16)};
  b.spec_kinds = {k::mla, k::sliding_window_mla};
  b.kv_dtypes = {dtype::float16, dtype::bfloat16, dtype::fp8_e4m3};
  b.cudagraph_support = graph_support::uniform_batch;
  b.requires_gpu = true;
  b.workspace_bytes = int64_t{128} << 20;
  b.reorder_batch_threshold = 512;
  b.priority = 10;
  return b;
}

backend_capabilities state() {
  backend_capabilities b;
  b.name = "state";
  b.spec_kinds = {k::mamba}; // no kernel block constraint: state blocks are never split
  b.cudagraph_support = graph_support::uniform_batch;
  b.priority = 5;
  return b;
}

} // namespace

std::vector<backend_capabilities> builtin_backends() {
  return {reference(), paged(), mla(), state()};
}

} // namespace kvactor
