// Every error code has a name: a code added without one would render as "unknown".
#include <gtest/gtest.h>

#include "messages/errc.hpp"

TEST(Errc, EveryCodeHasAName) {
  using kvactor::errc;
  for (auto code = static_cast<uint8_t>(errc::no_error);
       code <= static_cast<uint8_t>(errc::collective_failed); ++code)
    EXPECT_NE(kvactor::to_string(static_cast<errc>(code)), "unknown") << int{code};
  EXPECT_EQ(kvactor::to_string(errc::step_failed), "step_failed");
  EXPECT_EQ(kvactor::to_string(errc::collective_failed), "collective_failed");
}
