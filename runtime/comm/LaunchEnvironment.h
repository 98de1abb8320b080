//===- LaunchEnvironment.h - Rank, world size, master from the launcher -*- C++ -*-===//
//
// Where this process stands in the job, read from the variables its launcher set:
//
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK [, LOCAL_WORLD_SIZE], MASTER_ADDR, MASTER_PORT
//   Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//              [, OMPI_COMM_WORLD_LOCAL_SIZE]; MASTER_ADDR required for more than one rank
//              (mpirun -x MASTER_ADDR=host), MASTER_PORT optional
//   SLURM      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the master is MASTER_ADDR or else
//              the first host of SLURM_STEP_NODELIST (then SLURM_JOB_NODELIST), a compressed
//              hostlist such as "node[01-04,07]" -> "node01"; MASTER_PORT or else
//              20000 + SLURM_JOB_ID % 20000 (so that jobs sharing a node differ)
//   none       one rank: rank 0 of 1 on 127.0.0.1, port 0 (a free port)
//
// The first launcher in that order whose rank variable is set wins: torchrun under srun and
// mpirun inside an sbatch allocation both leave SLURM_* variables of the outer step around.
// The job token comes from MTC_JOB_TOKEN and is required for more than one rank.
//
// The environment is a lookup function (or a map), so tests pass their own.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_LAUNCHENVIRONMENT_H
#define MTC_RUNTIME_COMM_LAUNCHENVIRONMENT_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace mtc::rt {

enum class Launcher { None, Torchrun, OpenMpi, Slurm };

/// "none", "torchrun", "openmpi", "slurm".
std::string_view launcherName(Launcher launcher);

struct LaunchEnvironment {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 0; // 0: not said by the launcher
  std::string masterAddr = "127.0.0.1";
  uint16_t masterPort = 0;
  std::string jobToken; // may be empty for one rank
};

/// Returns the value of a variable, or nullopt when it is unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string &)>;

/// The process's environment (getenv).
EnvironmentLookup processEnvironment();

/// Reads and checks the launch variables. Errors name the variable and the launcher.
Expected<LaunchEnvironment> readLaunchEnvironment(const EnvironmentLookup &env);
Expected<LaunchEnvironment> readLaunchEnvironment(const std::map<std::string, std::string> &env);

/// The address of this host on the route to `host` (a name or an IPv4 address): what the
/// other ranks can reach this one at, without knowing interface names. Found by connecting
/// a UDP socket (no packet is sent) and reading its local address.
Expected<std::string> localAddressToward(const std::string &host);

/// Whether every rank of the job runs on this host: MASTER_ADDR is a loopback address, or the
/// launcher says this host runs them all (LOCAL_WORLD_SIZE equals WORLD_SIZE). Such a job
/// listens on loopback only (its store and its Gloo pairs), out of reach of other hosts;
/// one that spans hosts listens where the others can reach it, as torchrun's store does.
bool runsOnOneHost(const LaunchEnvironment &env);

/// Whether `host` (a name or an address) resolves to IPv4 loopback addresses only.
bool isLoopbackHost(const std::string &host);

/// The first host of a SLURM compressed hostlist: "node[01-04,07],gpu5" -> "node01",
/// "a1,b2" -> "a1", "r[1-2]-n[3-4]" -> "r1-n3".
Expected<std::string> firstHostOfHostlist(std::string_view hostlist);

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_LAUNCHENVIRONMENT_H
