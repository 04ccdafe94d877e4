#include "launcher/mpi/mpirun_command.h"

namespace hvrun::launcher {

std::vector<std::string> mpirun_command(const MpirunJob& job) {
  std::vector<std::string> argv = {job.mpirun, "-np", std::to_string(job.size)};
  std::string hosts;
  for (const HostSlots& h : job.hosts)
    hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  argv.insert(argv.end(), {"-H", hosts, "--bind-to", "none", "--map-by", "slot"});
  if (job.tag_output) argv.push_back("--tag-output");
  for (const std::string& name : job.exported) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), job.mpi_args.begin(), job.mpi_args.end());
  argv.insert(argv.end(), job.command.begin(), job.command.end());
  return argv;
}

Result<std::vector<std::string>> split_shell_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0; else word += c;
      continue;
    }
    if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < text.size() &&
                 (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$')) {
        word += text[++i];
      } else {
        word += c;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (quote != 0)
    return invalid_argument("--mpi-args '" + text + "': unterminated " +
                            (quote == '"' ? "double" : "single") + " quote");
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace hvrun::launcher
