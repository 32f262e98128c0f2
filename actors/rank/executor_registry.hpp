// The executor seam: every executor a rank can run is registered here by name, with the devices
// it runs on and a factory; the rank picks one from its configuration (rank_config.executor, or
// the device's own) and never names an executor itself. A new executor or model family is one
// add() call, no edit of the rank actor.
//
// A minimal executor (tests/rank/executor_registry_test.cpp runs one through a rank):
//
//   class echo_executor final : public step_executor {
//     status bind(std::vector<kernels::kv_view>, std::vector<std::string>, int32_t) override {
//       return ok();
//     }
//     expected<kernels::sampled_rows> run(const step_batch& b,
//                                         const std::vector<executed_ubatch>&) override {
//       return kernels::sampled_rows{std::vector<int32_t>(b.sample_rows.size(), 7), {}}; // 7s
//     }
//     std::vector<memory_entry> ledger() const override { return {}; }
//     const char* device() const override { return "cpu"; }
//   };
//   auto registry = std::make_shared<executor_registry>(executor_registry::with_builtins());
//   registry->add({"echo", {device_kind::cpu},
//                  [](const executor_context&) -> expected<std::unique_ptr<step_executor>> {
//                    return std::unique_ptr<step_executor>(std::make_unique<echo_executor>());
//                  }});
//   rank_runtime rt;
//   rt.executors = registry;             // and rank_config::executor = "echo"
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/rank/executor.hpp"
#include "kvactor/comm/communicator.h"
#include "messages/device.hpp"
#include "messages/errc.hpp"
#include "messages/layer.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// What a factory gets to build a rank's executor.
struct executor_context {
  const rank_config& config;
  const model_layout& model;                // this rank's tensor-parallel shard
  std::shared_ptr<comm::communicator> comm; // this rank's end of its group (world 1 alone)
  int32_t gpu = 0;                          // the GPU of a CUDA rank
};

using executor_factory =
    std::function<expected<std::unique_ptr<step_executor>>(const executor_context&)>;

struct executor_entry {
  std::string name;
  std::vector<device_kind> devices; // where it runs (its KV cache lives on the rank's device)
  executor_factory make;
};

class executor_registry {
public:
  /// An empty registry; with_builtins() has "cpu" and "cuda" (the whole decoder on that device:
  /// a model directory's checkpoint, or weights generated from the seed for a config alone),
  /// "synthetic" (generated weights even for a model directory: --load-format synthetic) and
  /// "protocol" (the step protocol alone: every sampled token is 0, no kernels).
  executor_registry() = default;
  static executor_registry with_builtins();

  /// Fails on an empty or duplicate name, no device, or no factory.
  status add(executor_entry entry);
  /// nullptr when unknown.
  const executor_entry* find(std::string_view name) const;
  std::vector<std::string> names() const;

  /// The executor `config` asks for (config.executor, or the device's name when empty), if it
  /// is registered and runs on config.device; errors name the field and the registered names.
  expected<const executor_entry*> choose(const rank_config& config) const;

private:
  std::vector<executor_entry> entries_;
};

/// The executor name a configuration selects: config.executor, or the device's own.
std::string executor_name(const rank_config& config);

} // namespace kvactor
