// Hosts made of network namespaces for a test suite (scripts/netns-cluster, or
// scripts/slurm-cluster on top of it): `SCRIPT up DIR` in a fresh directory once per suite, the
// KEY=VALUE lines it prints, `SCRIPT down DIR` at the end. The script's exit 77 is a skip with
// its reason; any other failure is an error every test of the suite reports.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace hvrun::test {

// hvrun's --rsh for these hosts' sshds. Host keys are made per run: nothing to check them
// against. A light key exchange keeps ssh quick on a loaded machine.
inline constexpr const char* kNamespaceRsh =
    "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
    "-o KexAlgorithms=curve25519-sha256";

class NamespaceHosts {
 public:
  // `script` is a file of scripts/, run as `script up DIR ARGS...`; `what` names the hosts in
  // the skip reason.
  void up(const std::string& script, const std::string& what,
          const std::vector<std::string>& args = {});
  void down();

  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  const std::map<std::string, std::string>& env() const { return env_; }

 private:
  std::string script_, dir_, skip_reason_, error_;
  std::map<std::string, std::string> env_;
};

// A test suite over such hosts: `Suite` names the script (kScript), the hosts (kWhat) and may
// give the script's arguments after DIR (kArgs, e.g. a host count); every test of the suite is
// skipped, or fails, as NamespaceHosts says.
template <typename Suite>
class NamespaceHostsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if constexpr (requires { Suite::kArgs; })
      hosts_.up(Suite::kScript, Suite::kWhat, {std::begin(Suite::kArgs), std::end(Suite::kArgs)});
    else
      hosts_.up(Suite::kScript, Suite::kWhat);
    dir_ = hosts_.dir();
    env_ = hosts_.env();
  }
  static void TearDownTestSuite() { hosts_.down(); }
  void SetUp() override {
    if (!hosts_.skip_reason().empty()) GTEST_SKIP() << hosts_.skip_reason();
    ASSERT_TRUE(hosts_.error().empty()) << hosts_.error();
  }

  static inline NamespaceHosts hosts_;
  static inline std::string dir_;
  static inline std::map<std::string, std::string> env_;
};

}  // namespace hvrun::test
