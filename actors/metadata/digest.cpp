#include "actors/metadata/digest.hpp"

#include <cstring>
#include <span>

namespace kvactor {

namespace {

// Word-at-a-time mixing (multiply, rotate): about 1 ns per 8 bytes, so recording a step's
// metadata costs microseconds, not the step.
class hasher {
public:
  void word(uint64_t v) {
    h_ ^= v * 0x9e3779b97f4a7c15ULL;
    h_ = (h_ << 27 | h_ >> 37) * 0xc2b2ae3d27d4eb4fULL + 0x165667b19e3779f9ULL;
  }
  template <class T>
  void span(std::span<const T> xs) {
    word(xs.size());
    const auto* p = reinterpret_cast<const unsigned char*>(xs.data());
    const size_t n = xs.size_bytes();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t v;
      std::memcpy(&v, p + i, 8);
      word(v);
    }
    uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, p + i, n - i); // an empty span's data() may be null
    word(tail);
  }
  void text(const std::string& s) { span(std::span<const char>{s.data(), s.size()}); }
  uint64_t value() const { return h_ == 0 ? 1 : h_; }

private:
  uint64_t h_ = 0x243f6a8885a308d3ULL;
};

} // namespace

uint64_t metadata_digest(const layer_metadata& layers) {
  hasher h;
  for (const auto& [name, meta] : layers) {
    h.text(name);
    if (!meta) {
      h.word(0);
      continue;
    }
    const auto& m = meta->common;
    h.text(meta->backend);
    h.word(static_cast<uint64_t>(m.num_reqs));
    h.word(static_cast<uint64_t>(m.num_actual_tokens));
    h.word(static_cast<uint64_t>(m.max_query_len));
    h.word(static_cast<uint64_t>(m.max_seq_len));
    h.word(m.causal ? 1 : 0);
    h.span(std::span<const int32_t>{m.query_start_loc});
    h.span(std::span<const int32_t>{m.seq_lens});
    const auto rows = static_cast<size_t>(m.num_reqs) * static_cast<size_t>(m.block_table_width);
    h.word(static_cast<uint64_t>(m.block_table_width));
    h.span(m.block_table.first(std::min(rows, m.block_table.size())));
    const auto tokens = static_cast<size_t>(m.num_actual_tokens);
    h.span(m.slot_mapping.first(std::min(tokens, m.slot_mapping.size())));
    h.span(m.positions.first(std::min(tokens, m.positions.size())));
    for (bool p : m.is_prefilling)
      h.word(p ? 1 : 0);
    h.span(std::span<const int32_t>{m.logits_indices_padded});
    h.word(static_cast<uint64_t>(m.num_logits_indices));
  }
  return h.value();
}

} // namespace kvactor
