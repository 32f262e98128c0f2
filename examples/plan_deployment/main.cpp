// plan_deployment MODEL KV_CACHE_GIB [TENSOR_PARALLEL_SIZE]: how many KV cache blocks and tokens a
// deployment of MODEL gets with KV_CACHE_GIB of cache per GPU, and its attention groups, from
// kvactor's planning core (no GPU needed). MODEL is a config.json path, a Hugging Face model
// directory, or the name of a config kvactor ships.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/driver/deployment_plan.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL KV_CACHE_GIB [TENSOR_PARALLEL_SIZE]\n", argv[0]);
    return 2;
  }
  kvactor::plan_request request;
  request.model = argv[1];
  request.budget.kv_cache_memory = {static_cast<int64_t>(std::atof(argv[2]) * (1 << 30))};
  if (argc > 3) request.load.tensor_parallel_size = std::atoi(argv[3]);
  auto plan = kvactor::plan_deployment(request);
  if (!plan) {
    std::fprintf(stderr, "plan_deployment: %s\n", plan.err().message.c_str());
    return 1;
  }
  const int32_t block_size = kvactor::attention_block_size(*plan);
  std::printf("model     %s\n", plan->model_path.c_str());
  std::printf("ranks     %zu\n", plan->ranks.size());
  std::printf("blocks    %lld of %d tokens = %lld tokens per rank\n",
              static_cast<long long>(plan->config.num_blocks), block_size,
              static_cast<long long>(plan->config.num_blocks) * block_size);
  for (const auto& groups : plan->attention_groups)
    for (const auto& g : groups)
      std::printf("group     %d on backend %s: %zu layers\n", g.kv_cache_group_id,
                  g.backend.c_str(), g.layer_names.size());
  return 0;
}
