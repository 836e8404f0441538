// The runtime benchmarks' report: Google Benchmark's console output, then a
// table pairing each "<what>/raw" run with every "<what>/<variant>" run
// ("/kcache", "/kcache store", ...): medians over --benchmark_repetitions,
// ratio = variant / raw. Runs without a "/raw" partner are listed after it.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace kcache::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred || run.iterations == 0) continue;
      times_[run.run_name.function_name].push_back(run.real_accumulated_time /
                                                   static_cast<double>(run.iterations) * 1e9);
    }
  }

  void PrintRatios(const std::string& header) const {
    std::printf("\n%s\n\n", header.c_str());
    std::printf("| what | raw | variant | time | ratio | extra |\n|---|---|---|---|---|---|\n");
    std::vector<std::string> paired;
    for (const auto& [name, raw_times] : times_) {
      std::string what = base(name);
      if (what.empty() || name.compare(what.size(), std::string::npos, "/raw") != 0) continue;
      paired.push_back(name);
      double raw = median(raw_times);
      for (const auto& [other, times] : times_) {
        if (other == name || base(other) != what) continue;
        paired.push_back(other);
        double ours = median(times);
        std::printf("| %s | %s | %s | %s | %.3f | %s |\n", what.c_str(), format(raw).c_str(),
                    other.substr(what.size() + 1).c_str(), format(ours).c_str(), ours / raw,
                    format(ours - raw).c_str());
      }
    }
    std::printf("\n(medians over repetitions; ratio = variant / raw)\n\n");
    std::printf("| other measurement | median |\n|---|---|\n");
    for (const auto& [name, times] : times_) {
      if (std::find(paired.begin(), paired.end(), name) == paired.end()) {
        std::printf("| %s | %s |\n", name.c_str(), format(median(times)).c_str());
      }
    }
  }

 private:
  // "ModuleLoad x/kcache" -> "ModuleLoad x"; "" without a slash.
  static std::string base(const std::string& name) {
    size_t slash = name.rfind('/');
    return slash == std::string::npos ? "" : name.substr(0, slash);
  }
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  static std::string format(double ns) {
    char buffer[64];
    if (ns >= 1e6 || ns <= -1e6) {
      std::snprintf(buffer, sizeof(buffer), "%.3f ms", ns / 1e6);
    } else if (ns >= 1e4 || ns <= -1e4) {
      std::snprintf(buffer, sizeof(buffer), "%.2f us", ns / 1e3);
    } else {
      std::snprintf(buffer, sizeof(buffer), "%.1f ns", ns);
    }
    return buffer;
  }

  std::map<std::string, std::vector<double>> times_;
};

}  // namespace kcache::bench
