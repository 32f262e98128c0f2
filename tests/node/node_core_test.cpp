// Cluster mode's pure core: which peers may work together, listen addresses, slots, and where the
// ranks of a tensor-parallel group go.
#include "actors/node/node_core.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

node_info node(const std::string& address, int32_t slots, int32_t busy = 0,
               device_kind device = device_kind::cpu) {
  node_info n;
  n.protocol = cluster_protocol;
  n.schema = 4;
  n.build = "0.1.0+gabc";
  n.address = address;
  n.device = device;
  n.slots = slots;
  n.busy = busy;
  return n;
}

TEST(NodeCore, PeersOfTheSameProtocolSchemaAndBuildWorkTogether) {
  const auto mine = node("a:1", 2);
  EXPECT_TRUE(check_peer(mine, cluster_protocol, 4, "0.1.0+gabc"));
}

TEST(NodeCore, AMismatchNamesTheFieldAndBothValues) {
  const auto mine = node("a:1", 2);
  auto protocol = check_peer(mine, cluster_protocol + 1, 4, "0.1.0+gabc");
  ASSERT_FALSE(protocol);
  EXPECT_EQ(protocol.err().code, errc::incompatible_specs);
  EXPECT_NE(protocol.err().message.find("cluster protocol"), std::string::npos);
  auto schema = check_peer(mine, cluster_protocol, 3, "0.1.0+gabc");
  ASSERT_FALSE(schema);
  EXPECT_NE(schema.err().message.find("schema version: the peer speaks 3, this process 4"),
            std::string::npos)
      << schema.err().message;
  auto build = check_peer(mine, cluster_protocol, 4, "0.2.0+gdef");
  ASSERT_FALSE(build);
  EXPECT_NE(build.err().message.find("build: the peer speaks 0.2.0+gdef, this process 0.1.0+gabc"),
            std::string::npos)
      << build.err().message;
}

TEST(NodeCore, ListenAddressesParseAndBadOnesNameTheFlag) {
  auto ok = parse_host_port("10.0.0.2:7400", "--listen");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "10.0.0.2");
  EXPECT_EQ(ok->second, 7400);
  auto v6 = parse_host_port("[::1]:7400", "--listen");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->first, "::1");
  EXPECT_TRUE(parse_host_port("127.0.0.1:0", "--listen", true));
  for (const char* bad : {"7400", "host:", ":7400", "h:70000", "h:x", "h:0"}) {
    auto r = parse_host_port(bad, "--nodes");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.err().message.find("--nodes"), std::string::npos) << r.err().message;
  }
}

TEST(NodeCore, OnlyLoopbackAddressesNeedNoTls) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.1.2.3"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("10.0.0.2"));
  EXPECT_FALSE(is_loopback("node-1"));
}

TEST(NodeCore, ASlotHoldsOneRankUntilFreed) {
  node_slots s(2);
  EXPECT_TRUE(s.claim(0));
  auto twice = s.claim(0);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.err().message.find("slot: 0 holds a rank already"), std::string::npos);
  auto outside = s.claim(2);
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.err().message.find("outside this node's [0, 2)"), std::string::npos);
  EXPECT_EQ(s.busy(), 1);
  s.free(0);
  EXPECT_TRUE(s.claim(0));
  s.free_all();
  EXPECT_EQ(s.busy(), 0);
}

TEST(NodeCore, RanksFillTheNodesInTheOrderGiven) {
  auto placed = place_ranks({node("a:1", 2), node("b:1", 2)}, 3);
  ASSERT_TRUE(placed);
  ASSERT_EQ(placed->size(), 3u);
  EXPECT_EQ((*placed)[0].node, 0);
  EXPECT_EQ((*placed)[1].node, 0);
  EXPECT_EQ((*placed)[1].slot, 1);
  EXPECT_EQ((*placed)[2].node, 1);
  EXPECT_EQ((*placed)[2].slot, 0);
}

TEST(NodeCore, TooFewFreeSlotsSayWhatEachNodeOffers) {
  auto placed = place_ranks({node("a:1", 2, 1), node("b:1", 2)}, 4);
  ASSERT_FALSE(placed);
  EXPECT_NE(placed.err().message.find("the nodes offer 3 slot(s) (1 free of 2 on a:1, 2 free of 2 "
                                      "on b:1)"),
            std::string::npos)
      << placed.err().message;
}

TEST(NodeCore, ARunUsesNodesOfOneDevice) {
  auto mixed = place_ranks({node("a:1", 2), node("b:1", 8, 0, device_kind::cuda)}, 2);
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.err().message.find("a:1 hosts cpu ranks, b:1 hosts cuda ranks"),
            std::string::npos)
      << mixed.err().message;
  EXPECT_FALSE(place_ranks({}, 1));
  EXPECT_FALSE(place_ranks({node("a:1", 2)}, 0));
}

} // namespace
} // namespace kvactor
