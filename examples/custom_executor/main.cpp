// custom_executor [TENSOR_PARALLEL_SIZE]: kvactor's driver and rank group, embedded in a program
// that brings its own model. The "counting model" below continues every prompt by counting up
// from its last token; registered under the name "counting", it runs every step of every rank
// while kvactor plans the KV cache, schedules the requests, builds each step's metadata and
// collects the sampled tokens. The program checks that every request got its count.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/rank/executor_registry.hpp"
#include "actors/rank/group.hpp"
#include "deploy/run_session.hpp"
#include "messages/register.hpp"

namespace {

// The toy model: the next token of a request is its last token plus one. It keeps no state of
// its own and touches no KV cache (a real executor reads and writes the views bind() gets).
class counting_model final : public kvactor::step_executor {
public:
  kvactor::status bind(std::vector<kvactor::kernels::kv_view>, std::vector<std::string>,
                       int32_t) override {
    return kvactor::ok();
  }
  kvactor::expected<kvactor::kernels::sampled_rows>
  run(const kvactor::step_batch& b, const std::vector<kvactor::executed_ubatch>&) override {
    kvactor::kernels::sampled_rows next; // no logprobs: this model has no distribution
    for (int32_t row : b.sample_rows)
      next.tokens.push_back(b.token_ids[static_cast<size_t>(row)] + 1);
    return next;
  }
  std::vector<kvactor::memory_entry> ledger() const override { return {}; }
  const char* device() const override { return "cpu"; }
};

std::shared_ptr<kvactor::executor_registry> registry_with_counting_model() {
  auto registry =
      std::make_shared<kvactor::executor_registry>(kvactor::executor_registry::with_builtins());
  auto added = registry->add({"counting",
                              {kvactor::device_kind::cpu},
                              [](const kvactor::executor_context&)
                                  -> kvactor::expected<std::unique_ptr<kvactor::step_executor>> {
                                return std::unique_ptr<kvactor::step_executor>(
                                    std::make_unique<counting_model>());
                              }});
  if (!added) std::fprintf(stderr, "custom_executor: %s\n", added.err().message.c_str());
  return registry;
}

// Every rank runs kvactor-tiny's layout (its KV cache is planned from that config) on the CPU
// with the counting model.
std::vector<kvactor::rank_config> rank_configs(int32_t world) {
  std::vector<kvactor::rank_config> configs;
  for (int32_t r = 0; r < world; ++r) {
    kvactor::rank_config c;
    c.rank = r;
    c.tensor_parallel_size = world;
    c.model = "kvactor-tiny";
    c.device = kvactor::device_kind::cpu;
    c.max_model_len = 256;
    c.kv_cache_memory = int64_t{8} << 20;
    c.max_num_batched_tokens = 64;
    c.max_num_seqs = 8;
    c.executor = "counting";
    configs.push_back(c);
  }
  return configs;
}

} // namespace

int main(int argc, char** argv) {
  const int32_t world = argc > 1 ? std::atoi(argv[1]) : 1;
  caf::actor_system_config cfg;
  kvactor::register_types(cfg);
  caf::actor_system sys{cfg};

  kvactor::rank_group_options group;
  group.world = world;
  group.executors = registry_with_counting_model();
  const auto ranks = kvactor::spawn_rank_group(sys, group);
  auto driver = sys.spawn(kvactor::driver, kvactor::driver_setup{ranks, rank_configs(world)});

  std::vector<kvactor::request_spec> workload;
  for (uint64_t id = 1; id <= 4; ++id)
    workload.push_back({id, {static_cast<int32_t>(10 * id), static_cast<int32_t>(10 * id + 1)}, 5});
  const auto session = kvactor::serve(sys, driver, workload);
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
  for (const auto& r : ranks)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  if (session.failure) {
    std::fprintf(stderr, "custom_executor: %s\n", session.failure->err.message.c_str());
    return 1;
  }
  int wrong = 0;
  for (const auto& r : session.summary.results) {
    std::printf("request %llu:", static_cast<unsigned long long>(r.request_id));
    for (int32_t t : r.output)
      std::printf(" %d", t);
    std::printf("\n");
    // Prompt (10 id, 10 id + 1): the count goes on from 10 id + 2.
    for (size_t i = 0; i < r.output.size(); ++i)
      wrong += r.output[i] != static_cast<int32_t>(10 * r.request_id + 2 + i);
    wrong += r.output.size() != 5;
  }
  std::printf("%zu requests on %d rank(s) with the counting model, %s\n",
              session.summary.results.size(), world, wrong == 0 ? "every count right" : "WRONG");
  return wrong == 0 && session.summary.results.size() == 4 ? 0 : 1;
}
