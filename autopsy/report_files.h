// Writes an autopsy's job report as two files in `directory`: hvrun-autopsy-<job>-<time>.json
// (the AutopsyJobReport message as JSON, field names as in proto/hvrun.proto) and .txt (for
// people, verdict.h). The directory is created when missing.
#pragma once

#include <string>

#include "common/status.h"
#include "hvrun.pb.h"

namespace hvrun {

struct AutopsyFiles {
  std::string json;
  std::string text;
};

// --autopsy-dir, else the --output-filename directory, else $TMPDIR or /tmp.
std::string autopsy_directory(const std::string& autopsy_dir, const std::string& output_dir);

Result<AutopsyFiles> write_autopsy_files(const v1::AutopsyJobReport& report,
                                         const std::string& directory);

}  // namespace hvrun
