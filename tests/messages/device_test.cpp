// The device and collective-status vocabulary: names, parsing, and a value outside the enum that
// a hostile message could carry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "messages/codec.hpp"
#include "messages/collective.hpp"
#include "messages/device.hpp"
#include "messages/runtime.hpp"

using namespace kvactor;
using ::testing::HasSubstr;

TEST(DeviceKind, NamesEveryDeviceAndCallsAnythingElseUnknown) {
  EXPECT_EQ(to_string(device_kind::cpu), "cpu");
  EXPECT_EQ(to_string(device_kind::cuda), "cuda");
  EXPECT_EQ(to_string(static_cast<device_kind>(2)), "unknown");
}

TEST(DeviceKind, ParsesCpuCudaAndTheGpuAliasAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*parse_device("cpu"), device_kind::cpu);
  EXPECT_EQ(*parse_device("cuda"), device_kind::cuda);
  EXPECT_EQ(*parse_device("gpu"), device_kind::cuda);
  auto tpu = parse_device("tpu", "--device");
  ASSERT_FALSE(tpu);
  EXPECT_EQ(tpu.err().code, errc::invalid_argument);
  EXPECT_EQ(tpu.err().message, "--device: unknown value 'tpu' (expected cpu or cuda)");
}

TEST(DeviceKind, ARankConfigWithADeviceOutsideTheEnumDoesNotDecode) {
  rank_config bad;
  bad.device = static_cast<device_kind>(9);
  auto decoded = decode<rank_config>(encode(bad));
  ASSERT_FALSE(decoded);
  EXPECT_THAT(decoded.err().message, HasSubstr("enum value, found integer 9"));
}

TEST(CollectiveStatus, NamesEveryStatusAndCallsAnythingElseUnknown) {
  EXPECT_EQ(to_string(collective_status::pending), "pending");
  EXPECT_EQ(to_string(collective_status::completed), "completed");
  EXPECT_EQ(to_string(collective_status::timed_out), "timed_out");
  EXPECT_EQ(to_string(collective_status::aborted), "aborted");
  EXPECT_EQ(to_string(collective_status::failed), "failed");
  EXPECT_EQ(to_string(static_cast<collective_status>(5)), "unknown");
}
