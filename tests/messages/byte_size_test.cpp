#include <gtest/gtest.h>

#include "messages/byte_size.hpp"

using namespace kvactor;

TEST(ByteSize, AcceptsIntegersAndBinaryAndDecimalSuffixes) {
  EXPECT_EQ(*parse_byte_size("21474836480", "--x"), 21474836480);
  EXPECT_EQ(*parse_byte_size("20GiB", "--x"), int64_t{20} << 30);
  EXPECT_EQ(*parse_byte_size("512 MiB", "--x"), int64_t{512} << 20);
  EXPECT_EQ(*parse_byte_size("70.5GiB", "--x"), int64_t{141} << 29);
  EXPECT_EQ(*parse_byte_size("4KiB", "--x"), 4096);
  EXPECT_EQ(*parse_byte_size("1GB", "--x"), 1000000000);
  EXPECT_EQ(*parse_byte_size("50000000000", "--x"), 50000000000);
}

TEST(ByteSize, UnitsIgnoreCaseAndTakeTheShortBinaryForms) {
  EXPECT_EQ(*parse_byte_size("20gib", "--x"), int64_t{20} << 30);
  EXPECT_EQ(*parse_byte_size("20G", "--x"), int64_t{20} << 30);
  EXPECT_EQ(*parse_byte_size("20Gi", "--x"), int64_t{20} << 30);
  EXPECT_EQ(*parse_byte_size("3mb", "--x"), 3000000);
  auto r = parse_byte_size("3 parsecs", "--x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("G, GiB"), std::string::npos) << r.err().message;
}

TEST(ByteSize, RejectsGarbageNegativeAndUnknownUnitsNamingTheFlag) {
  for (auto bad : {"", "abc", "-1GiB", "3 parsecs", "1..2GiB"}) {
    auto r = parse_byte_size(bad, "--kv-cache-memory");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.err().message.find("--kv-cache-memory"), std::string::npos);
  }
}

TEST(ByteSize, ListsHaveOneValuePerRank) {
  EXPECT_EQ(*parse_byte_sizes("10GiB,8GiB", "--x"),
            (std::vector<int64_t>{int64_t{10} << 30, int64_t{8} << 30}));
  EXPECT_FALSE(parse_byte_sizes("10GiB,", "--x"));
}
