// kvactor inject: message files (JSON or MessagePack), target names, and what each actor takes.
#include <gtest/gtest.h>

#include "actors/inject/target.hpp"
#include <fstream>
#include <sstream>

#include "deploy/cli.hpp"
#include "deploy/inject_command.hpp"
#include "messages/codec.hpp"
#include "messages/request.hpp"

using namespace kvactor;

TEST(InjectTarget, NamesTheDriverOrAnExistingRank) {
  auto d = parse_inject_target("driver", 2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->k, inject_target::kind::driver);
  auto r = parse_inject_target("rank[1]", 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 1);
  auto missing = parse_inject_target("rank[2]", 2);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.err().message.find("runs 2 rank(s)"), std::string::npos);
  for (auto bad : {"rank[]", "rank[x]", "ranks[0]", "builder[0]@rank[0]", "", "rank[-1]"}) {
    auto e = parse_inject_target(bad, 2);
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.err().message.find("target"), std::string::npos) << e.err().message;
  }
}

TEST(InjectTarget, EachActorTakesItsOwnMessageTypes) {
  inject_target driver{inject_target::kind::driver, 0};
  inject_target rank{inject_target::kind::rank, 0};
  EXPECT_TRUE(check_injectable(driver, "kvactor::request_spec"));
  EXPECT_TRUE(check_injectable(rank, "kvactor::step_plan"));
  auto wrong = check_injectable(driver, "kvactor::step_plan");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.err().message,
            "message type: kvactor::step_plan cannot be injected into driver (it takes "
            "kvactor::request_spec or kvactor::request_await)");
  EXPECT_FALSE(check_injectable(rank, "kvactor::nonsense"));
}

TEST(InjectMessageFile, JsonEnvelopeDecodesToTheTypedMessage) {
  auto m = parse_message_file(
      "m.json", R"(["kvactor::request_spec", 13, [7, [1, 2, 3], 4, 0, [0.0, 0, 1.0, 0, [], -1]]])");
  ASSERT_TRUE(m) << m.err().message;
  auto spec = decode<request_spec>(m->envelope);
  ASSERT_TRUE(spec) << spec.err().message;
  EXPECT_EQ(spec->request_id, 7u);
  EXPECT_EQ(spec->prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(spec->max_output_tokens, 4);
}

TEST(InjectMessageFile, ARecordOfTraceShowJsonKeepsItsReceiver) {
  auto m = parse_message_file("r.json", R"({"index": 5, "sender": "driver", "receiver": "rank[0]",
      "type": "kvactor::request_spec", "summary": "...", "payload": [9, [4], 1, 0, [0.0, 0, 1.0, 0, [], -1]]})");
  ASSERT_TRUE(m) << m.err().message;
  EXPECT_EQ(m->receiver, "rank[0]");
  ASSERT_TRUE(decode<request_spec>(m->envelope));
}

TEST(InjectMessageFile, MessagePackIsTakenAsIs) {
  auto bytes = encode(request_spec{3, {1}, 2, 0});
  auto m = parse_message_file("m.msgpack", std::string(bytes.begin(), bytes.end()));
  ASSERT_TRUE(m) << m.err().message;
  EXPECT_EQ(m->envelope, bytes);
}

TEST(InjectMessageFile, BadFilesAreErrorsNamingFileAndField) {
  auto broken = parse_message_file("b.json", R"({"type": "kvactor::request_spec", "payload": [)");
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.err().message.find("b.json: not valid JSON"), std::string::npos)
      << broken.err().message;
  auto no_type = parse_message_file("t.json", R"({"payload": []})");
  ASSERT_FALSE(no_type);
  EXPECT_NE(no_type.err().message.find("field \"type\""), std::string::npos);
  auto no_payload = parse_message_file("p.json", R"({"type": "kvactor::request_spec"})");
  ASSERT_FALSE(no_payload);
  EXPECT_NE(no_payload.err().message.find("field \"payload\""), std::string::npos);
  // nlohmann::json throws out_of_range for it, not parse_error (found by the inject fuzzer:
  // tests/fuzz/corpus/inject/regression-number-overflow.json).
  auto overflow = parse_message_file("o.json", R"(["kvactor::request_spec", 13, [2e2222222]])");
  ASSERT_FALSE(overflow);
  EXPECT_NE(overflow.err().message.find("o.json: not valid JSON"), std::string::npos)
      << overflow.err().message;
  auto short_array = parse_message_file("s.json", R"(["kvactor::request_spec", 3])");
  ASSERT_FALSE(short_array);
  EXPECT_FALSE(parse_message_file("e.json", "  \n"));
  auto garbage = parse_message_file("g.bin", "\x01\x02\x03");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.err().message.find("g.bin"), std::string::npos);
}

TEST(InjectMessageFile, WrongSchemaVersionIsCaughtBeforeSending) {
  auto m = parse_message_file("v.json", R"(["kvactor::request_spec", 1, [7, [1], 4, 0]])");
  ASSERT_TRUE(m); // the file is well-formed JSON ...
  auto type = envelope_type(m->envelope.data(), m->envelope.size());
  ASSERT_FALSE(type); // ... but carries the wrong schema version
  EXPECT_NE(type.err().message.find("expected schema version " + std::to_string(schema_version)
                                    + ", found integer 1"),
            std::string::npos)
      << type.err().message;
}

TEST(InjectCli, NothingListeningIsAClearError) {
  // Port 1 is never a kvactor process.
  auto path = ::testing::TempDir() + "inject_none.json";
  {
    std::ofstream f(path);
    f << R"(["kvactor::request_spec", 13, [7, [1], 4, 0, [0.0, 0, 1.0, 0, [], -1]]])";
  }
  std::vector<std::string> args{"kvactor", "inject", "--to", "127.0.0.1:1", "--message", path};
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  EXPECT_EQ(kvactor_main(static_cast<int>(argv.size()), argv.data(), out, err), 1);
  EXPECT_NE(err.str().find("no kvactor process listens for injection"), std::string::npos)
      << err.str();
  std::ostringstream out2, err2;
  std::vector<const char*> bad{"kvactor", "inject", "--to", "localhost", "--message", path.c_str()};
  EXPECT_EQ(kvactor_main(static_cast<int>(bad.size()), bad.data(), out2, err2), 2);
  EXPECT_NE(err2.str().find("--to: expected HOST:PORT"), std::string::npos) << err2.str();
}
