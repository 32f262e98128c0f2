// An in-process communicator for tensor-parallel ranks on the CPU: the same role NCCL plays on
// GPUs. All-reduce sums in rank order, so every rank gets bit-identical results and a run is
// reproducible. Each rank must run on its own thread (the call blocks until all ranks arrive).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace kvactor::kernels {

class host_communicator {
public:
  /// REQUIRES: world_size >= 1.
  explicit host_communicator(int world_size,
                             std::chrono::milliseconds timeout = std::chrono::seconds(120));

  int world_size() const { return world_; }

  /// Sums `count` floats of `buffer` over all ranks, in rank order, into every rank's buffer.
  /// Throws std::runtime_error when the communicator was aborted, the ranks disagree on `count`,
  /// or the others do not arrive within the timeout (a hang becomes an error).
  void all_reduce(int rank, float* buffer, size_t count);

  /// Wakes every waiting rank with an error (a rank that failed mid-step calls this).
  void abort(const std::string& why);

private:
  int world_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<float>> contributions_; // [world]
  std::vector<float> result_;
  int arrived_ = 0;
  int departed_ = 0;
  unsigned long generation_ = 0;
  std::string aborted_;
};

} // namespace kvactor::kernels
