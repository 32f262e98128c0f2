// Reading kvactor errors in tests: the errc, the message and the request ids a caf::error names.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include <caf/error.hpp>

#include "messages/caf_error.hpp"

namespace kvactor::test {

/// The kvactor message of `err` (from_caf_error), for EXPECT_THAT(..., HasSubstr(...)).
inline std::string message_of(const caf::error& err) {
  return from_caf_error(err).message;
}

/// Success when `err` is a kvactor error with `code` whose message starts with `field` (the field
/// at fault, e.g. "seq:" or "--device:").
inline ::testing::AssertionResult is_kvactor_error(const caf::error& err, errc code,
                                                   const std::string& field) {
  if (!err) return ::testing::AssertionFailure() << "no error";
  if (err.category() != errc_category)
    return ::testing::AssertionFailure() << "not a kvactor error: " << from_caf_error(err).message;
  auto e = from_caf_error(err);
  if (e.code != code)
    return ::testing::AssertionFailure()
           << "code " << to_string(e.code) << ", expected " << to_string(code) << ": " << e.message;
  if (e.message.rfind(field, 0) != 0)
    return ::testing::AssertionFailure()
           << "message '" << e.message << "' does not start with '" << field << "'";
  return ::testing::AssertionSuccess() << e.message;
}

} // namespace kvactor::test

/// Fails (non-fatally) with the rendered error unless `err` is empty.
#define EXPECT_CAF_OK(err) EXPECT_FALSE(static_cast<bool>(err)) << ::kvactor::test::message_of(err)
