#include "actors/rank/padding_sync.hpp"

#include <algorithm>
#include <limits>

#include "actors/rank/step_slicing.hpp"

namespace kvactor {

padding_row padding_row_of(const step_batch& b, const batch_descriptor& dispatched) {
  padding_row r;
  r.num_tokens = b.num_tokens();
  r.mode = dispatched.mode;
  r.uniform_token_count = uniform_decode(b);
  r.num_reqs = b.num_reqs();
  return r;
}

padding_sync settle_padding(const std::vector<padding_row>& rows, int32_t self) {
  padding_sync out;
  const auto mine = encode_row(rows[static_cast<size_t>(self)]);
  out.unanimous = std::all_of(rows.begin(), rows.end(),
                              [&](const padding_row& r) { return encode_row(r) == mine; });
  if (!out.unanimous)
    out.agreement = agree_padding_rows(rows, self, std::numeric_limits<int32_t>::max());
  return out;
}

padding_sync sync_padding(comm::communicator& comm, const step_batch& b,
                          const batch_descriptor& dispatched) {
  const auto table = comm.gather(encode_row(padding_row_of(b, dispatched)));
  return settle_padding(decode_rows(table), comm.rank());
}

} // namespace kvactor
