// expect_invalid(f, needle): f() must throw std::invalid_argument whose message contains needle
// (the kernels' contract: every rejected argument is named, with its value).
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace kvactor::kernels::test {

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

} // namespace kvactor::kernels::test
