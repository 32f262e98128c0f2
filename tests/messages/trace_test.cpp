// The trace file: records round-trip; every kind of damage is an error naming the record.
#include <gtest/gtest.h>

#include <sstream>

#include "messages/step.hpp"
#include "messages/trace.hpp"

using namespace kvactor;

namespace {

step_plan sample_plan(uint64_t seq) {
  step_plan p;
  p.seq = seq;
  p.epoch = 1;
  p.new_requests = {{7, 5, 3}};
  p.block_updates = {{7, 0, 0, {1, 2}}};
  p.scheduled = {{7, 0, {1, 2, 3, 4, 5}, true}};
  return p;
}

std::string two_record_trace() {
  std::ostringstream out;
  trace_writer w(out);
  EXPECT_TRUE(w.write_message(10, "driver", "rank[0]", sample_plan(0)));
  EXPECT_TRUE(w.write_message(25, "rank[0]", "driver", step_done{0, 1, 0, {{7, 42}}, {}, {}}));
  EXPECT_EQ(w.count(), 2u);
  return out.str();
}

error read_error(const std::string& bytes) {
  std::istringstream in(bytes);
  trace_reader r(in);
  auto all = r.read_all();
  EXPECT_FALSE(all);
  return all ? error{} : all.err();
}

} // namespace

TEST(Trace, RecordsRoundTripWithTheirMessages) {
  std::istringstream in(two_record_trace());
  trace_reader r(in);
  auto all = r.read_all();
  ASSERT_TRUE(all) << all.err().message;
  ASSERT_EQ(all->size(), 2u);
  const auto& first = (*all)[0];
  EXPECT_EQ(first.index, 0u);
  EXPECT_EQ(first.timestamp_ns, 10);
  EXPECT_EQ(first.sender, "driver");
  EXPECT_EQ(first.receiver, "rank[0]");
  EXPECT_EQ(first.type, "kvactor::step_plan");
  auto plan = decode_record<step_plan>(first);
  ASSERT_TRUE(plan);
  EXPECT_EQ(*plan, sample_plan(0));
  auto done = decode_record<step_done>((*all)[1]);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->sampled.at(0).token, 42);
}

TEST(Trace, DecodingARecordAsTheWrongTypeNamesTheRecord) {
  std::istringstream in(two_record_trace());
  auto all = trace_reader(in).read_all();
  ASSERT_TRUE(all);
  auto wrong = decode_record<step_done>((*all)[0]);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.err().message.find("record 0"), std::string::npos) << wrong.err().message;
}

TEST(Trace, NotATraceOrAnotherSchemaVersionIsRejectedAtTheHeader) {
  EXPECT_NE(read_error("hello world").message.find("KVTRACE"), std::string::npos);
  auto bytes = two_record_trace();
  bytes[8] = 2; // schema version 2
  EXPECT_NE(read_error(bytes).message.find("schema version 2"), std::string::npos);
}

TEST(Trace, EveryTruncationIsAnErrorNamingTheRecord) {
  auto bytes = two_record_trace();
  const auto header = 12u;
  const auto first_len = static_cast<unsigned char>(bytes[header])
                         | static_cast<unsigned char>(bytes[header + 1]) << 8;
  const size_t boundary = header + 4 + first_len;
  for (size_t cut = header + 1; cut < bytes.size(); ++cut) {
    if (cut == boundary) {
      // A cut between records leaves a shorter, valid trace.
      std::istringstream in(bytes.substr(0, cut));
      auto all = trace_reader(in).read_all();
      ASSERT_TRUE(all);
      EXPECT_EQ(all->size(), 1u);
      continue;
    }
    auto e = read_error(bytes.substr(0, cut));
    EXPECT_NE(e.message.find("trace record"), std::string::npos) << cut << ": " << e.message;
  }
}

TEST(Trace, CorruptLengthOrBodyIsAnErrorNotACrash) {
  auto bytes = two_record_trace();
  auto huge = bytes;
  huge[12] = '\xff';
  huge[13] = '\xff';
  huge[14] = '\xff';
  huge[15] = '\x7f';
  EXPECT_NE(read_error(huge).message.find("trace record 0: length"), std::string::npos);
  for (size_t i = 16; i < bytes.size(); ++i) {
    auto flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    std::istringstream in(flipped);
    trace_reader r(in);
    auto all = r.read_all(); // may or may not fail; it must not crash or throw
    if (all)
      for (const auto& rec : *all)
        (void)decode_record<step_plan>(rec);
  }
}
