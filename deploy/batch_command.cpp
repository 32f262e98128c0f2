#include "deploy/batch_command.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>

#include "actors/ingress/actor.hpp"
#include "actors/ingress/batch_file.hpp"
#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/served_model.hpp"
#include "deploy/serving_engine.hpp"
#include "kvactor/kernels/sampler.h"
#include "messages/register.hpp"

namespace kvactor {

namespace {

int refuse_batch(std::ostream& err, const std::string& message) {
  fmt::print(err, "kvactor batch: error: {}\n", message);
  return exit_bad_input;
}

// The output file, written a line at a time as answers come (on the ingress's thread), and the
// progress on stderr at most every two seconds.
class batch_writer {
public:
  batch_writer(std::ofstream file, std::ostream& err, uint64_t seed)
      : file_(std::move(file)), err_(err), seed_(seed) {}

  /// The requests to answer, once the input is read (for the progress lines).
  void expect(size_t total) {
    std::lock_guard lock(mu_);
    total_ = total;
  }

  void answer(const std::string& custom_id, int status, const std::string& body) {
    std::lock_guard lock(mu_);
    const auto n = ++written_;
    write(openai::batch_response_line(id(n, "batch_req"), custom_id, status, id(n, "req"), body));
    (status == 200 ? answered_ : failed_) += 1;
    report_progress(false);
  }
  void refuse(const std::string& custom_id, const std::string& why) {
    std::lock_guard lock(mu_);
    const auto n = ++written_;
    write(openai::batch_error_line(id(n, "batch_req"), custom_id, why));
    ++refused_;
  }
  /// "N lines: A answered, F failed, R refused".
  std::string summary() {
    std::lock_guard lock(mu_);
    report_progress(true);
    return fmt::format("{} lines: {} answered, {} failed, {} not requests", written_, answered_,
                       failed_, refused_);
  }
  bool write_failed() const { return !file_; }

private:
  std::string id(size_t n, const char* prefix) const {
    // Salted so that these ids never repeat the hex of the responses' own ids.
    constexpr uint64_t salt = 0x6261746368ULL; // "batch"
    return fmt::format("{}_{:016x}", prefix,
                       kernels::splitmix64(kernels::splitmix64(seed_ ^ salt) + n));
  }
  void write(const std::string& line) {
    file_ << line << '\n';
    file_.flush(); // a line written is kept, whatever happens to the process next
  }
  void report_progress(bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - last_report_ < std::chrono::seconds(2)) return;
    last_report_ = now;
    fmt::print(err_, "kvactor batch: {}/{} requests answered\n", answered_ + failed_, total_);
  }

  std::mutex mu_;
  std::ofstream file_;
  size_t total_ = 0;
  std::ostream& err_;
  uint64_t seed_;
  size_t written_ = 0, answered_ = 0, failed_ = 0, refused_ = 0;
  std::chrono::steady_clock::time_point last_report_ = std::chrono::steady_clock::now();
};

// A batch line's client: its one whole answer goes to the output file.
class batch_client final : public openai::client {
public:
  batch_client(std::shared_ptr<batch_writer> w, std::string custom_id)
      : w_(std::move(w)), custom_id_(std::move(custom_id)) {}
  void respond(int status, std::string body) override { w_->answer(custom_id_, status, body); }
  void begin_stream() override {} // never: a batch line that asks for a stream is refused
  void send(std::string) override {}
  void end_stream() override {}

private:
  std::shared_ptr<batch_writer> w_;
  std::string custom_id_;
};

// The input file's requests; lines that are none (or repeat a custom_id) get their error line.
expected<std::vector<openai::batch_request>> read_input(const std::string& path, batch_writer& w) {
  std::ifstream in(path);
  if (!in) return make_error(errc::io_error, fmt::format("-i: cannot read {}", path));
  std::vector<openai::batch_request> requests;
  std::set<std::string> ids;
  std::string text;
  for (size_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto parsed = openai::parse_batch_line(text, line);
    const bool fresh = parsed.custom_id.empty() || ids.insert(parsed.custom_id).second;
    if (parsed.request && !fresh)
      parsed = {std::nullopt, parsed.custom_id,
                fmt::format("line {}: custom_id '{}' was used before", line, parsed.custom_id)};
    if (!parsed.request) {
      w.refuse(parsed.custom_id, parsed.error);
      continue;
    }
    requests.push_back(std::move(*parsed.request));
  }
  return requests;
}

// Once the engine is ready: every request into the ingress's inbox, then a drain that stops the
// engine once the last is answered.
void feed(const ingress_actor& ing, const std::shared_ptr<ingress_inbox>& inbox,
          std::vector<openai::batch_request>& requests, const std::shared_ptr<batch_writer>& w) {
  for (auto& r : requests)
    inbox->push(
        ingress_call{r.kind, std::move(r.body), std::make_shared<batch_client>(w, r.custom_id)});
  caf::anon_send(ing, atom::wake_v);
  caf::anon_send(ing, atom::drain_v, caf::timespan{std::chrono::hours(24 * 365)},
                 std::string{"the batch ended"});
}

struct batch_engine {
  const batch_flags& flags;
  std::shared_ptr<batch_writer> writer;
  std::vector<openai::batch_request> requests;
  loaded_model model; // once the run is configured
  std::shared_ptr<ingress_inbox> inbox = std::make_shared<ingress_inbox>();
  ingress_actor ing;
  interrupt_watch interrupts;
};

engine_hooks hooks_of(batch_engine& b) {
  engine_hooks h;
  h.on_system = [&b](caf::actor_system& sys,
                     const run_configuration& run) -> expected<output_sink_actor> {
    auto model = load_served_model(b.flags.engine.model, b.flags.served_model_name,
                                   b.flags.chat_template, run.configs.front().max_model_len);
    if (!model) return model.err();
    b.model = std::move(*model);
    b.ing = sys.spawn(ingress, ingress_setup{b.model.served, {}, {}, b.inbox, b.flags.seed});
    return caf::actor_cast<output_sink_actor>(b.ing);
  };
  h.on_ready = [&b](const driver_actor& drv,
                    const std::vector<rank_ready>& ready) -> std::optional<run_failure> {
    caf::anon_send(b.ing, atom::start_v, caf::actor_cast<caf::actor>(drv),
                   ready.front().vocab_size);
    feed(b.ing, b.inbox, b.requests, b.writer);
    return std::nullopt;
  };
  h.on_end = [&b](caf::actor_system& sys) {
    caf::scoped_actor self{sys}; // the ingress has written every answer once it replies
    self->request(b.ing, std::chrono::seconds(10), atom::stats_v)
        .receive([](int64_t) {}, [](const caf::error&) {});
    caf::anon_send_exit(b.ing, caf::exit_reason::user_shutdown);
  };
  h.interrupts = &b.interrupts;
  return h;
}

} // namespace

int run_batch(const batch_flags& f, std::ostream& out, std::ostream& err) {
  const auto flags = engine_run_flags(f.engine, f.seed, f.cluster);
  auto options = check_run_flags(flags);
  if (!options) return refuse_batch(err, options.err().message);
  std::error_code same_ec;
  if (std::filesystem::equivalent(f.input, f.output, same_ec))
    return refuse_batch(
        err, fmt::format("-o: {} is the input file (-i); answers go elsewhere", f.output));
  std::ofstream file(f.output, std::ios::trunc);
  if (!file) return refuse_batch(err, fmt::format("-o: cannot write {}", f.output));
  batch_engine b{f, std::make_shared<batch_writer>(std::move(file), err, f.seed), {}, {}};
  auto requests = read_input(f.input, *b.writer);
  if (!requests) return refuse_batch(err, requests.err().message);
  b.requests = std::move(*requests);
  b.writer->expect(b.requests.size());
  auto hooks = hooks_of(b);
  const auto session = serve_engine(flags, *options, hooks, err);
  if (session.failure) {
    refuse_batch(err, session.failure->err.message);
    return session.failure->exit_code;
  }
  fmt::print(out, "kvactor batch: {} -> {}\n", b.writer->summary(), f.output);
  const auto& sum = session.summary; // from the engine's start to the last answer
  fmt::print(out, "kvactor batch: {} tokens generated in {:.2f} s ({:.0f} tokens/s)\n",
             sum.generated_tokens, sum.wall_s,
             sum.wall_s > 0 ? static_cast<double>(sum.generated_tokens) / sum.wall_s : 0.0);
  if (b.writer->write_failed())
    return refuse_batch(err, fmt::format("-o: writing {} failed", f.output));
  if (session.interrupted != 0) {
    fmt::print(err,
               "kvactor batch: interrupted ({}): the requests not finished failed, and their "
               "lines say so\n",
               signal_name(session.interrupted));
    return exit_failure;
  }
  return exit_ok;
}

} // namespace kvactor
