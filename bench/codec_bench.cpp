// What a cluster step pays to cross the step channel in kvactor's codec (messages/codec.hpp): the
// driver encodes the plan once and one frame per node; the node decodes the frame and then the
// plan; the node encodes its answer; the driver decodes it. A plan of 64 decodes (the fan-out
// benchmark's steps), an answer from two ranks of 64 sampled tokens each. The step timeline
// (bench/RESULTS.md) put the node's plan decode at ~13 us of its hop to the ranks on the 2-core VM.
// BM_decode_plan_through_tree is the decoder before the in-place one, on the same bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "messages/codec.hpp"
#include "messages/node.hpp"
#include "messages/step.hpp"
#include "net/step_frame.hpp"

namespace {

using namespace kvactor;

step_plan decode_plan(int requests) {
  step_plan p;
  p.seq = 4711;
  p.epoch = 1;
  for (int i = 0; i < requests; ++i)
    p.scheduled.push_back({static_cast<uint64_t>(1000 + i), 16 + i, {42 + i}, true});
  return p;
}

node_step_done answer(int ranks, int tokens) {
  node_step_done d;
  d.seq = 4711;
  for (int r = 0; r < ranks; ++r) {
    step_done s;
    s.seq = 4711;
    s.epoch = 1;
    s.rank = r;
    for (int t = 0; t < tokens; ++t)
      s.sampled.push_back({static_cast<uint64_t>(1000 + t), 7 + t});
    d.done.push_back(std::move(s));
  }
  return d;
}

void BM_encode_plan(benchmark::State& state) {
  const auto plan = decode_plan(static_cast<int>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(encode(plan));
}

void BM_decode_plan(benchmark::State& state) {
  const auto bytes = encode(decode_plan(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto plan = decode<step_plan>(bytes);
    if (!plan) state.SkipWithError("the plan did not decode");
    benchmark::DoNotOptimize(plan);
  }
}

// The same bytes through msgpack-c's object tree, the decoder that explains errors (and the only
// one before the in-place reader): the baseline of BM_decode_plan, in the same run.
void BM_decode_plan_through_tree(benchmark::State& state) {
  const auto bytes = encode(decode_plan(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    step_plan plan;
    auto st =
        detail::decode_through_tree(bytes.data(), bytes.size(), detail::type_name_of(plan), plan);
    if (!st) state.SkipWithError("the plan did not decode");
    benchmark::DoNotOptimize(plan);
  }
}

void BM_step_frame(benchmark::State& state) {
  const node_step step{encode(decode_plan(static_cast<int>(state.range(0)))), {0, 1}, 270000};
  for (auto _ : state)
    benchmark::DoNotOptimize(step_frame(4711, step));
}

void BM_read_step(benchmark::State& state) {
  const node_step step{encode(decode_plan(static_cast<int>(state.range(0)))), {0, 1}, 270000};
  const auto frame = step_frame(4711, step);
  const std::vector<char> body(frame.begin() + step_frame_header, frame.end());
  for (auto _ : state) {
    auto got = read_step(body);
    if (!got) state.SkipWithError("the step frame did not read");
    benchmark::DoNotOptimize(got);
  }
}

void BM_answer_frame(benchmark::State& state) {
  const auto done = answer(2, static_cast<int>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(answer_frame(done));
}

void BM_read_answer(benchmark::State& state) {
  const auto frame = answer_frame(answer(2, static_cast<int>(state.range(0))));
  const std::vector<char> body(frame.begin() + step_frame_header, frame.end());
  for (auto _ : state) {
    auto got = read_answer(body);
    if (!got) state.SkipWithError("the answer frame did not read");
    benchmark::DoNotOptimize(got);
  }
}

void BM_read_answer_through_tree(benchmark::State& state) {
  const auto bytes = encode(answer(2, static_cast<int>(state.range(0))));
  for (auto _ : state) {
    node_step_done done;
    auto st =
        detail::decode_through_tree(bytes.data(), bytes.size(), detail::type_name_of(done), done);
    if (!st) state.SkipWithError("the answer did not decode");
    benchmark::DoNotOptimize(done);
  }
}

BENCHMARK(BM_encode_plan)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_decode_plan)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_decode_plan_through_tree)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_step_frame)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_read_step)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_answer_frame)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_read_answer)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_read_answer_through_tree)->Arg(64)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
