// The step channel's frames: what the driver writes is what the node reads, however the bytes are
// cut on the way, and a frame a well-behaved peer never sends is refused by name before its body
// is kept.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/codec.hpp"
#include "net/step_frame.hpp"

namespace kvactor::test {
namespace {

node_step sample_step() {
  step_plan plan;
  plan.seq = 41;
  plan.epoch = 3;
  return node_step{encode(plan), {0, 2, 5}, 900};
}

node_step_done sample_answer() {
  node_step_done d;
  d.seq = 41;
  step_done one;
  one.seq = 41;
  one.rank = 2;
  d.done.push_back(one);
  d.rejected.push_back(step_rejected{41, 5, make_error(errc::step_failed, "rank 5: boom"), {7}});
  d.silent = {0};
  return d;
}

std::vector<step_frame_body> feed_all(step_frame_reader& r, const std::vector<char>& bytes,
                                      size_t chunk) {
  std::vector<step_frame_body> out;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    const auto n = std::min(chunk, bytes.size() - at);
    EXPECT_TRUE(r.feed(bytes.data() + at, n));
    while (auto f = r.next())
      out.push_back(std::move(*f));
  }
  return out;
}

// A header: the length of what follows, kind, version.
std::vector<char> header(uint32_t length, uint8_t kind, uint8_t version) {
  return {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
          static_cast<char>(length >> 8),  static_cast<char>(length),
          static_cast<char>(kind),         static_cast<char>(version)};
}

TEST(StepFrame, AStepCarriesItsSequenceSlotsAnswerWindowAndPlanBytesUnchanged) {
  const auto step = sample_step();
  step_frame_reader r{1 << 20};
  auto frames = feed_all(r, step_frame(41, step), 1 << 20);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].kind, step_frame_kind::step);
  auto back = read_step(frames[0].body);
  ASSERT_TRUE(back) << back.err().message;
  EXPECT_EQ(back->seq, 41u);
  EXPECT_EQ(back->step, step);
}

TEST(StepFrame, AnswersAndRefusalsComeBackAsTheNodeSentThem) {
  std::vector<char> bytes = answer_frame(sample_answer());
  const auto refusal =
      refusal_frame(42, make_error(errc::invalid_argument, "slot 3 hosts no rank"));
  bytes.insert(bytes.end(), refusal.begin(), refusal.end());
  step_frame_reader r{1 << 20};
  auto frames = feed_all(r, bytes, bytes.size());
  ASSERT_EQ(frames.size(), 2u);
  auto answer = read_answer(frames[0].body);
  ASSERT_TRUE(answer) << answer.err().message;
  EXPECT_EQ(*answer, sample_answer());
  ASSERT_EQ(frames[1].kind, step_frame_kind::refusal);
  auto refused = read_refusal(frames[1].body);
  ASSERT_TRUE(refused) << refused.err().message;
  EXPECT_EQ(refused->seq, 42u);
  EXPECT_EQ(refused->why, make_error(errc::invalid_argument, "slot 3 hosts no rank"));
}

TEST(StepFrame, FramesCutIntoAnyChunksComeOutWholeAndInOrder) {
  std::vector<char> bytes;
  for (uint64_t seq = 0; seq < 5; ++seq) {
    const auto f = step_frame(seq, sample_step());
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, bytes.size()}) {
    step_frame_reader r{1 << 20};
    auto frames = feed_all(r, bytes, chunk);
    ASSERT_EQ(frames.size(), 5u) << "chunks of " << chunk;
    for (uint64_t seq = 0; seq < 5; ++seq) {
      auto s = read_step(frames[seq].body);
      ASSERT_TRUE(s) << s.err().message;
      EXPECT_EQ(s->seq, seq);
    }
  }
}

TEST(StepFrame, AFrameAboveTheBoundIsRefusedFromItsHeaderAlone) {
  step_frame_reader r{1024};
  const auto h = header(0xfffffff0u, 1, step_frame_version);
  auto fed = r.feed(h.data(), h.size());
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.err().message.find("a frame of 4294967280 bytes; the bound is 1026"),
            std::string::npos)
      << fed.err().message;
}

TEST(StepFrame, AnUnknownKindOrAnotherVersionIsRefusedByName) {
  step_frame_reader kind{1024};
  auto bad_kind = header(2, 9, step_frame_version);
  auto fed = kind.feed(bad_kind.data(), bad_kind.size());
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.err().message.find("frame kind 9"), std::string::npos) << fed.err().message;

  step_frame_reader version{1024};
  auto bad_version = header(2, 1, 7);
  fed = version.feed(bad_version.data(), bad_version.size());
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.err().message.find("frame version 7"), std::string::npos) << fed.err().message;
}

TEST(StepFrame, AfterARefusalEveryLaterFeedIsRefusedAndNoFrameComesOut) {
  step_frame_reader r{1024};
  auto bad = header(2, 0, step_frame_version);
  ASSERT_FALSE(r.feed(bad.data(), bad.size()));
  const auto good = step_frame(1, sample_step());
  EXPECT_FALSE(r.feed(good.data(), good.size()));
  EXPECT_FALSE(r.next());
}

TEST(StepFrame, AStepWhoseSlotCountOverrunsItsBytesIsRefused) {
  auto f = step_frame(1, sample_step());
  step_frame_reader r{1 << 20};
  ASSERT_TRUE(r.feed(f.data(), f.size()));
  auto body = r.next()->body;
  body[8] = '\x7f'; // the slot count's high byte
  auto s = read_step(body);
  ASSERT_FALSE(s);
  EXPECT_NE(s.err().message.find("names 2130706435 slots"), std::string::npos) << s.err().message;
  EXPECT_FALSE(read_step(std::vector<char>(5, '\0')));
}

TEST(StepFrame, ANegativeAnswerWindowIsRefused) {
  auto step = sample_step();
  step.answer_within_ms = -5;
  step_frame_reader r{1 << 20};
  const auto f = step_frame(1, step);
  ASSERT_TRUE(r.feed(f.data(), f.size()));
  auto s = read_step(r.next()->body);
  ASSERT_FALSE(s);
  EXPECT_NE(s.err().message.find("answer_within_ms -5"), std::string::npos) << s.err().message;
}

TEST(StepFrame, AnAnswerOrRefusalThatDoesNotDecodeIsAnErrorNotACrash) {
  EXPECT_FALSE(read_answer(std::vector<char>{'\x93', '\x01'}));
  EXPECT_FALSE(read_refusal(std::vector<char>(3, '\0')));
  EXPECT_FALSE(read_refusal(std::vector<char>(12, '\xff')));
}

} // namespace
} // namespace kvactor::test
