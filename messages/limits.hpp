// The range of every engine setting, one table for the flags that set it (`run`, `plan`) and for
// the rank_config a driver sends a rank, in its own process or on a node: a value is checked where
// it enters, before any work, and named as it entered (the flag, or the message's field).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

struct rank_config;

/// One integer setting: its flag, its field in rank_config, its closed range and what it counts.
struct setting_range {
  std::string_view flag;
  std::string_view field;
  int64_t min = 0;
  int64_t max = 0;
  std::string_view meaning; // the rule in words, for the error
};

namespace limits {
inline constexpr int64_t int32_limit = 2147483647;

inline constexpr setting_range tensor_parallel_size{
    "--tensor-parallel-size", "tensor_parallel_size", 1, 64, "ranks that split the heads"};
inline constexpr setting_range block_size{"--block-size", "block_size", 1, 8192,
                                          "tokens per KV cache block"};
inline constexpr setting_range max_model_len{"--max-model-len", "max_model_len", 0, int32_limit,
                                             "tokens per request; 0: the model's own"};
inline constexpr setting_range max_num_seqs{"--max-num-seqs", "max_num_seqs", 1, 65536,
                                            "requests per step"};
// A step's activations scale with it: a million tokens is past any GPU's memory for a real model.
inline constexpr setting_range max_num_batched_tokens{
    "--max-num-batched-tokens", "max_num_batched_tokens", 1, 1 << 20, "tokens per step"};
inline constexpr setting_range num_gpu_blocks_override{"--num-gpu-blocks-override",
                                                       "num_gpu_blocks_override", 0, int32_limit,
                                                       "KV cache blocks; 0: sized by the budget"};
inline constexpr setting_range num_ubatches{"--ubatches", "num_ubatches", 1, 2,
                                            "microbatches per step"};
} // namespace limits

/// How an error names the setting: as the user typed it, or as the message carried it.
enum class named_as : uint8_t { flag, field };

/// "--block-size: 0 is outside [1, 8192] (tokens per KV cache block)" when `value` is outside.
status check_setting(const setting_range& range, int64_t value, named_as as);

/// One setting's value, for check_settings.
struct setting_value {
  const setting_range& range;
  int64_t value;
};

/// check_setting over each in turn: the first one outside its range is the error.
status check_settings(std::initializer_list<setting_value> values, named_as as);

/// Every field of a rank_config a rank must be able to trust before it loads anything: a driver
/// of another process may send any bytes. Errors name the field ("rank_config.block_size: ...").
status check_rank_config(const rank_config& config);

} // namespace kvactor
