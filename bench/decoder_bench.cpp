// kvactor_decoder_bench: a real checkpoint on the GPU decoder, measured against what the machine
// can do in the same run:
//   - the disk: each safetensors file read cold (evicted from the page cache with
//     posix_fadvise) and warm, as GB/s
//   - loading: config + checkpoint mapping + device allocation + the pinned-staging upload, cold
//     and warm, as seconds and GB/s beside the read rates
//   - correctness (with DIR/expected.json from bench/hf/make_llama8b.py): per prompt, the
//     last-position logits' relative L2 to transformers', the first token, and whether the
//     greedy continuation is identical
//   - the decode step (one token per request, `--context` cached tokens each, forward + LM head +
//     argmax in one CUDA graph) at each batch size, beside its roofline: the weight bytes and KV
//     bytes it must read over the device-to-device copy ceiling measured here.
//
//   kvactor_decoder_bench --model DIR [--batches 1,8,32,128] [--context 512] [--replays 20]
//                         [--fp8-kv]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_gpu.hpp"
#include "tests/gpu/decoder_cuda_runner.hpp"
#include "tests/model/decoder_runner.hpp"

namespace kvactor::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using kernels::gpu_test::device_vec;
using kernels::gpu_test::loaded_decoder;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::vector<std::string> safetensors_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Drops the files' pages from the page cache, so that the next read comes from the disk.
void evict(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Reads every file once with 16 MiB reads; returns GB/s.
double read_rate(const std::vector<std::string>& files, uint64_t& bytes) {
  std::vector<char> buf(size_t{16} << 20);
  bytes = 0;
  const auto t = clock_type::now();
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + f);
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;)
      bytes += static_cast<uint64_t>(n);
    ::close(fd);
  }
  return static_cast<double>(bytes) / 1e9 / seconds_since(t);
}

struct load_result {
  std::unique_ptr<loaded_decoder> decoder;
  double seconds = 0;
  uint64_t device_bytes = 0;
};

load_result load(const std::string& dir, int32_t max_tokens, bool fused) {
  const auto t = clock_type::now();
  auto src = open_hf_decoder(dir, 1, 0);
  if (!src) throw std::runtime_error(src.err().message);
  load_result r;
  r.decoder = std::make_unique<loaded_decoder>(*src, max_tokens, fused);
  if (!r.decoder->error.empty()) throw std::runtime_error(r.decoder->error);
  r.seconds = seconds_since(t);
  r.device_bytes = r.decoder->decoder->weights_bytes();
  return r;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(diff / norm);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

// How often one greedy answer agrees with another, over the prompts.
struct agreement {
  size_t first = 0, whole = 0, prompts = 0;
  double worst_l2 = 0;
  void add(const std::vector<int32_t>& a, const std::vector<int32_t>& b, double l2) {
    first += !a.empty() && !b.empty() && a[0] == b[0] ? 1 : 0;
    whole += a == b ? 1 : 0;
    ++prompts;
    worst_l2 = std::max(worst_l2, l2);
  }
  std::string text() const {
    return fmt::format("worst logits relative L2 {:.4f}, first tokens identical {}/{}, identical "
                       "continuations {}/{}",
                       worst_l2, first, prompts, whole, prompts);
  }
};

// kvactor's answers against transformers' in bf16 and, where the script recorded them, against
// transformers' from the same weights in float32 (the exact answer), beside the distance of
// transformers' own bf16 answers from that exact one: the floor any bf16 implementation meets.
void compare(kernels::decoder_cuda& d, const nlohmann::json& want) {
  const auto& prompts = want["prompts"];
  const bool exact = want.contains("continuations_fp32");
  agreement to_bf16, to_fp32, floor;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto prompt = prompts[p].get<std::vector<int32_t>>();
    const auto cont = want["continuations"][p].get<std::vector<int32_t>>();
    kernels::gpu_test::decoder_cuda_runner run(d, 1,
                                               static_cast<int32_t>(prompt.size() + cont.size()));
    std::vector<float> logits;
    const auto got = run.greedy(0, prompt, static_cast<int32_t>(cont.size()), &logits);
    if (!run.status()) throw std::runtime_error(run.status().message());
    const auto bf16_ref = want["last_logits"][p].get<std::vector<float>>();
    to_bf16.add(got, cont, relative_l2(logits, bf16_ref));
    fmt::print("compare: prompt {} ({} tokens) to transformers bf16: logits relative L2 {:.4f}, "
               "first token {}, {} of {} tokens before the first divergence (its top-2 margin "
               "{:.2g} at the first token, {:.2g} at the smallest)\n",
               p, prompt.size(), relative_l2(logits, bf16_ref),
               got[0] == cont[0] ? "identical" : "DIFFERENT", common_prefix(got, cont), cont.size(),
               want.contains("first_margin") ? want["first_margin"][p].get<double>() : NAN,
               want["min_margin"][p].get<double>());
    if (!exact) continue;
    const auto fp32_ref = want["last_logits_fp32"][p].get<std::vector<float>>();
    const auto fp32_cont = want["continuations_fp32"][p].get<std::vector<int32_t>>();
    to_fp32.add(got, fp32_cont, relative_l2(logits, fp32_ref));
    floor.add(cont, fp32_cont, relative_l2(bf16_ref, fp32_ref));
    fmt::print("compare: prompt {} to transformers float32: kvactor bf16 {:.4f} relative L2, "
               "first token {}, {} tokens before the first divergence; transformers bf16 {:.4f}, "
               "first token {}, {} tokens\n",
               p, relative_l2(logits, fp32_ref), got[0] == fp32_cont[0] ? "identical" : "DIFFERENT",
               common_prefix(got, fp32_cont), relative_l2(bf16_ref, fp32_ref),
               cont[0] == fp32_cont[0] ? "identical" : "DIFFERENT", common_prefix(cont, fp32_cont));
  }
  // The longest prompt again in chunks (other GEMM and attention kernels): a diagnosis of where
  // an error comes from.
  if (want.contains("last_logits_fp32")) {
    const auto prompt = prompts.back().get<std::vector<int32_t>>();
    const auto ref = want["last_logits_fp32"].back().get<std::vector<float>>();
    for (size_t chunk : {size_t{64}, size_t{4}}) {
      kernels::gpu_test::decoder_cuda_runner run(d, 1, static_cast<int32_t>(prompt.size() + 1));
      std::vector<float> logits;
      for (size_t at = 0; at < prompt.size(); at += chunk) {
        const std::vector<int32_t> part(
            prompt.begin() + static_cast<ptrdiff_t>(at),
            prompt.begin() + static_cast<ptrdiff_t>(std::min(prompt.size(), at + chunk)));
        logits = run.step(std::vector<int32_t>(part.size(), 0), part);
      }
      fmt::print("compare: the last prompt in chunks of {}: relative L2 to float32 {:.4f}\n", chunk,
                 relative_l2(logits, ref));
    }
  }
  fmt::print("compare: kvactor to transformers bf16: {}\n", to_bf16.text());
  if (!exact) return;
  fmt::print("compare: kvactor to transformers float32: {}\n", to_fp32.text());
  fmt::print("compare: transformers bf16 to its float32 (the bf16 floor): {}\n", floor.text());
}

// One decode step of `batch` requests with `context` cached tokens each, as a CUDA graph, timed.
// The KV cache is bf16, or FP8 E4M3 (scales 1) with fp8.
void time_decode(kernels::decoder_cuda& d, int32_t batch, int32_t context, int32_t replays,
                 double ceiling_tbs, const nlohmann::json* peer, l2_flusher& flush, bool fp8) {
  const auto& s = d.spec();
  constexpr int32_t block = 16;
  const int32_t width = (context + 1 + block - 1) / block;
  const int64_t content = 2 * s.head_dim;
  const int64_t blocks = int64_t{batch} * width;
  const int64_t kv_elem_bytes = fp8 ? 1 : 2;
  const auto cache_bytes =
      static_cast<size_t>(blocks * s.num_kv_heads * block * content * kv_elem_bytes);
  std::vector<std::unique_ptr<device_vec<uint16_t>>> caches;
  std::vector<kernels::kv_view> views;
  for (size_t l = 0; l < s.layers.size(); ++l) {
    caches.push_back(std::make_unique<device_vec<uint16_t>>(cache_bytes / 2));
    check_cuda(cudaMemset(caches.back()->get(), 0, cache_bytes), "cudaMemset (KV)");
    views.push_back(test::paged_kv_view(
        caches.back()->get(), fp8 ? kernels::element_type::fp8_e4m3 : kernels::element_type::bf16,
        blocks, s.num_kv_heads, block, content));
  }
  std::vector<int32_t> ids(static_cast<size_t>(batch), 7), pos(static_cast<size_t>(batch), context),
      qsl, lens(static_cast<size_t>(batch), context + 1), table, rows;
  std::vector<int64_t> slots;
  for (int32_t r = 0; r <= batch; ++r)
    qsl.push_back(r);
  for (int32_t r = 0; r < batch; ++r) {
    rows.push_back(r);
    slots.push_back(int64_t{r} * width * block + context);
    for (int32_t b = 0; b < width; ++b)
      table.push_back(r * width + b);
  }
  device_vec<int32_t> d_ids(ids), d_pos(pos), d_qsl(qsl), d_lens(lens), d_table(table),
      d_rows(rows), d_tokens(static_cast<size_t>(batch));
  device_vec<int64_t> d_slots(slots);
  device_vec<float> hidden(static_cast<size_t>(batch) * static_cast<size_t>(s.hidden_size));
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  kernels::device_step step;
  step.token_ids = d_ids.get();
  step.positions = d_pos.get();
  step.num_tokens = batch;
  step.max_query_len = 1; // decodes only: no prefill launch
  step.layers.assign(views.size(),
                     {d_qsl.get(), d_lens.get(), d_table.get(), d_slots.get(), width, batch});
  auto must = [](const kernels::cuda_status& st) {
    if (!st) throw std::runtime_error(st.message());
  };
  auto decode_step = [&] {
    must(d.forward(step, views, {}, hidden.get()));
    must(d.greedy_async(hidden.get(), d_rows.get(), batch, d_tokens.get()));
  };
  if (replays == 0) { // --profile: one eager step, its kernels for ncu
    decode_step();
    check_cuda(cudaStreamSynchronize(d.stream()), "cudaStreamSynchronize");
    return;
  }
  graph_exec g(d.stream(), decode_step);
  const timing t = summarize(time_graph_replays(g.get(), d.stream(), flush, 3, replays));
  // Bytes the step must read: every weight but the embedding rows it gathers (the LM head is
  // the embedding when tied), and each request's K and V of every layer.
  const auto emb = d.tensor(kernels::decoder_tensor::embed);
  const bool tied = d.tensor(kernels::decoder_tensor::lm_head).data == nullptr;
  const double weight_bytes = static_cast<double>(d.weights_bytes() - (tied ? 0 : emb.bytes()));
  const double kv_bytes = static_cast<double>(batch) * (context + 1)
                          * static_cast<double>(s.layers.size()) * s.num_kv_heads * s.head_dim * 2
                          * static_cast<double>(kv_elem_bytes);
  const double roofline_us = (weight_bytes + kv_bytes) / (ceiling_tbs * 1e12) * 1e6;
  std::string peer_text;
  if (peer != nullptr && peer->contains(std::to_string(batch))) {
    const double ms = (*peer)[std::to_string(batch)].get<double>();
    peer_text =
        fmt::format("; transformers eager {:.2f} ms ({:.1f}x kvactor)", ms, ms * 1e3 / t.median_us);
  }
  fmt::print("decode{}: batch {:3d}, context {}: {:8.1f} us (p10 {:.1f}, p90 {:.1f}); reads {:.2f} "
             "GB weights + {:.2f} GB KV; roofline {:.1f} us; {:.0f}% of roofline; {:.0f} "
             "tokens/s{}\n",
             fp8 ? " (fp8 KV cache)" : "", batch, context, t.median_us, t.p10_us, t.p90_us,
             weight_bytes / 1e9, kv_bytes / 1e9, roofline_us, 100.0 * roofline_us / t.median_us,
             batch / (t.median_us * 1e-6), peer_text);
}

struct options {
  std::string model;
  bool print_rope = false;
  bool cpu = false;
  bool fused = false;
  bool fp8 = false;
  bool profile = false;
  std::string batches = "1,8,32,128";
  int32_t context = 512;
  int32_t replays = 20;
};

// The CPU decoder (float, the reference) on the same prompts, against transformers' float32
// answers: at this scale too, kvactor's model is transformers' model, up to float rounding.
void compare_cpu(const std::string& dir, const nlohmann::json& want) {
  if (!want.contains("last_logits_fp32")) return;
  const auto t0 = clock_type::now();
  auto m = load_hf_decoder(dir, 1, 0);
  if (!m) throw std::runtime_error(m.err().message);
  const kernels::decoder cpu(m->config.spec, std::move(m->weights));
  fmt::print("compare (CPU decoder): loaded in float in {:.1f} s\n", seconds_since(t0));
  // One OpenBLAS thread reads the 8B's 32 GB of float weights per step: seconds a token.
  constexpr int32_t tokens = 4;
  for (size_t p = 0; p < want["prompts"].size(); ++p) {
    const auto prompt = want["prompts"][p].get<std::vector<int32_t>>();
    if (prompt.size() > 40) continue;
    const auto t = clock_type::now();
    test::decoder_runner run(cpu, 1, static_cast<int32_t>(prompt.size()) + tokens);
    std::vector<float> logits;
    const auto got = run.greedy(0, prompt, tokens, &logits);
    auto exact = want["continuations_fp32"][p].get<std::vector<int32_t>>();
    exact.resize(std::min<size_t>(exact.size(), tokens));
    fmt::print("compare (CPU decoder): prompt {} ({} tokens): relative L2 to transformers in "
               "float32 {:.2e}, {} of {} greedy tokens before the first divergence ({:.1f} s)\n",
               p, prompt.size(),
               relative_l2(logits, want["last_logits_fp32"][p].get<std::vector<float>>()),
               common_prefix(got, exact), exact.size(), seconds_since(t));
  }
}

// The RoPE inverse frequencies kvactor computes for layer 0 of DIR/config.json, as JSON.
void print_rope(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  auto cfg = read_decoder_config(nlohmann::json::parse(in), 1, 0);
  if (!cfg) throw std::runtime_error(cfg.err().message);
  const auto& l0 = cfg->spec.layers[0];
  const auto rot = static_cast<int32_t>(cfg->spec.head_dim * l0.rope.partial_rotary_factor);
  fmt::print("{}\n", nlohmann::json(kernels::rope_inverse_frequencies(l0.rope, rot)).dump());
}

// One eager decode step at each batch size after a warm load, nothing else: the launches
// `ncu` profiles.
void profile_steps(const options& o, const std::vector<int32_t>& batches, int32_t max_tokens) {
  auto r = load(o.model, max_tokens, o.fused);
  l2_flusher flush(size_t{1} << 20, flush_mode::write);
  for (int32_t b : batches)
    time_decode(*r.decoder->decoder, b, o.context, 0, 1.0, nullptr, flush, o.fp8);
}

void run(const options& o) {
  if (o.print_rope) return print_rope(o.model);
  int32_t max_batch = 1;
  std::vector<int32_t> batches;
  for (const auto& b : CLI::detail::split(o.batches, ','))
    batches.push_back(std::stoi(b)), max_batch = std::max(max_batch, batches.back());
  const int32_t max_tokens = std::max(max_batch, 1024);
  if (o.profile) return profile_steps(o, batches, max_tokens);
  const auto files = safetensors_files(o.model);
  uint64_t bytes = 0;
  evict(files);
  const double cold = read_rate(files, bytes);
  const double warm = read_rate(files, bytes);
  fmt::print("disk: {} files, {:.2f} GB: cold read {:.2f} GB/s, warm (page cache) {:.2f} GB/s\n",
             files.size(), static_cast<double>(bytes) / 1e9, cold, warm);
  evict(files);
  {
    auto r = load(o.model, max_tokens, o.fused);
    const double gbs = static_cast<double>(bytes) / 1e9 / r.seconds;
    fmt::print("load (cold): {:.2f} s, {:.2f} GB/s from disk = {:.0f}% of the cold read rate\n",
               r.seconds, gbs, 100.0 * gbs / cold);
  }
  auto r = load(o.model, max_tokens, o.fused);
  const double gbs = static_cast<double>(bytes) / 1e9 / r.seconds;
  fmt::print("load (warm): {:.2f} s, {:.2f} GB/s = {:.0f}% of the warm read rate; {:.2f} GB on "
             "the device\n",
             r.seconds, gbs, 100.0 * gbs / warm, static_cast<double>(r.device_bytes) / 1e9);
  auto& d = *r.decoder->decoder;
  nlohmann::json want;
  if (std::ifstream in(o.model + "/expected.json"); in) {
    want = nlohmann::json::parse(in);
    compare(d, want);
    if (o.cpu) compare_cpu(o.model, want);
  }
  l2_flusher flush(size_t{256} << 20, flush_mode::write);
  const copy_ceiling c = measure_copy_ceiling(size_t{2} << 30, d.stream(), flush, 3, 10);
  fmt::print("copy ceiling: {:.2f} TB/s (2 GiB device-to-device, read + write)\n", c.tbs);
  const nlohmann::json* peer = want.contains("decode_step_ms") ? &want["decode_step_ms"] : nullptr;
  for (int32_t b : batches)
    time_decode(d, b, o.context, o.replays, c.tbs, peer, flush, o.fp8);
}

} // namespace
} // namespace kvactor::bench

int main(int argc, char** argv) {
  kvactor::bench::options o;
  CLI::App app{
      "kvactor_decoder_bench: a checkpoint's load, correctness and decode steps on the GPU"};
  app.add_option("--model", o.model, "Hugging Face model directory")->required();
  app.add_option("--batches", o.batches, "decode batch sizes, comma-separated");
  app.add_option("--context", o.context, "cached tokens per request in the decode steps");
  app.add_option("--replays", o.replays, "timed graph replays per batch (median)");
  app.add_flag("--fused", o.fused, "single-token steps fuse the gate/up projection and activation");
  app.add_flag("--fp8-kv", o.fp8, "an FP8 E4M3 KV cache (scales 1) instead of bf16");
  app.add_flag("--profile", o.profile,
               "load, then one eager decode step per batch size and exit (run under ncu)");
  app.add_flag("--cpu", o.cpu, "compare the CPU decoder with transformers too (small models)");
  app.add_flag("--print-rope", o.print_rope, "print layer 0's RoPE frequencies as JSON and exit");
  CLI11_PARSE(app, argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("kvactor_decoder_bench: no CUDA device; nothing measured");
    return 0;
  }
  try {
    kvactor::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvactor_decoder_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
