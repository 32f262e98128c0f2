// Support for the GPU decoder's tests and benchmark (no GoogleTest in it): the decoder loaded from
// a model directory through the weight uploader, and sequences run through it with a paged bf16
// KV cache of their own on the device, the way a rank runs them (prefill chunks and decode steps
// share one forward per step).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../model/runner_step.hpp"
#include "actors/rank/weight_upload.hpp"
#include "kvactor/kernels/cuda/decoder_cuda.h"
#include "model/hf_decoder.hpp"
#include "model/hf_decoder_plan.hpp"

namespace kvactor::kernels::gpu_test {

inline void check_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// n elements of T in device memory, optionally a copy of `host`; freed on destruction.
template <class T>
class device_vec {
public:
  explicit device_vec(size_t n) : n_(n) {
    if (n_ > 0) check_call(cudaMalloc(&ptr_, n_ * sizeof(T)), "cudaMalloc");
  }
  explicit device_vec(const std::vector<T>& host) : device_vec(host.size()) {
    if (n_ > 0)
      check_call(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
                 "cudaMemcpy");
  }
  device_vec(const device_vec&) = delete;
  device_vec& operator=(const device_vec&) = delete;
  ~device_vec() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  T* get() const { return static_cast<T*>(ptr_); }

private:
  void* ptr_ = nullptr;
  size_t n_ = 0;
};

/// A decoder_cuda on a stream of its own, with the checkpoint's weights uploaded, or (with
/// generated_seed, for a shapes-only source) generated on the device.
struct loaded_decoder {
  cudaStream_t stream = nullptr;
  std::unique_ptr<decoder_cuda> decoder;
  hf_decoder_config config;
  std::string error; // non-empty when loading failed

  loaded_decoder(const hf_decoder_source& src, int32_t max_tokens, bool fuse_gated_mlp = false,
                 std::optional<uint64_t> generated_seed = std::nullopt)
      : config(src.config) {
    check_call(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    decoder_cuda_options opt;
    opt.max_tokens = max_tokens;
    opt.stream = stream;
    opt.fuse_gated_mlp = fuse_gated_mlp;
    auto made = load_decoder_cuda(src.config, {src.ckpt, {}, generated_seed}, opt);
    if (made)
      decoder = std::move(*made);
    else
      error = made.err().message;
  }
  ~loaded_decoder() {
    decoder.reset();
    cudaStreamDestroy(stream);
  }
  loaded_decoder(const loaded_decoder&) = delete;
  loaded_decoder& operator=(const loaded_decoder&) = delete;
};

class decoder_cuda_runner {
public:
  static constexpr int32_t block_size = 16;

  /// Room for `max_tokens` tokens in each of `max_seqs` sequences, cached as bf16 or, with
  /// `cache_type` fp8_e4m3, as FP8 codes with scales of 1.
  decoder_cuda_runner(decoder_cuda& d, int32_t max_seqs, int32_t max_tokens,
                      element_type cache_type = element_type::bf16)
      : d_(d), blocks_per_seq_((max_tokens + block_size - 1) / block_size),
        lens_(static_cast<size_t>(max_seqs), 0) {
    const auto& s = d.spec();
    const int64_t content = 2 * s.head_dim;
    const int64_t blocks = static_cast<int64_t>(blocks_per_seq_) * max_seqs;
    const int64_t elements = blocks * s.num_kv_heads * block_size * content;
    for (size_t l = 0; l < s.layers.size(); ++l) {
      // 16-bit units: an FP8 cache takes half as many
      caches_.push_back(std::make_unique<device_vec<uint16_t>>(static_cast<size_t>(
          cache_type == element_type::fp8_e4m3 ? (elements + 1) / 2 : elements)));
      views_.push_back(test::paged_kv_view(caches_.back()->get(), cache_type, blocks,
                                           s.num_kv_heads, block_size, content));
    }
    hidden_ = std::make_unique<device_vec<float>>(static_cast<size_t>(max_tokens) * max_seqs
                                                  * static_cast<size_t>(s.hidden_size));
  }

  /// Appends tokens[i] to sequence seqs[i]; returns the logits of each sequence's last new
  /// token, [distinct seqs, vocab]. `piecewise`: the step as forward_piece / forward_attention.
  std::vector<float> step(const std::vector<int32_t>& seqs, const std::vector<int32_t>& tokens,
                          bool piecewise = false) {
    run(prepare(seqs, tokens), piecewise);
    std::vector<float> logits;
    if (status_) status_ = d_.logits(hidden_->get(), last_rows_, logits); // keep a failure
    return logits;
  }

  /// The step that appends tokens[i] to sequence seqs[i], in device buffers the runner keeps
  /// until the next prepare or step (a CUDA graph captures their addresses); not run.
  const device_step& prepare(const std::vector<int32_t>& seqs, const std::vector<int32_t>& tokens) {
    layout_ = test::lay_out_step(seqs, lens_, blocks_per_seq_, block_size);
    const auto& lay = layout_;
    last_rows_ = lay.last_rows;
    ids_ = std::make_unique<device_vec<int32_t>>(tokens);
    ints_.clear();
    for (const auto* v : {&lay.positions, &lay.qsl, &lay.seq_lens, &lay.table})
      ints_.push_back(std::make_unique<device_vec<int32_t>>(*v));
    slots_ = std::make_unique<device_vec<int64_t>>(lay.slots);
    step_ = device_step{};
    step_.token_ids = ids_->get();
    step_.positions = ints_[0]->get();
    step_.num_tokens = static_cast<int32_t>(tokens.size());
    step_.layers.assign(views_.size(),
                        device_layer_batch{ints_[1]->get(), ints_[2]->get(), ints_[3]->get(),
                                           slots_->get(), blocks_per_seq_,
                                           static_cast<int32_t>(lay.order.size())});
    // The copies above ran on the legacy stream; the decoder's stream does not wait for it.
    check_call(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return step_;
  }

  /// The prepared step's layout on the host (block tables of blocks_per_seq() entries).
  const test::runner_step& layout() const { return layout_; }
  int32_t blocks_per_seq() const { return blocks_per_seq_; }
  /// The prepared step's token ids on the device, to overwrite between replays.
  int32_t* token_ids() const { return ids_->get(); }
  const std::vector<kv_view>& views() const { return views_; }

  /// One sequence's prompt, then `n` greedy tokens (argmax, the lowest id on ties).
  std::vector<int32_t> greedy(int32_t seq, const std::vector<int32_t>& prompt, int32_t n,
                              std::vector<float>* prompt_logits = nullptr) {
    auto logits = step(std::vector<int32_t>(prompt.size(), seq), prompt);
    if (prompt_logits) *prompt_logits = logits;
    std::vector<int32_t> out;
    for (int32_t i = 0; i < n && status_; ++i) {
      out.push_back(
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      if (i + 1 < n) logits = step({seq}, {out.back()});
    }
    return out;
  }

  /// The first failure of any step (ok when none).
  const cuda_status& status() const { return status_; }

  /// How the row-parallel partials are summed (tensor parallelism); empty: one rank.
  void set_all_reduce(std::function<cuda_status(float*, size_t)> f) { all_reduce_ = std::move(f); }

private:
  void run(const device_step& st, bool piecewise) {
    if (!status_) return;
    if (!piecewise) {
      status_ = d_.forward(st, views_, all_reduce_, hidden_->get());
      return;
    }
    status_ = d_.check_forward(st, views_, hidden_->get());
    for (size_t l = 0; l < views_.size() && status_; ++l) {
      status_ = d_.forward_piece(st, l, {}, hidden_->get());
      if (status_) status_ = d_.forward_attention(st, views_, l);
    }
    if (status_) status_ = d_.forward_piece(st, views_.size(), {}, hidden_->get());
  }

  decoder_cuda& d_;
  int32_t blocks_per_seq_;
  std::vector<int32_t> lens_;
  std::vector<std::unique_ptr<device_vec<uint16_t>>> caches_;
  std::vector<kv_view> views_;
  std::unique_ptr<device_vec<float>> hidden_;
  std::function<cuda_status(float*, size_t)> all_reduce_;
  device_step step_; // the prepared step, over the buffers below
  test::runner_step layout_;
  std::vector<int32_t> last_rows_;
  std::unique_ptr<device_vec<int32_t>> ids_;
  std::vector<std::unique_ptr<device_vec<int32_t>>> ints_; // positions, qsl, seq_lens, table
  std::unique_ptr<device_vec<int64_t>> slots_;
  cuda_status status_;
};

} // namespace kvactor::kernels::gpu_test
