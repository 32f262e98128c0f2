#include "deploy/trace_command.hpp"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "deploy/cli.hpp"
#include "deploy/trace_export.hpp"
#include "messages/codec.hpp"
#include "messages/cudagraph.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/trace.hpp"

namespace kvactor {

namespace {

// One line about a record's message, and the step it belongs to (if any).
struct described {
  std::string text;
  std::optional<uint64_t> seq;
};

template <class T, class F>
bool try_describe(const trace_record& r, F&& f, described& out) {
  if (r.type != detail::type_name_of(T{})) return false;
  auto x = decode_record<T>(r);
  if (!x) {
    out.text = "undecodable: " + x.err().message;
    return true;
  }
  out = f(*x);
  return true;
}

// The payload as JSON (fields in inspect() order): what `kvactor inject` takes back.
nlohmann::ordered_json payload_json(const trace_record& r) {
  try {
    auto envelope = nlohmann::ordered_json::from_msgpack(r.payload);
    if (envelope.is_array() && envelope.size() == 3) return envelope[2];
  } catch (const nlohmann::json::exception&) {
  }
  return nullptr;
}

// The step protocol: plans, replies and the builders' work.
bool describe_step(const trace_record& r, described& d) {
  return try_describe<step_plan>(
             r,
             [](const step_plan& p) {
               size_t tokens = 0;
               for (const auto& s : p.scheduled)
                 tokens += s.token_ids.size();
               return described{
                   fmt::format("seq {} epoch {}: {} new, {} finished, {} block updates, {} "
                               "requests / {} tokens, {} ubatch(es)",
                               p.seq, p.epoch, p.new_requests.size(), p.finished_requests.size(),
                               p.block_updates.size(), p.scheduled.size(), tokens, p.num_ubatches),
                   p.seq};
             },
             d)
         || try_describe<step_done>(
             r,
             [](const step_done& x) {
               return described{fmt::format("seq {}: {} sampled, {:.3f} ms ({:.3f} metadata)",
                                            x.seq, x.sampled.size(), x.timing.total_ns / 1e6,
                                            x.timing.metadata_ns / 1e6),
                                x.seq};
             },
             d)
         || try_describe<ubatch_work>(
             r,
             [](const ubatch_work& w) {
               return described{fmt::format("seq {} ubatch {}: tokens [{}, {}) requests [{}, {})",
                                            w.seq, w.ubatch, w.token_start, w.token_end,
                                            w.req_start, w.req_end),
                                w.seq};
             },
             d)
         || try_describe<metadata_ready>(
             r,
             [](const metadata_ready& m) {
               return described{fmt::format("seq {} ubatch {}: {} requests, {} tokens, built in "
                                            "{:.2f} us",
                                            m.seq, m.ubatch, m.num_reqs, m.num_tokens,
                                            m.build_ns / 1e3),
                                m.seq};
             },
             d);
}

// Start-up and the run: configurations, plans, readiness, requests, results.
bool describe_startup(const trace_record& r, described& d) {
  return try_describe<rank_config>(
             r,
             [](const rank_config& c) {
               return described{fmt::format("rank {}/{} of {} on {}, {} bytes of KV cache", c.rank,
                                            c.tensor_parallel_size, c.model, to_string(c.device),
                                            c.kv_cache_memory),
                                std::nullopt};
             },
             d)
         || try_describe<rank_plan>(
             r,
             [](const rank_plan& p) {
               return described{fmt::format("rank {}: {} blocks planned, {} groups", p.rank,
                                            p.kv.config.num_blocks, p.kv.config.groups.size()),
                                std::nullopt};
             },
             d)
         || try_describe<rank_ready>(
             r,
             [](const rank_ready& x) {
               return described{fmt::format("rank {}: {} blocks, {} bytes, graphs {}", x.rank,
                                            x.num_blocks, x.kv_cache_bytes,
                                            to_string(x.graphs.mode)),
                                std::nullopt};
             },
             d)
         || try_describe<request_spec>(
             r,
             [](const request_spec& q) {
               return described{
                   fmt::format("request {}: {} prompt tokens, up to {} output, arrives "
                               "at {:.3f} ms",
                               q.request_id, q.prompt.size(), q.max_output_tokens,
                               q.arrival_ns / 1e6),
                   std::nullopt};
             },
             d)
         || try_describe<request_result>(
             r,
             [](const request_result& x) {
               return described{
                   x.finished ? fmt::format("request {} finished ({}): tokens [{}]", x.request_id,
                                            to_string(x.reason), fmt::join(x.output, ", "))
                              : fmt::format("request {} failed after tokens [{}]: {}", x.request_id,
                                            fmt::join(x.output, ", "), x.failure),
                   std::nullopt};
             },
             d)
         || try_describe<request_await>(
             r,
             [](const request_await& x) {
               return described{fmt::format("await request {}", x.request_id), std::nullopt};
             },
             d)
         || try_describe<run_summary>(
             r,
             [](const run_summary& s) {
               return described{fmt::format("{} finished, {} failed, {} steps, digest {}",
                                            s.finished, s.failed, s.steps, s.output_digest),
                                std::nullopt};
             },
             d)
         || try_describe<step_rejected>(
             r,
             [](const step_rejected& x) {
               return described{fmt::format("seq {}: rank {} refused it ({} request(s) named): {}",
                                            x.seq, x.rank, x.request_ids.size(), x.reason.message),
                                x.seq};
             },
             d);
}

// CUDA graphs: what a rank asks, the plan, captures and dispatches.
bool describe_graphs(const trace_record& r, described& d) {
  return try_describe<cudagraph_request>(
             r,
             [](const cudagraph_request& x) {
               return described{
                   fmt::format("mode {}, max {} seqs / {} tokens, {} capture sizes given",
                               to_string(x.requested), x.max_num_seqs, x.max_num_batched_tokens,
                               x.capture_sizes.size()),
                   std::nullopt};
             },
             d)
         || try_describe<cudagraph_plan>(
             r,
             [](const cudagraph_plan& x) {
               return described{fmt::format("mode {} (asked {}), {} full and {} piecewise graphs",
                                            to_string(x.mode), to_string(x.requested),
                                            x.full_graphs.size(), x.piecewise_graphs.size()),
                                std::nullopt};
             },
             d)
         || try_describe<cudagraph_captured>(
             r,
             [](const cudagraph_captured& x) {
               return described{
                   x.error.empty()
                       ? fmt::format("captured {} graph of {} tokens: {} bytes, {:.1f} ms",
                                     to_string(x.graph.mode), x.graph.num_tokens, x.bytes,
                                     static_cast<double>(x.duration_ns) / 1e6)
                       : fmt::format("{} graph of {} tokens stays eager: {}",
                                     to_string(x.graph.mode), x.graph.num_tokens, x.error),
                   std::nullopt};
             },
             d)
         || try_describe<batch_descriptor>(
             r,
             [](const batch_descriptor& b) {
               return described{fmt::format("{}: {} tokens, {} requests", to_string(b.mode),
                                            b.num_tokens, b.num_reqs),
                                std::nullopt};
             },
             d);
}

// One line per message type: the step, start-up and graph families in turn.
described describe(const trace_record& r) {
  described d{fmt::format("{} bytes", r.payload.size()), std::nullopt};
  (void)(describe_step(r, d) || describe_startup(r, d) || describe_graphs(r, d));
  return d;
}

} // namespace

std::string describe_record(const trace_record& r) {
  return describe(r).text;
}

std::optional<uint64_t> record_step(const trace_record& r) {
  return describe(r).seq;
}

int run_trace_show(const trace_show_flags& flags, std::ostream& out, std::ostream& err) {
  std::ifstream in(flags.file, std::ios::binary);
  if (!in) {
    fmt::print(err, "kvactor trace: error: {}: cannot open the file\n", flags.file);
    return exit_bad_input;
  }
  auto records = trace_reader(in).read_all();
  if (!records) {
    fmt::print(err, "kvactor trace: error: {}: {}\n", flags.file, records.err().message);
    return exit_bad_input;
  }
  std::vector<described> lines;
  std::optional<uint64_t> first, last; // the steps the trace holds
  for (const auto& r : *records) {
    lines.push_back(describe(r));
    if (const auto seq = lines.back().seq) {
      first = std::min(first.value_or(*seq), *seq);
      last = std::max(last.value_or(*seq), *seq);
    }
  }
  if (flags.step && std::none_of(lines.begin(), lines.end(), [&](const described& d) {
        return d.seq == flags.step;
      })) {
    fmt::print(err, "kvactor trace: error: --step {}: {} holds {}\n", *flags.step, flags.file,
               first ? fmt::format("steps {} to {}", *first, *last) : std::string{"no step"});
    return exit_bad_input;
  }
  auto json = nlohmann::ordered_json::array();
  for (size_t i = 0; i < records->size(); ++i) {
    const auto& r = (*records)[i];
    const auto& d = lines[i];
    if (flags.step && d.seq != flags.step) continue;
    if (flags.json) {
      json.push_back({{"index", r.index},
                      {"timestamp_ns", r.timestamp_ns},
                      {"sender", r.sender},
                      {"receiver", r.receiver},
                      {"type", r.type},
                      {"summary", d.text},
                      {"version", schema_version},
                      {"payload", payload_json(r)}});
      continue;
    }
    auto type = r.type.substr(r.type.rfind(':') + 1);
    fmt::print(out, "{:>6} {:>11.3f} ms  {:>24} -> {:<24} {:<15} {}\n", r.index,
               r.timestamp_ns / 1e6, r.sender, r.receiver, type, d.text);
  }
  if (flags.json) out << json.dump(2) << '\n';
  return exit_ok;
}

int run_trace_export(const trace_export_flags& flags, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& why) {
    fmt::print(err, "kvactor trace: error: {}\n", why);
    return exit_bad_input;
  };
  if (flags.format != "chrome")
    return bad(fmt::format("--format: unknown value '{}' (expected chrome)", flags.format));
  std::ifstream in(flags.file, std::ios::binary);
  if (!in) return bad(fmt::format("{}: cannot open the file", flags.file));
  auto records = trace_reader(in).read_all();
  if (!records) return bad(fmt::format("{}: {}", flags.file, records.err().message));
  const std::string text = chrome_trace(*records).dump() + "\n";
  if (flags.out.empty()) {
    out << text;
    return exit_ok;
  }
  std::ofstream file(flags.out, std::ios::binary | std::ios::trunc);
  if (!(file << text)) return bad(fmt::format("--out: cannot write '{}'", flags.out));
  return exit_ok;
}

} // namespace kvactor
