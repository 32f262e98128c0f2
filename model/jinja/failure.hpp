// Inside the interpreter an error unwinds as a `failure`; parse() and render() turn it into a
// kvactor::error, so no exception leaves the library.
#pragma once

#include "messages/errc.hpp"

#include <string>

namespace kvactor::jinja {

struct failure {
  errc code;
  int line;
  std::string message;
};

[[noreturn]] inline void fail(int line, std::string message, errc code = errc::invalid_argument) {
  throw failure{code, line, std::move(message)};
}

// The value of `result`, or a failure at `line` carrying its message.
template <class T>
T unwrap(expected<T> result, int line) {
  if (!result) fail(line, result.err().message, result.err().code);
  return std::move(result).value();
}

} // namespace kvactor::jinja
