// Per-request latencies as an inference server reports them: time to first token (from the
// request's arrival to its first token), time per output token (between its first and last
// token, per token after the first), end-to-end latency. Pure: the driver feeds it times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace kvactor {

struct latency_summary {
  double ttft_ms_p50 = 0, ttft_ms_p99 = 0;
  double tpot_ms_p50 = 0, tpot_ms_p99 = 0; // over requests with at least two tokens
  double e2e_ms_p50 = 0, e2e_ms_p99 = 0;
};

/// One request's latencies in seconds (tpot_s 0 with fewer than two tokens).
struct request_timing {
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;
  int64_t tokens = 0;
};

class request_latencies {
public:
  /// The request arrived at `t_s` seconds (its scheduled arrival, so queueing counts).
  void arrived(uint64_t id, double t_s);
  /// The request got a token at `t_s`. Unknown ids are ignored.
  void token(uint64_t id, double t_s);
  /// Percentiles over the requests that got at least one token (nearest rank).
  latency_summary summarize() const;
  /// The request's latencies so far; tokens 0 when it has none (or is unknown).
  request_timing timing(uint64_t id) const;
  /// The request is done and forgotten (a serving driver): its latencies join those of the
  /// done requests summarize() reads, of which the most recent `max_retired` are kept.
  void retire(uint64_t id);

  static constexpr size_t max_retired = size_t{1} << 20;

private:
  struct times {
    double arrival = 0, first = -1, last = -1;
    int64_t tokens = 0;
  };
  std::map<uint64_t, times> requests_;
  std::vector<request_timing> retired_; // a ring of the most recent max_retired
  size_t next_retired_ = 0;
};

} // namespace kvactor
