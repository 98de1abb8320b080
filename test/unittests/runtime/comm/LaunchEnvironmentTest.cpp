//===- LaunchEnvironmentTest.cpp - torchrun, SLURM, Open MPI variables ------===//

#include "runtime/comm/LaunchEnvironment.h"

#include <gtest/gtest.h>

namespace mtc::rt {
namespace {

using Env = std::map<std::string, std::string>;
const std::string kTok = "00112233445566778899aabbccddeeff";

std::string errorOf(const Env &env) {
  auto r = readLaunchEnvironment(env);
  return r ? std::string("(no error)") : r.error().message();
}

TEST(LaunchEnvironment, NoLauncherIsOneRank) {
  auto e = readLaunchEnvironment(Env{});
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->launcher, Launcher::None);
  EXPECT_EQ(e->rank, 0);
  EXPECT_EQ(e->worldSize, 1);
  EXPECT_EQ(e->masterAddr, "127.0.0.1");
  EXPECT_EQ(e->masterPort, 0);
}

TEST(LaunchEnvironment, Torchrun) {
  Env env = {{"RANK", "5"},
             {"WORLD_SIZE", "8"},
             {"LOCAL_RANK", "1"},
             {"LOCAL_WORLD_SIZE", "4"},
             {"MASTER_ADDR", "node01"},
             {"MASTER_PORT", "29500"},
             {"MTC_JOB_TOKEN", kTok},
             // An outer srun step's variables are ignored.
             {"SLURM_PROCID", "1"},
             {"SLURM_NTASKS", "2"},
             {"SLURM_LOCALID", "0"}};
  auto e = readLaunchEnvironment(env);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->launcher, Launcher::Torchrun);
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->worldSize, 8);
  EXPECT_EQ(e->localRank, 1);
  EXPECT_EQ(e->localWorldSize, 4);
  EXPECT_EQ(e->masterAddr, "node01");
  EXPECT_EQ(e->masterPort, 29500);
  EXPECT_EQ(e->jobToken, kTok);
}

TEST(LaunchEnvironment, TorchrunMissingOrInconsistent) {
  Env ok = {{"RANK", "1"},        {"WORLD_SIZE", "2"},     {"LOCAL_RANK", "1"},
            {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"MTC_JOB_TOKEN", kTok}};
  ASSERT_TRUE(readLaunchEnvironment(ok).ok());
  auto without = [&](const std::string &k) {
    Env e = ok;
    e.erase(k);
    return errorOf(e);
  };
  auto with = [&](const std::string &k, const std::string &v) {
    Env e = ok;
    e[k] = v;
    return errorOf(e);
  };
  EXPECT_EQ(without("WORLD_SIZE"), "torchrun launch: WORLD_SIZE is not set");
  EXPECT_EQ(without("LOCAL_RANK"), "torchrun launch: LOCAL_RANK is not set");
  EXPECT_EQ(without("MASTER_ADDR"), "torchrun launch: MASTER_ADDR is not set");
  EXPECT_EQ(without("MASTER_PORT"), "torchrun launch: MASTER_PORT is not set");
  EXPECT_NE(without("MTC_JOB_TOKEN").find("MTC_JOB_TOKEN is not set"), std::string::npos);
  EXPECT_EQ(with("RANK", "2"), "torchrun launch: RANK=2 is not below WORLD_SIZE=2");
  EXPECT_EQ(with("RANK", "one"), "torchrun launch: RANK='one' is not an integer");
  EXPECT_EQ(with("RANK", "-1"), "torchrun launch: RANK=-1 is not in [0, 16777215]");
  EXPECT_EQ(with("WORLD_SIZE", "0"), "torchrun launch: WORLD_SIZE=0 is not in [1, 16777216]");
  EXPECT_EQ(with("MASTER_PORT", "70000"),
            "torchrun launch: MASTER_PORT=70000 is not in [1, 65535]");
  EXPECT_NE(with("LOCAL_RANK", "3").find("LOCAL_RANK=3 exceeds RANK=1"), std::string::npos);
  EXPECT_NE(with("LOCAL_WORLD_SIZE", "1").find("inconsistent"), std::string::npos);
  EXPECT_NE(with("MTC_JOB_TOKEN", "has space").find("space"), std::string::npos);
  // Only WORLD_SIZE set still means torchrun, and RANK is missing.
  EXPECT_EQ(errorOf({{"WORLD_SIZE", "2"}}), "torchrun launch: RANK is not set");
}

TEST(LaunchEnvironment, SlurmWithHostlist) {
  Env env = {{"SLURM_PROCID", "6"},      {"SLURM_NTASKS", "8"},
             {"SLURM_LOCALID", "2"},     {"SLURM_STEP_NODELIST", "gpu[07-08,11],cpu1"},
             {"SLURM_JOB_ID", "123456"}, {"MTC_JOB_TOKEN", kTok}};
  auto e = readLaunchEnvironment(env);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->launcher, Launcher::Slurm);
  EXPECT_EQ(e->rank, 6);
  EXPECT_EQ(e->worldSize, 8);
  EXPECT_EQ(e->localRank, 2);
  EXPECT_EQ(e->masterAddr, "gpu07");
  EXPECT_EQ(e->masterPort, 20000 + 123456 % 20000);

  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "4000";
  e = readLaunchEnvironment(env);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->masterAddr, "10.0.0.1");
  EXPECT_EQ(e->masterPort, 4000);

  Env bad = {{"SLURM_PROCID", "0"},
             {"SLURM_NTASKS", "2"},
             {"SLURM_LOCALID", "0"},
             {"MTC_JOB_TOKEN", kTok}};
  EXPECT_EQ(errorOf(bad), "slurm launch: neither MASTER_ADDR nor SLURM_STEP_NODELIST is set");
  bad["SLURM_STEP_NODELIST"] = "node[3-1]";
  EXPECT_NE(errorOf(bad).find("slurm launch: SLURM_STEP_NODELIST: hostlist 'node[3-1]'"),
            std::string::npos)
      << errorOf(bad);
  bad.erase("SLURM_STEP_NODELIST");
  bad["SLURM_JOB_NODELIST"] = "login";
  EXPECT_EQ(readLaunchEnvironment(bad)->masterAddr, "login");
  bad.erase("SLURM_NTASKS");
  EXPECT_EQ(errorOf(bad), "slurm launch: SLURM_NTASKS is not set");
}

// A job on one host listens on loopback; one across hosts where the others reach it.
TEST(LaunchEnvironment, RunsOnOneHost) {
  EXPECT_TRUE(isLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(isLoopbackHost("127.3.2.1"));
  EXPECT_TRUE(isLoopbackHost("localhost"));
  EXPECT_FALSE(isLoopbackHost("192.0.2.7"));
  EXPECT_FALSE(isLoopbackHost("no-such-host.invalid"));

  LaunchEnvironment env;
  EXPECT_TRUE(runsOnOneHost(env)); // one rank
  env.worldSize = 8;
  env.masterAddr = "192.0.2.7";
  env.localWorldSize = 4; // two hosts of four ranks
  EXPECT_FALSE(runsOnOneHost(env));
  env.localWorldSize = 0; // not said: the master's address decides
  EXPECT_FALSE(runsOnOneHost(env));
  env.localWorldSize = 8; // torchrun --nproc-per-node 8 on one host
  EXPECT_TRUE(runsOnOneHost(env));
  env.localWorldSize = 1; // mtrun --nodes 8 on this host: MASTER_ADDR is loopback
  env.masterAddr = "127.0.0.1";
  EXPECT_TRUE(runsOnOneHost(env));
}

TEST(LaunchEnvironment, Hostlists) {
  auto first = [](std::string_view s) {
    auto r = firstHostOfHostlist(s);
    return r ? *r : "error: " + r.error().message();
  };
  EXPECT_EQ(first("node[01-04,07]"), "node01");
  EXPECT_EQ(first("node[7,1-3]"), "node7");
  EXPECT_EQ(first("a1,b2"), "a1");
  EXPECT_EQ(first("single"), "single");
  EXPECT_EQ(first(" node[001-100] "), "node001");
  EXPECT_EQ(first("rack[1-2]-n[3-4],x"), "rack1-n3");
  EXPECT_EQ(first("node[5]"), "node5");
  EXPECT_EQ(first("node-a.cluster,node-b"), "node-a.cluster");
  EXPECT_EQ(first(""), "error: hostlist is empty");
  EXPECT_EQ(first("node[01-04"), "error: hostlist 'node[01-04': '[' without ']'");
  EXPECT_EQ(first("node]1["), "error: hostlist 'node]1[': ']' without '['");
  EXPECT_EQ(first("node[]"), "error: hostlist 'node[]': bad range '[]'");
  EXPECT_EQ(first("node[a-b]"), "error: hostlist 'node[a-b]': bad range '[a-b]'");
  EXPECT_EQ(first("node[4-2]"), "error: hostlist 'node[4-2]': bad range '4-2'");
  EXPECT_EQ(first(",a"), "error: hostlist ',a': empty first host");
}

TEST(LaunchEnvironment, OpenMpi) {
  Env env = {{"OMPI_COMM_WORLD_RANK", "3"},
             {"OMPI_COMM_WORLD_SIZE", "4"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
             {"MASTER_ADDR", "head"},
             {"MTC_JOB_TOKEN", kTok},
             // mpirun inside an sbatch allocation: the batch step's SLURM_PROCID is stale.
             {"SLURM_PROCID", "0"},
             {"SLURM_JOB_ID", "7"}};
  auto e = readLaunchEnvironment(env);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->launcher, Launcher::OpenMpi);
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->worldSize, 4);
  EXPECT_EQ(e->localRank, 1);
  EXPECT_EQ(e->localWorldSize, 2);
  EXPECT_EQ(e->masterAddr, "head");
  EXPECT_EQ(e->masterPort, 20007);
  env.erase("SLURM_JOB_ID");
  EXPECT_EQ(readLaunchEnvironment(env)->masterPort, 29500);
  env.erase("MASTER_ADDR");
  EXPECT_NE(errorOf(env).find("openmpi launch: MASTER_ADDR is not set"), std::string::npos);
  env["MASTER_ADDR"] = "head";
  env["OMPI_COMM_WORLD_RANK"] = "4";
  EXPECT_EQ(errorOf(env),
            "openmpi launch: OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4");
  // One rank needs neither a master nor a token.
  auto single = readLaunchEnvironment(Env{{"OMPI_COMM_WORLD_RANK", "0"},
                                          {"OMPI_COMM_WORLD_SIZE", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  ASSERT_TRUE(single.ok()) << single.error().message();
  EXPECT_EQ(single->masterAddr, "127.0.0.1");
}

TEST(LaunchEnvironment, ProcessEnvironmentLookup) {
  ::setenv("MTC_LAUNCH_ENV_TEST_VAR", "x", 1);
  auto env = processEnvironment();
  EXPECT_EQ(env("MTC_LAUNCH_ENV_TEST_VAR"), std::optional<std::string>("x"));
  EXPECT_EQ(env("MTC_LAUNCH_ENV_TEST_UNSET_VAR"), std::nullopt);
  ::unsetenv("MTC_LAUNCH_ENV_TEST_VAR");
}

} // namespace
} // namespace mtc::rt

namespace mtc::rt {
TEST(LocalAddressToward, LoopbackAndErrors) {
  Expected<std::string> loopback = localAddressToward("127.0.0.1");
  ASSERT_TRUE(loopback.ok()) << loopback.error().message();
  EXPECT_EQ(*loopback, "127.0.0.1");
  Expected<std::string> bad = localAddressToward("no-such-host.invalid");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("cannot resolve 'no-such-host.invalid'"), std::string::npos)
      << bad.error().message();
}
} // namespace mtc::rt
