#include "actors/rank/group.hpp"

#include <caf/all.hpp>

#include "actors/rank/actor.hpp"
#include "actors/rank/tensor_parallel.hpp"
#include "kvactor/comm/host_communicator.h"

namespace kvactor {

std::vector<rank_actor> spawn_rank_group(caf::actor_system& sys, const rank_group_options& opt) {
  auto stall_of = [&](int32_t r) -> uint64_t {
    return opt.stall && opt.stall->rank == r ? opt.stall->collective : 0;
  };
  auto runtime_of = [&](int32_t r, std::shared_ptr<comm::communicator> comm) {
    rank_runtime rt;
    rt.comm = with_stall(std::move(comm), opt.nccl ? 0 : stall_of(r), opt.collective_timeout);
    rt.recorder = opt.recorder;
    rt.metadata_digest = opt.metadata_digest;
    rt.nccl = opt.nccl;
    rt.collective_timeout = opt.collective_timeout;
    rt.executors = opt.executors;
    rank_faults faults;
    faults.stall_before_collective = opt.nccl ? stall_of(r) : 0;
    if (opt.fail_capture && opt.fail_capture->rank == r)
      faults.fail_capture = opt.fail_capture->capture;
    faults.chaos = opt.chaos;
    for (const auto& f : opt.step_faults)
      if (f.rank == r) faults.step_faults.push_back(f);
    if (faults.any()) rt.faults = std::make_shared<const rank_faults>(std::move(faults));
    if (!opt.gpus.empty()) rt.device_index = opt.gpus[static_cast<size_t>(r)];
    return rt;
  };
  std::vector<rank_actor> ranks;
  if (opt.nccl) {
    for (int32_t r = 0; r < opt.world; ++r)
      ranks.push_back(sys.spawn<caf::detached>(rank_with, runtime_of(r, nullptr)));
    return ranks;
  }
  if (!opt.communicators.empty()) {
    for (int32_t r = 0; r < opt.world; ++r)
      ranks.push_back(sys.spawn<caf::detached>(
          rank_with, runtime_of(r, opt.communicators[static_cast<size_t>(r)])));
    return ranks;
  }
  auto group = comm::host_communicator::create_group(opt.world, opt.collective_timeout);
  for (int32_t r = 0; r < opt.world; ++r) {
    auto rt = runtime_of(r, group[static_cast<size_t>(r)]);
    ranks.push_back(opt.world == 1 ? sys.spawn(rank_with, std::move(rt))
                                   : sys.spawn<caf::detached>(rank_with, std::move(rt)));
  }
  return ranks;
}

} // namespace kvactor
