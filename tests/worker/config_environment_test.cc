// Config::from_environment: the variables a worker is started with, by hvrun or another launcher.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <optional>
#include <string>

#include "hvrun/hvrun.h"

namespace hvrun {
namespace {

// Sets `vars` (a null value unsets) for one test and puts the old values back.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(std::map<std::string, std::optional<std::string>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = ::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

const std::map<std::string, std::optional<std::string>> kNoLauncher = {
    {"HVRUN_COORDINATOR_ADDR", "10.0.0.1:29500"}, {"HVRUN_RANK", std::nullopt},
    {"HVRUN_LOCAL_RANK", std::nullopt},           {"HVRUN_DATA_ADDR", std::nullopt},
    {"OMPI_COMM_WORLD_RANK", std::nullopt},       {"OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt},
    {"PMIX_RANK", std::nullopt},                  {"PMI_RANK", std::nullopt},
    {"SLURM_PROCID", std::nullopt},               {"SLURM_LOCALID", std::nullopt},
    {"MPI_LOCALRANKID", std::nullopt},            {"GLOO_SOCKET_IFNAME", std::nullopt},
    {"HOROVOD_GLOO_IFACE", std::nullopt}};

std::map<std::string, std::optional<std::string>> with(
    std::map<std::string, std::optional<std::string>> more) {
  auto vars = kNoLauncher;
  for (auto& [k, v] : more) vars[k] = v;
  return vars;
}

TEST(ConfigEnvironmentTest, RanksComeFromMpirunOrSrunWhenHvrunDidNotSayThem) {
  {
    ScopedEnvironment env(with({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
    auto c = Config::from_environment();
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->requested_rank, 3);
    EXPECT_EQ(c->local_rank, 1);
  }
  {
    ScopedEnvironment env(with({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "2"}}));
    auto c = Config::from_environment();
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(c->requested_rank, 5);
    EXPECT_EQ(c->local_rank, 2);
  }
  {
    // A worker hvrun started inside an srun step (hvrun's agent) keeps hvrun's rank.
    ScopedEnvironment env(with({{"HVRUN_RANK", "6"}, {"HVRUN_LOCAL_RANK", "0"},
                                {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}}));
    auto c = Config::from_environment();
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(c->requested_rank, 6);
  }
  {
    ScopedEnvironment env(with({{"PMI_RANK", "x"}}));
    auto c = Config::from_environment();
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.status().message().find("PMI_RANK='x'"), std::string::npos);
  }
}

TEST(ConfigEnvironmentTest, GlooSocketIfnameChoosesTheDataAddressUnlessHvrunGaveOne) {
  {
    ScopedEnvironment env(with({{"GLOO_SOCKET_IFNAME", "no-such-if0,lo"}}));
    auto c = Config::from_environment();
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->data_address, "127.0.0.1");
  }
  {
    ScopedEnvironment env(with({{"HOROVOD_GLOO_IFACE", "no-such-if0"}}));
    auto c = Config::from_environment();
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.status().message().find("HOROVOD_GLOO_IFACE=no-such-if0 names no IPv4 interface"),
              std::string::npos)
        << c.status().message();
  }
  {
    ScopedEnvironment env(with({{"HVRUN_DATA_ADDR", "10.9.9.9"}, {"GLOO_SOCKET_IFNAME", "nope"}}));
    auto c = Config::from_environment();
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(c->data_address, "10.9.9.9");
  }
}

}  // namespace
}  // namespace hvrun
