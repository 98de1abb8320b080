//===- LocalLauncher.h - Running the ranks of a job on this host -*- C++ -*-===//
//
// `mtrun PLAN --nodes N [--ranks-per-node R]` without a cluster launcher around it starts the
// N * R ranks itself: child processes of the same executable with the same arguments and
// torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) plus the job token (MTC_JOB_TOKEN) that the rendezvous demands, so that a
// stray process cannot join. The launcher waits for all of them. When one fails (a non-zero
// status or a signal), the others get `grace` to notice (their collectives time out and they
// exit with a message naming the rank and the operation), then SIGTERM, then SIGKILL: the
// launcher never waits forever, and it reports every rank that failed; a rank it had to end
// is reported as stopped (SIGSTOP, SIGTSTP: said at once through `notice`, too) or hung, not
// as killed by the launcher's own signal.
//
// Faults of the launcher itself, as torchrun handles them: SIGTERM, SIGINT, SIGHUP and SIGQUIT
// are passed to every rank (then SIGKILL after 30 s, or at once on a second signal), and every
// rank dies with the launcher (PR_SET_PDEATHSIG = SIGKILL, set between fork and exec and
// checked against getppid for the race), so that a launcher killed with SIGKILL leaves no
// rank training as an orphan. A job that runs until it is told to stop (`mtrun serve`) sets
// `signalEndsTheJob`: after a forwarded signal, ranks that all exit 0 are a success.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_LAUNCH_LOCALLAUNCHER_H
#define MTC_RUNTIME_LAUNCH_LOCALLAUNCHER_H

#include "runtime/support/Error.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mtc::rt {

struct LocalLaunch {
  std::filesystem::path executable;
  std::vector<std::string> args; // argv[1...] of every rank
  int worldSize = 1;
  int ranksPerNode = 1; // LOCAL_WORLD_SIZE; LOCAL_RANK = rank % ranksPerNode
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
  std::string token;
  std::chrono::milliseconds grace{60000};
  /// The threads each rank's kernels run on: given, OPENBLAS_NUM_THREADS for the ranks
  /// (unless the environment sets it), so that OpenBLAS, which starts its thread pool when it
  /// loads, starts no threads the rank then leaves idle (they spin on sched_yield at first);
  /// 0: OpenBLAS's own choice (every core).
  int blasThreads = 0;
  /// Whether a forwarded signal is how the job normally ends (a server's): then ranks that all
  /// exit with status 0 after it are a success, not an interrupted job.
  bool signalEndsTheJob = false;
  /// Told at once what the final report would say too late (a rank stopped); may be empty.
  std::function<void(const std::string &)> notice;
};

/// A port on `address` that nothing listens on now (bound to port 0, then released).
Expected<int> pickFreePort(const std::string &address = "127.0.0.1");

/// Starts the ranks and waits for them; an Error lists the ranks that failed and how.
Error runLocalRanks(const LocalLaunch &launch);

} // namespace mtc::rt

#endif // MTC_RUNTIME_LAUNCH_LOCALLAUNCHER_H
