// Reads scripts/grafana-dashboard.json with Python's json module (a real parser: the file must
// be valid JSON) and lists its panels, its PromQL queries and any structural problem.
#pragma once

#include <string>
#include <vector>

namespace hvrun::test {

struct DashboardQueries {
  bool parsed = false;
  std::string error;                  // python's stderr when it did not parse
  std::vector<std::string> panels;    // titles (rows excluded)
  std::vector<std::string> exprs;     // every query: panel targets and template variables
  std::vector<std::string> problems;  // structural checks that failed
};

DashboardQueries read_dashboard(const std::string& path);

// The source tree's dashboard.
std::string dashboard_path();

}  // namespace hvrun::test
