#include "kvactor/kernels/cuda/stack_graph.h"

#include <utility>

namespace kvactor::kernels {

namespace {

struct captured {
  std::unique_ptr<stack_graph> graph;
  cuda_status status;
};

cuda_status check_capturable(const cuda_stack& stack, const device_step& step, bool reduces,
                             const char* who) {
  if (stack.tp_size() != 1 && !reduces)
    return detail::invalid_cuda_argument(who, ": tp_size: ", stack.tp_size(),
                                         " with no all_reduce to capture");
  if (step.num_tokens <= 0)
    return detail::invalid_cuda_argument(who, ": num_tokens: ", step.num_tokens,
                                         " (nothing to capture)");
  // A legacy default stream cannot be captured.
  if (stack.stream() == nullptr)
    return detail::invalid_cuda_argument(
        who, ": the stack runs on the default stream; give it a stream");
  return {};
}

int64_t free_device_bytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return static_cast<int64_t>(free);
}

} // namespace

stack_graph_created stack_graph::capture_on(cudaStream_t stream,
                                            const std::function<cuda_status()>& enqueue) {
  auto fail = [](cuda_status s) { return stack_graph_created{nullptr, std::move(s)}; };
  if (auto e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaStreamBeginCapture", __FILE__, __LINE__));
  const cuda_status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!enqueued) {
    if (graph) cudaGraphDestroy(graph);
    return fail(enqueued);
  }
  if (end != cudaSuccess)
    return fail(detail::cuda_call_failed(end, "cudaStreamEndCapture", __FILE__, __LINE__));
  cudaGraphExec_t exec = nullptr;
  if (auto e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess) {
    cudaGraphDestroy(graph);
    return fail(detail::cuda_call_failed(e, "cudaGraphInstantiate", __FILE__, __LINE__));
  }
  std::unique_ptr<stack_graph> g(new stack_graph(graph, exec, stream));
  if (auto e = cudaGraphUpload(exec, stream); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaGraphUpload", __FILE__, __LINE__));
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess) g->nodes_ = n;
  return stack_graph_created{std::move(g), {}};
}

stack_graph_created
stack_graph::capture(cuda_stack& stack, const device_step& step, const std::vector<kv_view>& kv,
                     float* hidden, const std::function<cuda_status(float*, size_t)>& all_reduce) {
  if (auto st =
          check_capturable(stack, step, static_cast<bool>(all_reduce), "stack_graph::capture");
      !st)
    return stack_graph_created{nullptr, st};
  cudaStream_t stream = stack.stream();
  const int64_t free_before = free_device_bytes();
  auto made = capture_on(stream, [&] { return stack.forward(step, kv, all_reduce, hidden); });
  if (!made.status) return made;
  if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return stack_graph_created{
        nullptr, detail::cuda_call_failed(e, "cudaStreamSynchronize", __FILE__, __LINE__)};
  made.graph->bytes_ = free_before - free_device_bytes();
  return made;
}

stack_graph::~stack_graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

cuda_status stack_graph::replay() {
  KVACTOR_CUDA_CALL(cudaGraphLaunch(exec_, stream_));
  return {};
}

piecewise_graph_created
piecewise_graph::capture(cuda_stack& stack, const device_step& step, float* hidden,
                         const std::function<cuda_status(float*, size_t)>& all_reduce) {
  auto fail = [](cuda_status s) { return piecewise_graph_created{nullptr, std::move(s)}; };
  if (auto st =
          check_capturable(stack, step, static_cast<bool>(all_reduce), "piecewise_graph::capture");
      !st)
    return fail(st);
  if (hidden == nullptr || step.token_ids == nullptr || step.positions == nullptr)
    return fail(detail::invalid_cuda_argument(
        "piecewise_graph::capture: token_ids, positions and hidden must be device arrays"));
  cudaStream_t stream = stack.stream();
  const int64_t free_before = free_device_bytes();
  std::unique_ptr<piecewise_graph> g(new piecewise_graph(stack));
  g->token_ids_ = step.token_ids;
  g->positions_ = step.positions;
  g->num_tokens_ = step.num_tokens;
  g->hidden_ = hidden;
  const size_t num_pieces = stack.num_layers() + 1;
  for (size_t k = 0; k < num_pieces; ++k) {
    auto piece = stack_graph::capture_on(
        stream, [&] { return stack.forward_piece(step, k, all_reduce, hidden); });
    if (!piece.status)
      return fail(detail::invalid_cuda_argument("piecewise_graph::capture: piece ", k, ": ",
                                                piece.status.message()));
    g->pieces_.push_back(std::move(piece.graph));
  }
  if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaStreamSynchronize", __FILE__, __LINE__));
  g->bytes_ = free_before - free_device_bytes();
  return piecewise_graph_created{std::move(g), {}};
}

cuda_status piecewise_graph::replay(const device_step& step, const std::vector<kv_view>& kv) {
  KVACTOR_CUDA_CHECK_ARG(step.token_ids == token_ids_ && step.positions == positions_
                             && step.num_tokens == num_tokens_,
                         "piecewise_graph::replay: the step (", step.num_tokens,
                         " tokens) is not the one captured (", num_tokens_,
                         " tokens at the persistent addresses)");
  if (cuda_status st = stack_->check_forward(step, kv, hidden_); !st) return st;
  const size_t num_layers = pieces_.size() - 1;
  for (size_t l = 0; l < num_layers; ++l) {
    if (cuda_status st = pieces_[l]->replay(); !st) return st;
    if (cuda_status st = stack_->forward_attention(step, kv, l); !st) return st;
  }
  return pieces_.back()->replay();
}

size_t piecewise_graph::nodes() const {
  size_t n = 0;
  for (const auto& p : pieces_)
    n += p->nodes();
  return n;
}

} // namespace kvactor::kernels
