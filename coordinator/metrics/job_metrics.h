// The series hvrun exports on /metrics, rendered from a JobTelemetry snapshot
// (coordinator/telemetry/job_telemetry.h). Every family is declared once in job_metrics.cc's
// table; exported_families() is that table, so the dashboard test (tests/metrics/) compares the
// dashboard's queries against what this code really writes.
//
// Labels: per rank `rank`, `host`, `local_rank` (+ `op`, `backend` for the data plane); per GPU
// `rank`, `host`, `gpu` (CUDA ordinal as that rank sees it), `name`, `pci_bus_id`; per job none
// (Prometheus adds `job` and `instance`), with the job id on hvrun_job_info.
#pragma once

#include <span>
#include <string>

#include "coordinator/metrics/exposition.h"
#include "coordinator/telemetry/job_telemetry.h"

namespace hvrun::coordinator::metrics {

// Every family render_metrics() writes, in the order it writes them.
std::span<const MetricFamily> exported_families();

// The whole /metrics page. Every family's HELP and TYPE appear even without samples; a GPU value
// NVML could not read (-1) and ratios without data are left out, never written as -1 or NaN.
std::string render_metrics(const telemetry::JobTelemetry& job);

}  // namespace hvrun::coordinator::metrics
