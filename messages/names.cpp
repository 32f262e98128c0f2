// Names of the vocabulary's enums, as they appear in flags, JSON and logs.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "messages/backend.hpp"
#include "messages/collective.hpp"
#include "messages/cudagraph.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/request.hpp"

namespace kvactor {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

error unknown_value(std::string_view what, std::string_view value, std::string_view choices) {
  std::string msg{what};
  msg += ": unknown value '";
  msg += value;
  msg += "' (expected one of ";
  msg += choices;
  msg += ")";
  return make_error(errc::invalid_argument, std::move(msg));
}

} // namespace

std::string_view to_string(layer_kind x) {
  switch (x) {
  case layer_kind::full: return "full";
  case layer_kind::sliding_window: return "sliding_window";
  case layer_kind::chunked_local: return "chunked_local";
  case layer_kind::mla: return "mla";
  case layer_kind::cross_attention: return "cross_attention";
  case layer_kind::encoder_only: return "encoder_only";
  case layer_kind::mamba: return "mamba";
  }
  return "unknown";
}

std::string_view to_string(kv_cache_spec_kind x) {
  switch (x) {
  case kv_cache_spec_kind::full: return "full";
  case kv_cache_spec_kind::sliding_window: return "sliding_window";
  case kv_cache_spec_kind::chunked_local: return "chunked_local";
  case kv_cache_spec_kind::mla: return "mla";
  case kv_cache_spec_kind::sliding_window_mla: return "sliding_window_mla";
  case kv_cache_spec_kind::cross_attention: return "cross_attention";
  case kv_cache_spec_kind::encoder_only: return "encoder_only";
  case kv_cache_spec_kind::sink_full: return "sink_full";
  case kv_cache_spec_kind::mamba: return "mamba";
  case kv_cache_spec_kind::uniform_type: return "uniform_type";
  }
  return "unknown";
}

std::string_view to_string(kv_cache_layout x) {
  switch (x) {
  case kv_cache_layout::lbhnc: return "LBHNC";
  case kv_cache_layout::lbnhc: return "LBNHC";
  case kv_cache_layout::lhbnc: return "LHBNC";
  case kv_cache_layout::blhnc: return "BLHNC";
  case kv_cache_layout::blnhc: return "BLNHC";
  case kv_cache_layout::bhlnc: return "BHLNC";
  }
  return "unknown";
}

expected<kv_cache_layout> parse_kv_cache_layout(std::string_view name) {
  auto s = lower(name);
  if (s == "lbhnc" || s == "hnd") return kv_cache_layout::lbhnc;
  if (s == "lbnhc" || s == "nhd") return kv_cache_layout::lbnhc;
  if (s == "lhbnc") return kv_cache_layout::lhbnc;
  if (s == "blhnc") return kv_cache_layout::blhnc;
  if (s == "blnhc") return kv_cache_layout::blnhc;
  if (s == "bhlnc") return kv_cache_layout::bhlnc;
  return unknown_value("kv_cache_layout", name,
                       "LBHNC, LBNHC, LHBNC, BLHNC, BLNHC, BHLNC, HND, NHD");
}

std::string_view to_string(graph_support x) {
  switch (x) {
  case graph_support::never: return "never";
  case graph_support::uniform_single_token_decode: return "uniform_single_token_decode";
  case graph_support::uniform_batch: return "uniform_batch";
  case graph_support::always: return "always";
  }
  return "unknown";
}

expected<graph_support> parse_graph_support(std::string_view name) {
  auto s = lower(name);
  for (auto x : {graph_support::never, graph_support::uniform_single_token_decode,
                 graph_support::uniform_batch, graph_support::always})
    if (s == to_string(x)) return x;
  return unknown_value("graph_support", name,
                       "never, uniform_single_token_decode, uniform_batch, always");
}

std::string_view to_string(collective_status x) {
  constexpr std::array<std::string_view, 5> names{"pending", "completed", "timed_out", "aborted",
                                                  "failed"};
  const auto i = static_cast<size_t>(x);
  return i < names.size() ? names[i] : "unknown";
}

std::string_view to_string(finish_reason x) {
  constexpr std::array<std::string_view, 3> names{"none", "length", "stop"};
  const auto i = static_cast<size_t>(x);
  return i < names.size() ? names[i] : "unknown";
}

std::string_view to_string(cudagraph_mode x) {
  switch (x) {
  case cudagraph_mode::none: return "none";
  case cudagraph_mode::piecewise: return "piecewise";
  case cudagraph_mode::full: return "full";
  case cudagraph_mode::full_decode_only: return "full_decode_only";
  case cudagraph_mode::full_and_piecewise: return "full_and_piecewise";
  }
  return "unknown";
}

expected<cudagraph_mode> parse_cudagraph_mode(std::string_view name) {
  auto s = lower(name);
  for (auto x : {cudagraph_mode::none, cudagraph_mode::piecewise, cudagraph_mode::full,
                 cudagraph_mode::full_decode_only, cudagraph_mode::full_and_piecewise})
    if (s == to_string(x)) return x;
  return unknown_value("--cudagraph-mode", name,
                       "none, piecewise, full, full_decode_only, full_and_piecewise");
}

cudagraph_mode decode_mode(cudagraph_mode m) {
  switch (m) {
  case cudagraph_mode::full_decode_only:
  case cudagraph_mode::full_and_piecewise: return cudagraph_mode::full;
  default: return m;
  }
}

cudagraph_mode mixed_mode(cudagraph_mode m) {
  switch (m) {
  case cudagraph_mode::full_decode_only: return cudagraph_mode::none;
  case cudagraph_mode::full_and_piecewise: return cudagraph_mode::piecewise;
  default: return m;
  }
}

bool has_full_cudagraphs(cudagraph_mode m) {
  return decode_mode(m) == cudagraph_mode::full || mixed_mode(m) == cudagraph_mode::full;
}

bool has_piecewise_cudagraphs(cudagraph_mode m) {
  return decode_mode(m) == cudagraph_mode::piecewise || mixed_mode(m) == cudagraph_mode::piecewise;
}

} // namespace kvactor
