// A ubatch's metadata as the CPU decoder reads it.
#include <fmt/format.h>

#include "actors/rank/executor.hpp"

namespace kvactor {

expected<host_layer_batches> host_layer_batches_of(const executed_ubatch& u,
                                                   const std::vector<std::string>& names) {
  host_layer_batches out;
  out.batches.resize(names.size());
  for (size_t l = 0; l < names.size(); ++l) {
    auto it = u.layers->find(names[l]);
    if (it == u.layers->end())
      return make_error(errc::invalid_argument, fmt::format("no metadata for layer {}", names[l]));
    const auto& m = it->second->common;
    out.batches[l] = {m.query_start_loc.data(), m.seq_lens.data(), m.block_table.data(),
                      m.block_table_width,      m.num_reqs,        m.slot_mapping.data()};
  }
  for (const auto& b : out.batches)
    out.pointers.push_back(&b);
  return out;
}

} // namespace kvactor
