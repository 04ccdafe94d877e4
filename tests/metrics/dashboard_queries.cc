#include "tests/metrics/dashboard_queries.h"

#include <unistd.h>

#include <cstdlib>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

// Prints "PANEL <title>", "EXPR <expr on one line>" for every query (panels, nested rows,
// template variables), "CHECK <problem>" for structural problems.
constexpr const char* kExtract = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
def check(ok, what):
    if not ok: print("CHECK " + what)
check(isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] >= 37, "schemaVersion >= 37")
variables = d.get("templating", {}).get("list", [])
ds = [v for v in variables if v.get("type") == "datasource" and v.get("query") == "prometheus"]
check(len(ds) == 1, "one Prometheus datasource variable")
ds_ref = "${" + (ds[0]["name"] if ds else "datasource") + "}"
for v in variables:
    q = v.get("query")
    if v.get("type") == "query":
        print("EXPR " + (q.get("query") if isinstance(q, dict) else q).replace("\n", " "))
def walk(panels):
    for p in panels:
        if p.get("type") == "row":
            walk(p.get("panels", []))
            continue
        print("PANEL " + p.get("title", ""))
        check(p.get("datasource", {}).get("uid") == ds_ref, "panel '%s' uses the datasource variable" % p.get("title"))
        check(len(p.get("targets", [])) > 0, "panel '%s' has queries" % p.get("title"))
        for t in p.get("targets", []):
            check(t.get("datasource", {}).get("uid") == ds_ref, "a query of '%s' uses the datasource variable" % p.get("title"))
            print("EXPR " + t["expr"].replace("\n", " "))
walk(d.get("panels", []))
)PY";

// python3 from PATH (run_process does not search it).
std::string find_python3() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string candidate = dirs.substr(start, colon - start) + "/python3";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "python3";
}

}  // namespace

std::string dashboard_path() { return source_dir() + "/scripts/grafana-dashboard.json"; }

DashboardQueries read_dashboard(const std::string& path) {
  DashboardQueries d;
  RunResult r = run_process({find_python3(), "-c", kExtract, path});
  d.parsed = r.exit_code == 0;
  d.error = r.err;
  for (const std::string& line : split_lines(r.out)) {
    if (line.rfind("CHECK ", 0) == 0) d.problems.push_back(line.substr(6));
    if (line.rfind("PANEL ", 0) == 0) d.panels.push_back(line.substr(6));
    if (line.rfind("EXPR ", 0) == 0) d.exprs.push_back(line.substr(5));
  }
  return d;
}

}  // namespace hvrun::test
