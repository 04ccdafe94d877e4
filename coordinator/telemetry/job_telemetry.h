// The job telemetry snapshot moved to the coordinator's root (coordinator/job_telemetry.h, the
// interface CoordinatorServer returns); launcher/ still includes it by this path.
#pragma once

#include "coordinator/job_telemetry.h"
