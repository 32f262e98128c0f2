// All CLI11 wiring lives in this one file (CLI11 is a heavy header).
#include "deploy/cli.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "deploy/batch_command.hpp"
#include "deploy/generate_command.hpp"
#include "deploy/inject_command.hpp"
#include "deploy/log_format.hpp"
#include "deploy/node_command.hpp"
#include "deploy/plan_command.hpp"
#include "deploy/replay_command.hpp"
#include "deploy/run_command.hpp"
#include "deploy/serve_command.hpp"
#include "deploy/trace_command.hpp"
#include "deploy/version.hpp"
#include "deploy/vllm_flags.hpp"
#include "messages/suggest.hpp"

namespace kvactor {

namespace {

// CLI11 2.1 reads numbers with strtoll, strtoull and strtod: "010" is octal, "-1" wraps into an
// unsigned, a value past 64 bits saturates, "nan" and "inf" pass. A numeric option takes plain
// decimal text instead; "" when `text` is one, else why not.
std::string plain_number_problem(const std::string& text, const std::string& type) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (type == "UINT" || type == "INT") {
    std::from_chars_result r{};
    if (type == "UINT") {
      uint64_t v = 0;
      r = std::from_chars(begin, end, v);
    } else {
      int64_t v = 0;
      r = std::from_chars(begin, end, v);
    }
    if (r.ec == std::errc::result_out_of_range)
      return fmt::format("{} is out of range for this flag", text);
    if (r.ec != std::errc{} || r.ptr != end || text.empty())
      return fmt::format("'{}' is not {}", text,
                         type == "UINT" ? "a whole number >= 0" : "an integer");
    return "";
  }
  double v = 0;
  const auto r = std::from_chars(begin, end, v);
  if (r.ec != std::errc{} || r.ptr != end || text.empty() || !std::isfinite(v))
    return fmt::format("'{}' is not a finite number", text);
  return "";
}

// Every INT, UINT and FLOAT option of `app` and its subcommands reads plain decimal text.
void take_plain_numbers(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    if (type != "INT" && type != "UINT" && type != "FLOAT") continue;
    o->check(CLI::Validator([type](std::string& text) { return plain_number_problem(text, type); },
                            "", "number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    take_plain_numbers(*sub);
}

// --step-spin-us, on a node (its channel threads) and on a cluster run (the driver's reader).
void add_step_spin_option(CLI::App& cmd, int64_t& us, const std::string& who) {
  cmd.add_option(
         "--step-spin-us", us,
         "microseconds " + who
             + " polls before it sleeps, at most 100000 (lower latency on idle cores, a core "
               "busy meanwhile)")
      ->capture_default_str();
}

// --debug-step-times, on a node and on a run: the fan-out profile's marks (step_timeline.hpp).
void add_step_times_option(CLI::App& cmd, std::string& path, const std::string& when) {
  cmd.add_option("--debug-step-times", path,
                 "testing: append when each step passes each point of its way (CSV, "
                 "bench/step_times.py reads it) to this file "
                     + when)
      ->group("Testing");
}

// vLLM's flags of one subcommand, and the options they must agree with.
struct vllm_options {
  vllm_flags flags;
  CLI::Option* cudagraph_mode = nullptr;
  CLI::Option* cudagraph_capture_sizes = nullptr;
};

// vLLM's spellings: --kv-cache-memory-bytes is registered with --kv-cache-memory; -tp is
// rewritten before parsing (spell_vllm_short_flags).
void add_vllm_flags(CLI::App& cmd, vllm_options& v) {
  cmd.add_flag("--enforce-eager", v.flags.enforce_eager,
               "vLLM's flag: no CUDA graphs (= --cudagraph-mode none)");
  cmd.add_option("--compilation-config", v.flags.compilation_config,
                 "vLLM's flag: JSON; its cudagraph_mode and cudagraph_capture_sizes are used");
}

// The flags plan and run share: the model, its split, its budget and its graphs.
void add_model_flags(CLI::App& cmd, plan_flags& f, bool model_required, vllm_options& v) {
  auto* model =
      cmd.add_option("--model", f.model, "config.json path, or a shipped name (e.g. llama-3.1-8b)");
  if (model_required) model->required();
  cmd.add_option("--tensor-parallel-size,--tp", f.tensor_parallel_size,
                 "ranks that split heads (also -tp)");
  cmd.add_option("--dtype", f.dtype, "auto|bfloat16|float16|float32 (model dtype)");
  cmd.add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto|fp8");
  cmd.add_option("--block-size", f.block_size, "tokens per KV cache block");
  cmd.add_option("--max-model-len", f.max_model_len,
                 "longest request in tokens (default: the model's max_position_embeddings)");
  cmd.add_option("--max-num-seqs", f.max_num_seqs, "requests per step");
  cmd.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "tokens per step");
  cmd.add_option("--num-speculative-tokens", f.num_speculative_tokens,
                 "draft tokens per decode step (decode query length is 1 + this)");
  cmd.add_option("--kv-cache-memory,--kv-cache-memory-bytes", f.kv_cache_memory,
                 "KV cache bytes per rank (20GiB, 21474836480; or one value per rank: a,b,...); "
                 "default on a CPU 256MiB, on a GPU what is left of it");
  cmd.add_option("--gpu-memory", f.gpu_memory,
                 "device memory per rank (instead of "
                 "--kv-cache-memory)");
  cmd.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "fraction of --gpu-memory kvactor may use");
  cmd.add_option("--weights-memory", f.weights_memory,
                 "weight bytes per rank, taken off the "
                 "budget");
  cmd.add_option("--num-gpu-blocks-override", f.num_gpu_blocks_override,
                 "use exactly this many blocks");
  v.cudagraph_mode = cmd.add_option("--cudagraph-mode", f.cudagraph_mode,
                                    "none|piecewise|full|full_decode_only|full_and_piecewise");
  v.cudagraph_capture_sizes =
      cmd.add_option("--cudagraph-capture-sizes", f.cudagraph_capture_sizes_text,
                     "comma-separated token counts (default: the ladder from --max-num-seqs)");
  add_vllm_flags(cmd, v);
  cmd.add_option("--device", f.device,
                 f.device == "auto" ? "auto|cpu|cuda (auto: the GPU when one serves, else the CPU)"
                                    : "cuda|cpu: the device to plan for");
  cmd.add_option("--attention-backend", f.attention_backend, "auto|reference|paged|mla");
}

void add_plan_flags(CLI::App& cmd, plan_flags& f, vllm_options& v) {
  add_model_flags(cmd, f, true, v);
  cmd.add_option("--kv-cache-layout", f.kv_cache_layout,
                 "LBHNC (HND)|LBNHC (NHD)|LHBNC|BLHNC|BLNHC|BHLNC");
  cmd.add_flag("--allow-chunked-local-attn-with-hybrid-kv-cache",
               f.allow_chunked_local_attn_with_hybrid_kv_cache,
               "hybrid groups for chunked local attention (vLLM: "
               "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; run keeps vLLM's default)");
  cmd.add_flag("--disable-hybrid-kv-cache-manager", f.disable_hybrid_kv_cache_manager,
               "one KV cache group for hybrid models");
  cmd.add_flag("--kv-sharing-fast-prefill", f.kv_sharing_fast_prefill,
               "let trailing KV-sharing layers skip prefill tokens");
  cmd.add_flag("--json", f.json, "print one JSON object (schema kvactor.plan/1)");
}

// Fault injection and benchmark modes, grouped apart in --help.
void add_run_testing_flags(CLI::App& cmd, run_flags& f) {
  cmd.add_option("--chaos", f.chaos.chaos,
                 "testing: SEED:RATE, with probability RATE each message between the driver "
                 "and a rank is lost, repeated or late, and each from a rank to its builders and "
                 "graph manager late; steps not answered are re-sent")
      ->group("Testing");
  cmd.add_option("--chaos-kill", f.chaos.kill, "testing: rank RANK exits at step STEP (RANK:STEP)")
      ->group("Testing");
  cmd.add_option("--chaos-stall", f.chaos.stall,
                 "testing: rank RANK stops answering at step STEP (RANK:STEP)")
      ->group("Testing");
  cmd.add_flag("--no-kernels", f.no_kernels,
               "benchmarks: run the step protocol alone (no decoder; tokens are 0)")
      ->group("Testing");
  cmd.add_option("--debug-stall", f.tp.debug_stall,
                 "testing: rank RANK stops answering before its collective #N (RANK:N)")
      ->group("Testing");
  cmd.add_option("--debug-fail-capture", f.tp.debug_fail_capture,
                 "testing: rank RANK's CUDA graph capture #N fails (RANK:N); the group runs "
                 "that graph eagerly")
      ->group("Testing");
}

void add_run_flags(CLI::App& cmd, run_flags& f, vllm_options& v) {
  f.plan.device = "auto";
  add_model_flags(cmd, f.plan, false, v);
  cmd.add_option("--ubatches", f.ubatches, "microbatches per step: 1 or 2");
  cmd.add_option("--requests", f.requests, "requests in the synthetic workload");
  cmd.add_option("--prompt-len", f.prompt_len, "prompt tokens: N or MIN:MAX");
  cmd.add_option("--output-len", f.output_len, "generated tokens: N or MIN:MAX");
  cmd.add_option("--arrival-rate", f.arrival_rate, "requests per second, or inf (all at once)");
  cmd.add_option("--shared-prefix-len", f.shared_prefix_len,
                 "the first N tokens of every prompt are the same (a shared system prompt)");
  cmd.add_option("--num-shared-prefixes", f.num_shared_prefixes,
                 "with --shared-prefix-len: each prompt starts with one of this many prefixes");
  cmd.add_flag("--enable-prefix-caching", f.enable_prefix_caching,
               "reuse the KV cache of full blocks a shared prefix already computed (the default; "
               "models with state layers cache nothing)");
  cmd.add_flag_callback(
      "--no-enable-prefix-caching", [&f] { f.enable_prefix_caching = false; },
      "compute every prompt in full");
  cmd.add_option("--seed", f.seed, "seed of the workload and the weights");
  cmd.add_option("--logprobs", f.logprobs,
                 "every request reports its tokens' logprobs and the N most likely tokens (0-20; "
                 "in --summary-json)");
  cmd.add_option("--summary-json", f.summary_json, "write the summary (kvactor.run/1) here");
  cmd.add_option("--record", f.record, "record every actor message of the run into this trace");
  cmd.add_flag_callback(
      "--no-progress", [&f] { f.progress = false; }, "no progress line on the terminal");
  cmd.add_option("--stats-interval", f.stats_interval_s,
                 "seconds between vLLM's stats lines at info level (0: none)");
  cmd.add_flag_callback(
      "--disable-log-stats", [&f] { f.stats_interval_s = 0; }, "vLLM's flag: no stats lines");
  cmd.add_option("--metrics-port", f.metrics_port,
                 "serve Prometheus /metrics and /health on this port (0: any free one)");
  cmd.add_option("--metrics-host", f.metrics_host, "the address --metrics-port listens on")
      ->capture_default_str();
  cmd.add_option("--inject-port", f.inject_port,
                 "listen for `kvactor inject` on 127.0.0.1:PORT (0: any free port)");
  cmd.add_option("--max-message-bytes", f.max_message_bytes,
                 "the largest message a node or injector may send this run; a larger "
                 "one is refused and its connection closed");
  cmd.add_option("--cudagraph-capture", f.cudagraph_capture,
                 "startup|lazy: capture every planned graph before the first step, or serve "
                 "eagerly at once and capture the sizes seen, between steps");
  cmd.add_option("--cudagraph-memory", f.cudagraph_memory_text,
                 "device bytes all CUDA graphs may hold (reserved off the KV cache)");
  cmd.add_option("--nodes", f.nodes,
                 "cluster mode: HOST:PORT,... of `kvactor node` processes that host the ranks");
  cmd.add_option("--communicator", f.tp.communicator,
                 "auto|host|nccl|device: how tensor-parallel ranks meet (auto: nccl for GPU ranks "
                 "on GPUs of their own, device for GPU ranks sharing one)");
  cmd.add_option("--gpu-ids", f.tp.gpu_ids,
                 "each GPU rank's CUDA device, e.g. 0,0,0,0 (several ranks on one GPU: a "
                 "testing and debugging mode; default: rank r on GPU r)");
  cmd.add_option("--collective-timeout", f.tp.collective_timeout_s,
                 "seconds a collective (and NCCL start-up) may wait for the other ranks");
  cmd.add_option("--tls-cert", f.tls_cert, "with --nodes: this driver's certificate (PEM)");
  cmd.add_option("--tls-key", f.tls_key, "with --nodes: its private key (PEM)");
  cmd.add_option("--tls-ca", f.tls_ca, "with --nodes: the CA that signs every node (PEM)");
  cmd.add_option("--restart-policy", f.restart_policy,
                 "with --nodes: none (a lost node ends the run) | rebuild (wait for it, rebuild "
                 "the group, re-run what did not finish)");
  cmd.add_option("--restart-wait", f.restart_wait_s,
                 "with --restart-policy rebuild: seconds the lost nodes may take to return");
  cmd.add_option("--step-path", f.step_path,
                 "with --nodes: channel (each step on a connection of its own beside the "
                 "middleman, behind the same cookie or TLS) | middleman")
      ->capture_default_str();
  add_step_spin_option(cmd, f.step_spin_us, "the step channel's reader (with --nodes)");
  add_step_times_option(cmd, f.debug_step_times, "at the end of the run");
  cmd.add_option("--load-format", f.load_format,
                 "auto (a model directory's safetensors; a config alone, weights generated from "
                 "--seed) | synthetic (generated weights for a model directory too)");
  cmd.add_option("--step-timeout", f.chaos.step_timeout_s,
                 "seconds a rank may take to answer a step before the run ends naming it (0: "
                 "no limit)")
      ->capture_default_str();
  add_run_testing_flags(cmd, f);
}

void add_trace_show_flags(CLI::App& cmd, trace_show_flags& f) {
  cmd.add_option("file", f.file, "the trace file")->required();
  cmd.add_option("--step", f.step, "only the messages of this step (seq)");
  cmd.add_flag("--json", f.json, "one JSON array of records");
}

void add_trace_export_flags(CLI::App& cmd, trace_export_flags& f) {
  cmd.add_option("file", f.file, "the trace file")->required();
  cmd.add_option("--format", f.format, "chrome (trace-event JSON: Perfetto, chrome://tracing)")
      ->capture_default_str();
  cmd.add_option("--out", f.out, "write here instead of standard output");
}

void add_replay_flags(CLI::App& cmd, replay_flags& f) {
  cmd.add_option("file", f.file, "the trace file (run --record)")->required();
  cmd.add_option("--until-step", f.until_step, "stop after this step (seq)");
  cmd.add_flag("--verify", f.verify, "check every reply against the recording");
  cmd.add_flag("--json", f.json, "print one JSON object (schema kvactor.replay/1)");
  cmd.add_option("--actor", f.actor,
                 "replay one actor alone, the others stubbed from the trace: driver, "
                 "rank[N] or cudagraph@rank[N]");
}

void add_node_flags(CLI::App& cmd, node_flags& f) {
  cmd.add_option("--listen", f.listen,
                 "HOST:PORT to listen on (loopback unless TLS is given; port 0: any)");
  cmd.add_option("--cpu-ranks", f.cpu_ranks, "CPU rank slots (default 1 without GPUs)");
  cmd.add_option("--gpus", f.gpus, "GPU indices, one rank slot each (default: all)");
  cmd.add_option("--tls-cert", f.tls_cert, "this node's certificate (PEM)");
  cmd.add_option("--tls-key", f.tls_key, "its private key (PEM)");
  cmd.add_option("--tls-ca", f.tls_ca, "the CA that signs every peer (PEM)");
  cmd.add_option("--max-message-bytes", f.max_message_bytes,
                 "the largest message a driver may send this node; a larger one is "
                 "refused and its connection closed");
  cmd.add_option("--metrics-port", f.metrics_port,
                 "serve Prometheus /metrics and /health on this port (0: any free one)");
  cmd.add_option("--metrics-host", f.metrics_host, "the address --metrics-port listens on")
      ->capture_default_str();
  add_step_spin_option(cmd, f.step_spin_us, "each step channel thread");
  add_step_times_option(cmd, f.debug_step_times, "each time a driver releases the node");
  cmd.add_option("--debug-build-id", f.debug_build_id, "testing: claim another build")
      ->group("Testing");
}

// The engine flags `run` takes, for a subcommand that serves one checkpoint directory.
void add_checkpoint_engine_flags(CLI::App& cmd, plan_flags& engine, vllm_options& v,
                                 const char* model_help) {
  engine.device = "auto";
  add_model_flags(cmd, engine, true, v);
  cmd.get_option("--model")->description(model_help);
}

// --nodes and its TLS, for the commands that serve a checkpoint (serve, batch).
void add_cluster_flags(CLI::App& cmd, cluster_flags& f) {
  cmd.add_option("--nodes", f.nodes,
                 "HOST:PORT,... of `kvactor node` processes that host the ranks (default: here)");
  cmd.add_option("--tls-cert", f.tls_cert, "with --nodes: this driver's certificate (PEM)");
  cmd.add_option("--tls-key", f.tls_key, "with --nodes: its private key (PEM)");
  cmd.add_option("--tls-ca", f.tls_ca, "with --nodes: the CA that signs every node (PEM)");
}

void add_serve_flags(CLI::App& cmd, serve_flags& f, vllm_options& v) {
  add_checkpoint_engine_flags(
      cmd, f.engine, v, "a Hugging Face model directory (config.json, safetensors, tokenizer)");
  cmd.add_option("--host", f.host, "the address to listen on");
  cmd.add_option("--port", f.port, "the port to listen on (0: any free port)");
  cmd.add_option("--served-model-name", f.served_model_name,
                 "the name requests use (default: the model directory's name)");
  cmd.add_option("--api-key", f.api_key,
                 "ask for this key (Authorization: Bearer KEY) on /v1 (or KVACTOR_API_KEY)");
  cmd.add_option("--chat-template", f.chat_template,
                 "a Jinja chat template file (default: the model directory's)");
  cmd.add_option("--max-waiting-requests", f.max_waiting_requests,
                 "requests served at once; more are answered 429");
  cmd.add_option("--max-body-bytes", f.max_body_bytes, "the largest request body (413 beyond)");
  cmd.add_option("--shutdown-timeout", f.shutdown_timeout_s,
                 "seconds requests in flight may take after SIGTERM before they fail");
  cmd.add_option("--seed", f.seed, "seed of response ids and of draws that name no seed");
  add_cluster_flags(cmd, f.cluster);
}

void add_batch_flags(CLI::App& cmd, batch_flags& f, vllm_options& v) {
  add_checkpoint_engine_flags(
      cmd, f.engine, v, "a Hugging Face model directory (config.json, safetensors, tokenizer)");
  cmd.add_option("-i,--input-file", f.input, "OpenAI's batch input: one JSON request per line")
      ->required();
  cmd.add_option("-o,--output-file", f.output,
                 "one JSON answer per input line, written as each is answered")
      ->required();
  cmd.add_option("--served-model-name", f.served_model_name,
                 "the name lines' \"model\" may use (default: the model directory's name)");
  cmd.add_option("--chat-template", f.chat_template,
                 "a Jinja chat template file (default: the model directory's)");
  cmd.add_option("--seed", f.seed, "seed of output ids and of draws that name no seed");
  add_cluster_flags(cmd, f.cluster);
}

void add_generate_flags(CLI::App& cmd, generate_flags& f, vllm_options& v) {
  add_checkpoint_engine_flags(cmd, f.engine, v,
                              "a Hugging Face model directory (config.json, safetensors)");
  cmd.add_option("--prompt", f.prompt, "the prompt as text (needs the model's tokenizer)");
  cmd.add_option("--prompt-ids", f.prompt_ids, "the prompt as token ids: 1,2,3");
  cmd.add_option("--max-tokens", f.max_tokens, "tokens to generate at most");
  cmd.add_option("--temperature", f.temperature, "0: greedy (the default); else sample");
  cmd.add_option("--top-k", f.top_k, "sample among the k most likely tokens (0: all)");
  cmd.add_option("--top-p", f.top_p, "sample within this probability mass (1: all)");
  cmd.add_option("--seed", f.seed, "the request's sampling seed (the same seed, the same tokens)");
  cmd.add_option("--stop-token-ids", f.stop_token_ids, "more token ids that end the request");
  cmd.add_flag("--ignore-eos", f.ignore_eos,
               "do not stop at the model's end-of-sequence tokens (generation_config.json)");
  cmd.add_flag("--json", f.json, "one object: prompt_ids, output_ids, text, finish_reason");
}

void add_inject_flags(CLI::App& cmd, inject_flags& f) {
  cmd.add_option("--to", f.to, "HOST:PORT of the running process")->required();
  cmd.add_option("--message", f.message,
                 "the message: JSON ([type, version, payload] or a record of trace "
                 "show --json) or a MessagePack envelope")
      ->required();
  cmd.add_option("--actor", f.actor,
                 "driver|rank[N] (default: the record's receiver, else by type)");
  cmd.add_option("--timeout", f.timeout_s,
                 "seconds for all of it: connecting, the reply and, with --wait, the result");
  cmd.add_flag("--wait", f.wait,
               "a request: wait until it finished or failed and print its result (its tokens)");
  cmd.add_option("--max-message-bytes", f.max_message_bytes, "the largest reply the run may send");
  cmd.add_flag("--json", f.json, "print the reply as JSON");
}

// What every subcommand parses into.
struct cli_flags {
  std::string log_level = "warn";
  std::string log_format = "text";
  plan_flags plan;
  run_flags run;
  trace_show_flags show;
  trace_export_flags export_trace;
  replay_flags replay;
  node_flags node;
  inject_flags inject;
  generate_flags generate;
  serve_flags serve;
  batch_flags batch;
  vllm_options plan_vllm, run_vllm, generate_vllm, serve_vllm, batch_vllm;
};

// The subcommands, to tell after parsing which one was given.
struct subcommands {
  CLI::App* plan;
  CLI::App* run;
  CLI::App* show;
  CLI::App* export_trace;
  CLI::App* replay;
  CLI::App* node;
  CLI::App* inject;
  CLI::App* generate;
  CLI::App* serve;
  CLI::App* batch;
};

// In the order `kvactor --help` lists them.
subcommands add_subcommands(CLI::App& app, cli_flags& f) {
  subcommands cmd{};
  cmd.plan = app.add_subcommand(
      "plan", "what the KV cache of a model needs on these GPUs: groups, blocks, graphs");
  add_plan_flags(*cmd.plan, f.plan, f.plan_vllm);
  cmd.run = app.add_subcommand(
      "run", "local single-node mode (the default): serve a synthetic workload with the actors");
  add_run_flags(*cmd.run, f.run, f.run_vllm);
  cmd.generate = app.add_subcommand(
      "generate", "continue one prompt with a real model (a Hugging Face directory)");
  add_generate_flags(*cmd.generate, f.generate, f.generate_vllm);
  cmd.serve = app.add_subcommand(
      "serve", "an OpenAI-compatible server for a real model (a Hugging Face directory)");
  add_serve_flags(*cmd.serve, f.serve, f.serve_vllm);
  cmd.batch = app.add_subcommand(
      "batch", "answer an OpenAI batch file (JSONL) offline with a real model (vLLM's run-batch)");
  add_batch_flags(*cmd.batch, f.batch, f.batch_vllm);
  auto* trace = app.add_subcommand("trace", "read a trace recorded with run --record");
  trace->require_subcommand(1);
  cmd.show = trace->add_subcommand("show", "a readable timeline of a trace");
  add_trace_show_flags(*cmd.show, f.show);
  cmd.export_trace = trace->add_subcommand("export", "a trace in a format other tools open");
  add_trace_export_flags(*cmd.export_trace, f.export_trace);
  cmd.replay = app.add_subcommand("replay", "re-deliver a recorded run to fresh ranks");
  add_replay_flags(*cmd.replay, f.replay);
  cmd.node = app.add_subcommand(
      "node", "cluster mode: one node process; hosts the ranks a driver (run --nodes) asks for");
  add_node_flags(*cmd.node, f.node);
  cmd.node->fallthrough();
  cmd.inject = app.add_subcommand(
      "inject", "deliver one typed message to a running kvactor (run --inject-port)");
  add_inject_flags(*cmd.inject, f.inject);
  // Flags after the subcommand reach the app too (kvactor plan ... --log-level debug).
  cmd.plan->fallthrough();
  cmd.run->fallthrough();
  return cmd;
}

// --log-format's value as typed ("" when not given): known before the parser runs.
std::string log_format_of(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--log-format" && i + 1 < argc) return argv[i + 1];
    if (a.starts_with("--log-format=")) return std::string{a.substr(13)};
  }
  return "";
}

bool wants_json(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]} == "--json") return true;
  return false;
}

// The subcommand the arguments name (the deepest, as in `trace show`), else the app itself.
const CLI::App* subcommand_named(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == argv[i]) {
        at = sub;
        break;
      }
  }
  return at;
}

// " (did you mean --X?)" for the first --flag of argv that neither the subcommand nor the app
// knows, when one of theirs is close; "" otherwise.
std::string unknown_flag_hint(const CLI::App& app, const CLI::App& sub, int argc,
                              const char* const* argv) {
  std::vector<std::string> known;
  for (const CLI::App* a : {&app, &sub})
    for (const CLI::Option* o : a->get_options())
      for (const auto& name : o->get_lnames())
        known.push_back("--" + name);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), arg) == known.end()) return did_you_mean(arg, known);
  }
  return "";
}

// The options of the app itself, and whether each takes a value.
bool is_global_option(std::string_view a, bool* takes_value) {
  *takes_value = a == "--log-level" || a == "--log-format";
  return *takes_value || a.starts_with("--log-level=") || a.starts_with("--log-format=")
         || a == "--version" || a == "--help" || a == "-h" || a == "--help-all";
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    out.push_back(sub->get_name());
  return out;
}

// `kvactor` alone runs `run`, so `kvactor --requests 2` does too: with no subcommand named, the
// first flag that is not the app's own starts `run`'s. A bare word is left for the parser to
// refuse (with a suggestion).
std::vector<std::string> with_default_subcommand(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    bool takes_value = false;
    if (is_global_option(args[i], &takes_value)) {
      i += takes_value ? 1 : 0;
      continue;
    }
    if (args[i].starts_with("-")) args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "run");
    return args;
  }
  return args;
}

// " (did you mean `kvactor run`?)" for a bare word where a subcommand was expected.
std::string unknown_subcommand_hint(const CLI::App& app, int argc, const char* const* argv) {
  const auto names = subcommand_names(app);
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    bool takes_value = false;
    if (is_global_option(a, &takes_value)) {
      i += takes_value ? 1 : 0;
      continue;
    }
    if (a.starts_with("-") || std::find(names.begin(), names.end(), a) != names.end()) return "";
    const auto close = closest_name(a, names);
    return close ? fmt::format(" (did you mean `kvactor {}`?)", *close)
                 : fmt::format(" ('{}' is not a subcommand: {})", a, fmt::join(names, ", "));
  }
  return "";
}

// Help and parse errors end the command here: their exit code, or nothing to go on.
std::optional<int> parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                         std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return exit_ok;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return exit_ok;
  } catch (const CLI::CallForVersion& e) {
    out << e.what();
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    const CLI::App* sub = subcommand_named(app, argc, argv);
    std::string who = "kvactor";
    for (const CLI::App* a = sub; a != &app; a = a->get_parent())
      who.insert(7, " " + a->get_name());
    const std::string msg = e.what() + unknown_flag_hint(app, *sub, argc, argv)
                            + (sub == &app ? unknown_subcommand_hint(app, argc, argv) : "");
    fmt::print(err, "{}: error: {}; `{} --help` lists the flags\n", who, msg, who);
    if (wants_json(argc, argv)) out << nlohmann::json{{"error", msg}}.dump() << '\n';
    return exit_bad_input;
  }
  return std::nullopt;
}

// Sets up the "kvactor" logger at --log-level, in --log-format: an unknown value is bad input.
std::optional<int> set_log_level(const std::string& log_level, const std::string& log_format,
                                 std::ostream& err) {
  if (log_format != "text" && log_format != "json") {
    fmt::print(err, "kvactor: error: --log-format: unknown value '{}' (expected text or json)\n",
               log_format);
    return exit_bad_input;
  }
  auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off") {
    fmt::print(err,
               "kvactor: error: --log-level: unknown value '{}' (expected trace, debug, "
               "info, warn, error, critical or off)\n",
               log_level);
    return exit_bad_input;
  }
  if (!spdlog::get("kvactor")) spdlog::set_default_logger(spdlog::stderr_color_mt("kvactor"));
  if (log_format == "json")
    spdlog::default_logger()->set_formatter(json_log_formatter());
  else
    spdlog::default_logger()->set_pattern("%+"); // spdlog's default text
  spdlog::set_level(level);
  return std::nullopt;
}

// vLLM's flags of the subcommand into its plan flags; a warning for each compilation-config key
// kvactor does not use, an error (exit_bad_input) for what cannot be honoured.
std::optional<int> apply_vllm(vllm_options& v, plan_flags& f, bool json, std::ostream& out,
                              std::ostream& err) {
  v.flags.cudagraph_mode_given = v.cudagraph_mode->count() > 0;
  v.flags.cudagraph_capture_sizes_given = v.cudagraph_capture_sizes->count() > 0;
  auto ignored = apply_vllm_flags(v.flags, f);
  if (!ignored) {
    fmt::print(err, "kvactor: error: {}\n", ignored.err().message);
    if (json) out << nlohmann::json{{"error", ignored.err().message}}.dump() << '\n';
    return exit_bad_input;
  }
  for (const auto& key : *ignored)
    spdlog::warn("--compilation-config: '{}' is vLLM's and has no use here; ignored", key);
  return std::nullopt;
}

int dispatch(const subcommands& cmd, const cli_flags& f, std::ostream& out, std::ostream& err) {
  if (*cmd.plan) return run_plan(f.plan, out, err);
  if (*cmd.show) return run_trace_show(f.show, out, err);
  if (*cmd.export_trace) return run_trace_export(f.export_trace, out, err);
  if (*cmd.replay) return run_replay(f.replay, out, err);
  if (*cmd.inject) return run_inject(f.inject, out, err);
  if (*cmd.generate) return run_generate(f.generate, out, err);
  if (*cmd.serve) return run_serve(f.serve, out, err);
  if (*cmd.batch) return run_batch(f.batch, out, err);
  if (*cmd.node) return run_node(f.node, out, err);
  return run_command(f.run, out, err); // `kvactor` alone runs the default local workload
}

} // namespace

int kvactor_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"kvactor: the attention and KV-cache layer of an LLM inference worker, as actors"};
  app.option_defaults()->always_capture_default(); // --help shows every default
  app.require_subcommand(0, 1);
  cli_flags f;
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "text|json (one JSON object per line, with request_id where a line names one)")
      ->capture_default_str();
  app.set_version_flag("--version", version_text(), "print the version of kvactor and its parts");
  const auto cmd = add_subcommands(app, f);
  take_plain_numbers(app);
  const std::vector<std::string> args = with_default_subcommand(spell_vllm_short_flags(argc, argv));
  std::vector<const char*> spelled;
  for (const auto& a : args)
    spelled.push_back(a.c_str());
  const int spelled_count = static_cast<int>(spelled.size());
  // With --log-format json, every line on stderr is JSON, the errors of parsing included.
  std::optional<json_lines_stream> json_err;
  if (log_format_of(spelled_count, spelled.data()) == "json") json_err.emplace(err);
  std::ostream& errors = json_err ? *json_err : err;
  if (auto code = parse(app, spelled_count, spelled.data(), out, errors)) return *code;
  if (auto code = set_log_level(f.log_level, f.log_format, errors)) return *code;
  if (*cmd.plan)
    if (auto code = apply_vllm(f.plan_vllm, f.plan, f.plan.json, out, errors)) return *code;
  if (*cmd.generate)
    if (auto code = apply_vllm(f.generate_vllm, f.generate.engine, f.generate.json, out, errors))
      return *code;
  if (*cmd.serve)
    if (auto code = apply_vllm(f.serve_vllm, f.serve.engine, false, out, errors)) return *code;
  if (*cmd.batch)
    if (auto code = apply_vllm(f.batch_vllm, f.batch.engine, false, out, errors)) return *code;
  if (!*cmd.plan && !*cmd.show && !*cmd.export_trace && !*cmd.replay && !*cmd.inject
      && !*cmd.generate && !*cmd.node && !*cmd.serve && !*cmd.batch)
    if (auto code = apply_vllm(f.run_vllm, f.run.plan, false, out, errors)) return *code;
  return dispatch(cmd, f, out, errors);
}

} // namespace kvactor
