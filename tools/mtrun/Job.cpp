//===- Job.cpp - Starting and joining the ranks of an mtrun job -----------===//

#include "tools/mtrun/Job.h"

#include "runtime/comm/GlooCommunicator.h"
#include "runtime/comm/Heartbeat.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/launch/LocalLauncher.h"
#include "runtime/support/CommandLine.h"

#include <cstdio>
#include <cstdlib>

namespace mtc::rt {

Expected<RankContext> joinJob(const LaunchEnvironment &env, std::chrono::milliseconds timeout,
                              JobStore &store) {
  RankContext job;
  job.rank = env.rank;
  job.size = env.worldSize;
  if (env.worldSize == 1)
    return job;
  // A job on one host listens on loopback only, its store and its Gloo pairs: no other host
  // can reach (or disturb) them. A job across hosts listens where the others reach it.
  const bool oneHost = runsOnOneHost(env);
  const std::string master = oneHost ? std::string("127.0.0.1") : env.masterAddr;
  Expected<JobStore> opened = openJobStore(env.rank, master, env.masterPort, env.jobToken, timeout,
                                           oneHost ? "127.0.0.1" : "0.0.0.0");
  if (!opened)
    return opened.takeError().withContext("rendezvous");
  store = std::move(*opened);
  // Every rank beats in the store, so that a failed collective names the ranks that went
  // silent (a stopped or hung rank), not only the neighbour it waited on. Without a heartbeat
  // the job still runs; its errors only lack those names.
  if (Expected<std::unique_ptr<Heartbeat>> heartbeat =
          Heartbeat::start(store.client, env.rank, env.worldSize))
    store.heartbeat = std::move(*heartbeat);
  else
    std::fprintf(stderr, "mtrun: warning: rank %d: %s; errors will not name silent ranks\n",
                 env.rank, heartbeat.error().message().c_str());
  GlooOptions options;
  // GLOO_SOCKET_IFNAME names the interface, as for PyTorch; otherwise this host's address
  // on the route to the master, which the other ranks can reach (loopback on one host).
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    options.interface = iface;
  } else {
    Expected<std::string> address = localAddressToward(master);
    if (!address)
      return address.takeError().withContext("choosing the address to listen on");
    options.hostname = *address;
  }
  options.timeout = timeout;
  options.rendezvousTimeout = timeout;
  Expected<std::unique_ptr<GlooCommunicator>> world =
      GlooCommunicator::create(store, env.rank, env.worldSize, options);
  if (!world)
    return world.takeError().withContext("connecting the ranks");
  job.world = std::move(*world);
  return job;
}

Expected<int> threadsForLocalRanks(const std::optional<std::string> &flag, int ranks,
                                   std::vector<std::string> &args, size_t at) {
  if (flag) {
    Expected<int64_t> given = parseInteger(flag, "--threads-per-rank", 0, 1, kMaxThreadsPerRank);
    return given ? static_cast<int>(*given) : 0;
  }
  Expected<int> chosen = defaultThreadsPerRank(processEnvironment(), availableCores(), ranks);
  if (!chosen)
    return chosen.takeError();
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(at),
              {"--threads-per-rank", std::to_string(*chosen)});
  return *chosen;
}

Error startLocalRanks(std::vector<std::string> args, int worldSize, int ranksPerNode,
                      int threadsPerRank, std::chrono::milliseconds grace, bool signalEndsTheJob) {
  Expected<int> port = pickFreePort();
  if (!port)
    return port.takeError();
  Expected<std::string> token = generateJobToken();
  if (!token)
    return token.takeError();
  LocalLaunch launch;
  launch.executable = "/proc/self/exe";
  launch.args = std::move(args);
  launch.worldSize = worldSize;
  launch.ranksPerNode = ranksPerNode;
  launch.masterPort = *port;
  launch.token = *token;
  launch.grace = grace;
  launch.blasThreads = threadsPerRank;
  launch.signalEndsTheJob = signalEndsTheJob;
  launch.notice = [](const std::string &text) {
    std::fprintf(stderr, "mtrun: warning: %s\n", text.c_str());
  };
  return runLocalRanks(launch);
}

void finishFailedRank(RankContext &job, JobStore &store, std::chrono::milliseconds commTimeout) {
  // Rank 0's process runs the store: after a failure it closes its connections and ends its
  // heartbeat, but keeps the store until the other ranks have ended or gone silent (or they
  // had time to), so that their errors can still name the silent ranks.
  if (!store.server)
    return;
  job.world.reset();
  store.heartbeat.reset();
  waitUntilPeersAreSilent(*store.client, job.rank, job.size, HeartbeatOptions(),
                          commTimeout + HeartbeatOptions().silenceThreshold());
}

} // namespace mtc::rt
