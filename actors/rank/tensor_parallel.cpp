#include "actors/rank/tensor_parallel.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/rank/collective_entries.hpp"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/nccl_communicator.h"
#include "kvactor/comm/stalling_communicator.h"
#include "messages/caf_error.hpp"

namespace kvactor {

namespace {

caf::error tp_error(errc code, std::string message) {
  return to_caf_error(make_error(code, std::move(message)));
}

constexpr const char* host_ranks =
    "this rank's collectives run in-process (a host communicator); only NCCL and socket (cluster) "
    "ranks create or join a communicator";

} // namespace

std::chrono::milliseconds max_stall(std::chrono::milliseconds collective_timeout) {
  return collective_timeout * 4 + std::chrono::seconds(1);
}

std::shared_ptr<comm::communicator> with_stall(std::shared_ptr<comm::communicator> comm,
                                               uint64_t at,
                                               std::chrono::milliseconds collective_timeout) {
  if (at == 0) return comm;
  return comm::make_stalling_communicator(std::move(comm), at, max_stall(collective_timeout));
}

caf::result<communicator_id> create_communicator_id(rank_state& st, int32_t world, uint64_t epoch) {
  if (!st.runtime.nccl && st.runtime.socket_host.empty())
    return tp_error(errc::unsupported, fmt::format("unique_id: {}", host_ranks));
  if (world < 1)
    return tp_error(errc::invalid_argument,
                    fmt::format("unique_id: world {} is not a positive rank count", world));
  try {
    if (!st.runtime.nccl) {
      // Rank 0 listens until the group has joined; the id is its address.
      st.listener = comm::socket_listener::open(st.runtime.socket_host);
      const auto address = st.listener->address();
      return communicator_id{std::vector<char>(address.begin(), address.end()), world, epoch};
    }
    return communicator_id{comm::nccl_unique_id(), world, epoch};
  } catch (const comm::collective_error& e) {
    return tp_error(errc::collective_failed, fmt::format("unique_id: {}", e.what()));
  }
}

caf::result<int32_t> join_communicator(rank_state& st, const communicator_id& id, int32_t rank) {
  if (!st.runtime.nccl && st.runtime.socket_host.empty())
    return tp_error(errc::unsupported, fmt::format("join: {}", host_ranks));
  if (st.comm)
    return tp_error(errc::invalid_argument,
                    fmt::format("join: this rank joined a communicator already (as rank {} of {})",
                                st.comm->rank(), st.comm->world_size()));
  if (rank < 0 || rank >= id.world)
    return tp_error(errc::invalid_argument,
                    fmt::format("join: rank {} is outside [0, {})", rank, id.world));
  try {
    if (!st.runtime.nccl) {
      if (rank == 0 && !st.listener)
        return tp_error(errc::invalid_argument,
                        "join: rank 0 of a socket group joins with the id it created (unique_id)");
      comm::socket_options opt;
      opt.timeout = st.runtime.collective_timeout;
      st.comm = with_stall(
          comm::make_socket_communicator(std::string(id.bytes.begin(), id.bytes.end()), id.world,
                                         rank, rank == 0 ? std::move(st.listener) : nullptr, opt),
          st.runtime.injected().stall_before_collective, st.runtime.collective_timeout);
      if (st.runtime.on_join) st.runtime.on_join(st.comm);
      return rank;
    }
    comm::nccl_options opt;
    opt.device = st.runtime.device_index >= 0 ? st.runtime.device_index : rank; // one GPU per rank
    opt.timeout = st.runtime.collective_timeout;
    st.comm =
        with_stall(comm::make_nccl_communicator(id.bytes, id.world, rank, opt),
                   st.runtime.injected().stall_before_collective, st.runtime.collective_timeout);
    if (st.runtime.on_join) st.runtime.on_join(st.comm);
    return rank;
  } catch (const comm::collective_error& e) {
    return tp_error(errc::collective_failed, fmt::format("join: {}", e.what()));
  }
}

caf::error agree_on_blocks(rank_state& st, int64_t num_blocks) {
  int64_t agreed = 0;
  try {
    agreed = st.comm->agree(st.kv.planned_blocks, comm::reduce_op::min);
  } catch (const comm::collective_error& e) {
    return tp_error(errc::collective_failed,
                    fmt::format("allocate: agreeing on the KV cache block count: {}", e.what()));
  }
  if (agreed == num_blocks) return {};
  return tp_error(
      errc::incompatible_specs,
      fmt::format("allocate: num_blocks {} from the driver differs from {}, the minimum "
                  "of the planned block counts the {} rank(s) agreed on (rank {} planned "
                  "{})",
                  num_blocks, agreed, st.comm->world_size(), st.config.rank, st.kv.planned_blocks));
}

std::vector<collective_entry> collectives_of(const rank_state& st) {
  if (!st.comm) return {};
  return ledger_entries(st.comm->ledger());
}

} // namespace kvactor
