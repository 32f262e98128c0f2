#include "messages/engine_config.hpp"

namespace kvactor {

status check(const parallel_settings& x, named_as as) {
  return check_setting(limits::tensor_parallel_size, x.tensor_parallel_size, as);
}

status check(const cache_settings& x, named_as as) {
  return check_settings({{limits::block_size, x.block_size},
                         {limits::num_gpu_blocks_override, x.num_gpu_blocks_override}},
                        as);
}

status check(const scheduler_limits& x, named_as as) {
  return check_settings({{limits::max_model_len, x.max_model_len},
                         {limits::max_num_seqs, x.max_num_seqs},
                         {limits::max_num_batched_tokens, x.max_num_batched_tokens}},
                        as);
}

} // namespace kvactor
