#include "kvactor/kernels/cuda/stack_graph.h"

namespace kvactor::kernels {

stack_graph_created stack_graph::capture(attention_stack_cuda& stack, const device_step& step,
                                         const std::vector<kv_view>& kv, float* hidden) {
  auto fail = [](cuda_status s) { return stack_graph_created{nullptr, std::move(s)}; };
  if (stack.config().tp_size != 1)
    return fail(detail::invalid_cuda_argument(
        "stack_graph::capture: tp_size: ", stack.config().tp_size,
        " (a graph-capturable all-reduce comes with NCCL graphs; capture tp_size 1)"));
  if (step.num_tokens <= 0)
    return fail(detail::invalid_cuda_argument("stack_graph::capture: num_tokens: ", step.num_tokens,
                                              " (nothing to capture)"));
  cudaStream_t stream = stack.stream();
  // A legacy default stream cannot be captured.
  if (stream == nullptr)
    return fail(detail::invalid_cuda_argument(
        "stack_graph::capture: the stack runs on the default stream; give it a stream"));
  size_t free_before = 0, total = 0;
  if (auto e = cudaMemGetInfo(&free_before, &total); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaMemGetInfo", __FILE__, __LINE__));
  if (auto e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaStreamBeginCapture", __FILE__, __LINE__));
  const cuda_status fwd = stack.forward(step, kv, {}, hidden);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!fwd) {
    if (graph) cudaGraphDestroy(graph);
    return fail(fwd);
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
  if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return fail(detail::cuda_call_failed(e, "cudaStreamSynchronize", __FILE__, __LINE__));
  size_t free_after = 0;
  if (cudaMemGetInfo(&free_after, &total) == cudaSuccess)
    g->bytes_ = static_cast<int64_t>(free_before) - static_cast<int64_t>(free_after);
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess) g->nodes_ = n;
  return stack_graph_created{std::move(g), {}};
}

stack_graph::~stack_graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

cuda_status stack_graph::replay() {
  KVACTOR_CUDA_CALL(cudaGraphLaunch(exec_, stream_));
  return {};
}

} // namespace kvactor::kernels
