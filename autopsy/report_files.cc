#include "autopsy/report_files.h"

#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "autopsy/verdict.h"

namespace hvrun {
namespace {

Status write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return internal_error("cannot write the autopsy report " + path.string());
  return Status::ok();
}

}  // namespace

std::string autopsy_directory(const std::string& autopsy_dir, const std::string& output_dir) {
  if (!autopsy_dir.empty()) return autopsy_dir;
  if (!output_dir.empty()) return output_dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

Result<AutopsyFiles> write_autopsy_files(const v1::AutopsyJobReport& report,
                                         const std::string& directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec)
    return internal_error("cannot create the autopsy directory " + directory + ": " +
                          ec.message() + " (--autopsy-dir)");
  const std::time_t seconds = static_cast<std::time_t>(report.unix_us() / 1000000);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  std::string stem = "hvrun-autopsy-" + report.job_id() + "-" + stamp;
  const std::filesystem::path dir(directory);
  for (int n = 2; std::filesystem::exists(dir / (stem + ".json")); ++n)
    stem = "hvrun-autopsy-" + report.job_id() + "-" + stamp + "-" + std::to_string(n);

  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (auto status = google::protobuf::util::MessageToJsonString(report, &json, options); !status.ok())
    return internal_error("cannot render the autopsy report as JSON: " +
                          std::string(status.message()));
  AutopsyFiles files{(dir / (stem + ".json")).string(), (dir / (stem + ".txt")).string()};
  HVRUN_RETURN_IF_ERROR(write_file(files.json, json));
  HVRUN_RETURN_IF_ERROR(write_file(files.text, autopsy_text(report)));
  return files;
}

}  // namespace hvrun
