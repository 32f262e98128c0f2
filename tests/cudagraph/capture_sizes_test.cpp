#include "actors/cudagraph/capture_sizes.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace kvactor {
namespace {

using sizes = std::vector<int32_t>;

TEST(CudaGraphCaptureSizes, DefaultLadderFor256SeqsHas51SizesEndingAt512) {
  // docs/vllm-semantics.md §10 case 49.
  auto xs = default_capture_sizes(256, 8192);
  ASSERT_EQ(xs.size(), 51u);
  EXPECT_EQ(sizes(xs.begin(), xs.begin() + 4), (sizes{1, 2, 4, 8}));
  EXPECT_EQ(sizes(xs.end() - 4, xs.end()), (sizes{464, 480, 496, 512}));
  EXPECT_TRUE(std::is_sorted(xs.begin(), xs.end()));
}

TEST(CudaGraphCaptureSizes, DefaultLadderFor128SeqsHas35SizesEndingAt256) {
  auto xs = default_capture_sizes(128, 8192);
  ASSERT_EQ(xs.size(), 35u);
  EXPECT_EQ(sizes(xs.end() - 3, xs.end()), (sizes{240, 248, 256}));
}

TEST(CudaGraphCaptureSizes, DefaultLadderStepsBy8Below256And16From256) {
  auto xs = default_capture_sizes(256, 8192);
  for (size_t i = 4; i < xs.size(); ++i)
    EXPECT_EQ(xs[i] - xs[i - 1], xs[i - 1] < 256 ? 8 : 16) << "at " << xs[i];
}

TEST(CudaGraphCaptureSizes, DefaultLadderIsClippedToMaxNumBatchedTokens) {
  auto xs = default_capture_sizes(256, 100);
  EXPECT_EQ(xs.size(), 15u);
  EXPECT_EQ(xs.back(), 96);
  EXPECT_EQ(default_capture_sizes(256, 3), (sizes{1, 2}));
}

TEST(CudaGraphCaptureSizes, DefaultLadderForFewSeqsStopsAtTwiceTheSeqs) {
  EXPECT_EQ(default_capture_sizes(1, 2048), (sizes{1, 2}));
  EXPECT_EQ(default_capture_sizes(4, 2048), (sizes{1, 2, 4, 8}));
}

TEST(CudaGraphCaptureSizes, DefaultLadderScalesWithDecodeQueryLenUpTo512) {
  // 8 seqs x 2 x q=3 = 48.
  EXPECT_EQ(default_capture_sizes(8, 2048, 3).back(), 48);
  EXPECT_EQ(default_capture_sizes(256, 2048, 4).back(), 512);
}

TEST(CudaGraphCaptureSizes, UserSizesAreDedupedFilteredAndSorted) {
  auto xs = normalize_capture_sizes({16, 4, 4096, 1, 16, 2048, 8}, 2048);
  ASSERT_TRUE(xs) << xs.err().message;
  EXPECT_EQ(*xs, (sizes{1, 4, 8, 16, 2048}));
}

TEST(CudaGraphCaptureSizes, UserSizesAllAboveTheBudgetLeaveNothing) {
  auto xs = normalize_capture_sizes({4096, 8192}, 2048);
  ASSERT_TRUE(xs);
  EXPECT_TRUE(xs->empty());
}

TEST(CudaGraphCaptureSizes, ZeroUserSizeIsAnInvalidArgumentNamingTheFlag) {
  auto xs = normalize_capture_sizes({1, 0, 8}, 2048);
  ASSERT_FALSE(xs);
  EXPECT_EQ(xs.err().code, errc::invalid_argument);
  EXPECT_NE(xs.err().message.find("--cudagraph-capture-sizes"), std::string::npos);
  EXPECT_NE(xs.err().message.find("0"), std::string::npos);
}

TEST(CudaGraphCaptureSizes, NegativeUserSizeIsAnInvalidArgumentNamingTheValue) {
  auto xs = normalize_capture_sizes({8, -3}, 2048);
  ASSERT_FALSE(xs);
  EXPECT_EQ(xs.err().code, errc::invalid_argument);
  EXPECT_NE(xs.err().message.find("-3"), std::string::npos);
}

} // namespace
} // namespace kvactor
