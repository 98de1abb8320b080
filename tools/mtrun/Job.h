//===- Job.h - Starting and joining the ranks of an mtrun job ---*- C++ -*-===//
//
// What `mtrun PLAN` (training), `mtrun generate` and `mtrun serve` share of a multi-rank job:
//
//   - `--nodes N [--ranks-per-node R]` without a cluster launcher: this process starts the
//     N x R ranks itself (runtime/launch/LocalLauncher.h), each running the same command
//     again under torchrun's variables, and waits for them (startLocalRanks);
//   - each rank joins its job (joinJob): the rendezvous store that rank 0 runs, the rank's
//     heartbeat in it, and the world communicator over Gloo;
//   - after a rank's failure, rank 0 (whose process runs the store) keeps the store until its
//     peers have ended or gone silent (finishFailedRank), so that their errors can still
//     name the silent ranks.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTRUN_JOB_H
#define MTC_TOOLS_MTRUN_JOB_H

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/exec/TrainingRun.h"
#include "runtime/support/Error.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mtc::rt {

/// Joins the job a launcher started (torchrun, srun, mpirun, or mtrun --nodes itself):
/// rendezvous with the job token, then the world communicator over Gloo. `store` keeps a copy
/// of the job store (with the rank's heartbeat) for the end of the run. A job of one rank
/// joins nothing.
Expected<RankContext> joinJob(const LaunchEnvironment &env, std::chrono::milliseconds timeout,
                              JobStore &store);

/// The threads per rank of a job startLocalRanks starts (`generate`, `serve`): the
/// `--threads-per-rank` value `flag` as given, else defaultThreadsPerRank for `ranks` ranks,
/// which is then passed on to them: inserted into `args` at `at`. An invalid flag gives 0
/// (OpenBLAS's choice for startLocalRanks): each rank reports it.
Expected<int> threadsForLocalRanks(const std::optional<std::string> &flag, int ranks,
                                   std::vector<std::string> &args, size_t at);

/// Starts `worldSize` ranks on this host (`ranksPerNode` per node), each running this
/// executable with `args` (argv[1...]), and waits for them; fails naming the ranks that
/// failed. `threadsPerRank`: the threads each rank's kernels run on, OpenBLAS's threads
/// for the ranks (LocalLaunch::blasThreads; 0: OpenBLAS's choice). `grace` is what the
/// others get to notice a failed rank before they are ended. `signalEndsTheJob`: a signal
/// passed to the ranks is how the job ends (a server's), so ranks that all exit 0 after it
/// are a success (LocalLaunch).
Error startLocalRanks(std::vector<std::string> args, int worldSize, int ranksPerNode,
                      int threadsPerRank, std::chrono::milliseconds grace,
                      bool signalEndsTheJob = false);

/// After this rank failed: its communicators go, and rank 0, whose process runs the store,
/// waits until every other rank has ended or gone silent (at most `commTimeout` and a
/// heartbeat's silence threshold).
void finishFailedRank(RankContext &job, JobStore &store, std::chrono::milliseconds commTimeout);

} // namespace mtc::rt

#endif // MTC_TOOLS_MTRUN_JOB_H
