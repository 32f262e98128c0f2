// A console reporter that also keeps each benchmark's time, so a program can print the one
// summary line RESULTS.md quotes (ratios against a baseline measured in the same run).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace kvactor::bench {

struct summary_reporter : benchmark::ConsoleReporter {
  std::map<std::string, double> ns; // benchmark name -> adjusted real time per iteration

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

} // namespace kvactor::bench
