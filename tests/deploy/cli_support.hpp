// Runs the kvactor command in-process and captures what it prints.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deploy/cli.hpp"

namespace kvactor::test {

struct cli_result {
  int code = -1;
  std::string out;
  std::string err;

  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

inline cli_result run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "kvactor");
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  cli_result r;
  r.code = kvactor_main(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

} // namespace kvactor::test
