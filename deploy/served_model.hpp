// What `kvactor serve` and `kvactor batch` share before the engine starts: the engine flags as
// `run` takes them (with no synthetic workload), and the model as the ingress serves it (its
// name, tokenizer, chat template, end-of-sequence tokens and length).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/ingress/ingress_core.hpp"
#include "deploy/run_options.hpp"
#include "messages/errc.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"

namespace kvactor {

/// Cluster mode for serve and batch: `run`'s --nodes and the mutual TLS with the nodes.
struct cluster_flags {
  std::string nodes; // "host:port,..." of kvactor node processes; empty: local ranks
  std::string tls_cert, tls_key, tls_ca;
};

/// `run`'s flags for the engine alone: no synthetic requests, no progress line.
run_flags engine_run_flags(const plan_flags& engine, uint64_t seed, const cluster_flags& c = {});

struct loaded_model {
  std::unique_ptr<tokenizer> tok; // on the heap: `served` points at them
  std::unique_ptr<chat_template> chat;
  openai::served_model served;
};

/// The model directory's tokenizer, chat template (`chat_template_file` when given; without one
/// the chat endpoint answers 400, with a warning) and end-of-sequence tokens. `served_name`
/// empty: the directory's name.
expected<loaded_model> load_served_model(const std::string& model_dir,
                                         const std::string& served_name,
                                         const std::string& chat_template_file,
                                         int64_t max_model_len);

} // namespace kvactor
