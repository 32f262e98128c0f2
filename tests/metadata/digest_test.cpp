// metadata_digest: equal metadata, equal digest; any field a kernel reads changes it.
#include <gtest/gtest.h>

#include "actors/metadata/digest.hpp"

using namespace kvactor;

namespace {

struct fixture_metadata {
  std::vector<int32_t> block_table{1, 2, 3, 4};
  std::vector<int64_t> slots{16, 17, 48};
  std::vector<int64_t> positions{0, 1, 0};

  layer_metadata layers() const {
    auto m = std::make_shared<backend_metadata>();
    m->backend = "reference";
    m->common.query_start_loc = {0, 2, 3};
    m->common.seq_lens = {2, 1};
    m->common.num_reqs = 2;
    m->common.num_actual_tokens = 3;
    m->common.max_query_len = 2;
    m->common.max_seq_len = 2;
    m->common.block_table = block_table;
    m->common.block_table_width = 2;
    m->common.slot_mapping = slots;
    m->common.positions = positions;
    return {{"layers.0", m}, {"layers.1", m}};
  }
};

} // namespace

TEST(MetadataDigest, EqualMetadataGivesEqualNonZeroDigests) {
  fixture_metadata a, b;
  EXPECT_EQ(metadata_digest(a.layers()), metadata_digest(b.layers()));
  EXPECT_NE(metadata_digest(a.layers()), 0u);
}

TEST(MetadataDigest, ASlotBlockOrLayerChangeChangesTheDigest) {
  fixture_metadata base;
  const auto d = metadata_digest(base.layers());
  fixture_metadata slot;
  slot.slots[2] = 49;
  EXPECT_NE(metadata_digest(slot.layers()), d);
  fixture_metadata block;
  block.block_table[3] = 5;
  EXPECT_NE(metadata_digest(block.layers()), d);
  auto renamed = base.layers();
  renamed.emplace("layers.2", renamed.begin()->second);
  EXPECT_NE(metadata_digest(renamed), d);
}

TEST(MetadataDigest, BlockTableEntriesPastTheUsedRowsDoNotCount) {
  fixture_metadata a, b;
  b.block_table.push_back(77); // a persistent buffer longer than num_reqs x width
  EXPECT_EQ(metadata_digest(a.layers()), metadata_digest(b.layers()));
}
