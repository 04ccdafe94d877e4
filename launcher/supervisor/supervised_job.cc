#include "launcher/supervisor/supervised_job.h"

#include <filesystem>

#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

struct SupervisedJob::Parts {
  Parts(const SupervisedJobConfig& config, OutputSink& out, OutputSink& err)
      : supervisor({config.grace_period, config.verbose, config.coordinator, config.absorb_failure},
                   err),
        streams({config.output_dir, config.tag_output, config.output_timestamps}, out, err,
                [this](const std::string& text) { supervisor.say(text); }) {}

  JobSupervisor supervisor;
  RankStreams streams;
};

SupervisedJob::SupervisedJob(const SupervisedJobConfig& config, OutputSink& out, OutputSink& err)
    : parts_(std::make_unique<Parts>(config, out, err)), output_dir_(config.output_dir) {}
SupervisedJob::~SupervisedJob() = default;

std::optional<JobEnd> SupervisedJob::end() const { return parts_->supervisor.end(); }
void SupervisedJob::post_control_plane_failure(std::string message, int rank) {
  parts_->supervisor.post_control_plane_failure(std::move(message), rank);
}
void SupervisedJob::post_note(std::string message) {
  parts_->supervisor.post_note(std::move(message));
}
void SupervisedJob::post_task(std::function<void()> task) {
  parts_->supervisor.post_task(std::move(task));
}
std::vector<WorkerRecord>& SupervisedJob::records() { return parts_->supervisor.workers(); }
bool SupervisedJob::tearing_down() const { return parts_->supervisor.ending(); }
void SupervisedJob::say(const std::string& text) { parts_->supervisor.say(text); }
JobSupervisor& SupervisedJob::supervisor() { return parts_->supervisor; }
const JobSupervisor& SupervisedJob::supervisor() const { return parts_->supervisor; }
RankStreams& SupervisedJob::streams() { return parts_->streams; }

bool SupervisedJob::make_output_dir() {
  if (output_dir_.empty()) return true;
  std::error_code ec;
  std::filesystem::create_directories(output_dir_, ec);
  if (ec)
    supervisor().say("cannot create the --output-filename directory " + output_dir_ + ": " +
                     ec.message());
  return !ec;
}

}  // namespace hvrun::launcher
