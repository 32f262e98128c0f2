// `kvactor node`: one node process of a cluster. Publishes a node actor on --listen and hosts the
// ranks drivers ask for, until SIGINT or SIGTERM.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace kvactor {

struct node_flags {
  std::string listen = "127.0.0.1:7400"; // HOST:PORT (port 0: any free port, printed)
  std::optional<int32_t> cpu_ranks;
  std::string gpus; // "0,1,..."
  std::string tls_cert, tls_key, tls_ca;
  std::string max_message_bytes = "64MiB"; // the largest message a peer may send us
  std::string debug_build_id;              // testing: claim another build
  std::optional<uint16_t> metrics_port;    // serve /metrics and /health (0: any free port)
  std::string metrics_host = "127.0.0.1";  // where --metrics-port listens
  int64_t step_spin_us = 0;                // the step channel's threads poll before they block
  std::string debug_step_times;            // testing: append the steps' timeline marks here
};

int run_node(const node_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
