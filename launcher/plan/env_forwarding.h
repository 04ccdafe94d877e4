// Which variables of the launch host's environment reach the workers on other hosts.
//
// Everything is forwarded except what describes the launch host's own session (its name, its
// ssh connection, its display, its shell's state; the list is kIgnoredForRemote below and in
// docs/multi-host.md); on the remote host those keep the remote session's values.
// `-x NAME=VALUE` sets a variable for every rank, on every host including the launch host;
// `-x NAME` forwards NAME even when it is on the ignore list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/rank_environment.h"

namespace hvrun::launcher {

// True for variables that stay behind (HOSTNAME, SSH_*, DISPLAY, ...).
bool ignored_for_remote(const std::string& name);

// The documented ignore list ("SSH_*" for a prefix), for --help and docs/multi-host.md.
const std::vector<std::string>& ignored_for_remote_list();

// `env` with the -x variables applied: NAME=VALUE sets NAME; NAME takes the launch host's value.
// Every job, on one host or many, builds its workers' environment through this. `notes`
// receives a line for each -x NAME that is not set on the launch host (nothing is set for it).
Environment with_exports(Environment env, const Environment& launch,
                         const std::vector<ExportSpec>& exports, std::vector<std::string>* notes);

// The launch environment as remote workers receive it: minus the ignore list, plus `exports`.
Environment forwarded_environment(const Environment& launch, const std::vector<ExportSpec>& exports,
                                  std::vector<std::string>* notes);

}  // namespace hvrun::launcher
