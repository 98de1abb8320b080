//===- LaunchEnvironment.cpp - Rank, world size, master from the launcher ---===//

#include "runtime/comm/LaunchEnvironment.h"

#include <cctype>
#include <cstdlib>
#include <memory>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace mtc::rt {

std::string_view launcherName(Launcher launcher) {
  switch (launcher) {
  case Launcher::None:
    return "none";
  case Launcher::Torchrun:
    return "torchrun";
  case Launcher::OpenMpi:
    return "openmpi";
  case Launcher::Slurm:
    return "slurm";
  }
  return "unknown";
}

EnvironmentLookup processEnvironment() {
  return [](const std::string &name) -> std::optional<std::string> {
    const char *v = std::getenv(name.c_str());
    if (!v)
      return std::nullopt;
    return std::string(v);
  };
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

Expected<int64_t> parseInt(std::string_view name, std::string_view text, int64_t lo, int64_t hi) {
  std::string_view t = trim(text);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size())
    return makeError(name, "='", text, "' is not an integer");
  if (v < lo || v > hi)
    return makeError(name, "=", v, " is not in [", lo, ", ", hi, "]");
  return v;
}

struct Reader {
  const EnvironmentLookup &env;
  std::string_view launcher;

  std::optional<std::string> get(const std::string &name) const {
    auto v = env(name);
    if (v && trim(*v).empty())
      return std::nullopt; // set but empty counts as unset
    return v;
  }
  Expected<int64_t> required(const std::string &name, int64_t lo, int64_t hi) const {
    auto v = get(name);
    if (!v)
      return makeError(launcher, " launch: ", name, " is not set");
    auto i = parseInt(name, *v, lo, hi);
    if (!i)
      return i.takeError().withContext(concat(launcher, " launch"));
    return i;
  }
  Expected<std::optional<int64_t>> optional(const std::string &name, int64_t lo, int64_t hi) const {
    auto v = get(name);
    if (!v)
      return std::optional<int64_t>();
    auto i = parseInt(name, *v, lo, hi);
    if (!i)
      return i.takeError().withContext(concat(launcher, " launch"));
    return std::optional<int64_t>(*i);
  }
};

constexpr int64_t kMaxRanks = 1 << 24;

} // namespace

Expected<std::string> firstHostOfHostlist(std::string_view hostlist) {
  std::string_view s = trim(hostlist);
  if (s.empty())
    return makeError("hostlist is empty");
  // The first item: up to the first comma outside brackets.
  int depth = 0;
  size_t end = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      if (++depth > 1)
        return makeError("hostlist '", hostlist, "': nested '['");
    } else if (s[i] == ']') {
      if (--depth < 0)
        return makeError("hostlist '", hostlist, "': ']' without '['");
    } else if (s[i] == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  std::string_view item = s.substr(0, end);
  if (item.empty())
    return makeError("hostlist '", hostlist, "': empty first host");
  std::string host;
  for (size_t i = 0; i < item.size();) {
    if (item[i] == ']')
      return makeError("hostlist '", hostlist, "': ']' without '['");
    if (item[i] != '[') {
      host.push_back(item[i++]);
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string_view::npos)
      return makeError("hostlist '", hostlist, "': '[' without ']'");
    std::string_view inside = item.substr(i + 1, close - i - 1);
    std::string_view first = inside.substr(0, inside.find(','));
    size_t dash = first.find('-');
    std::string_view lo = first.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : first.substr(dash + 1);
    auto digits = [](std::string_view d) {
      if (d.empty())
        return false;
      for (char c : d)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          return false;
      return true;
    };
    if (!digits(lo) || !digits(hi))
      return makeError("hostlist '", hostlist, "': bad range '[", inside, "]'");
    if (hi.size() > 18 || lo.size() > 18 ||
        std::stoll(std::string(hi)) < std::stoll(std::string(lo)))
      return makeError("hostlist '", hostlist, "': bad range '", first, "'");
    host.append(lo); // keeps zero padding: node[01-04] -> node01
    i = close + 1;
  }
  return host;
}

Expected<LaunchEnvironment> readLaunchEnvironment(const EnvironmentLookup &env) {
  LaunchEnvironment out;
  Reader any{env, "launch"};
  std::string rankVar, sizeVar, localVar, localSizeVar;
  if (any.get("RANK") || any.get("WORLD_SIZE")) {
    out.launcher = Launcher::Torchrun;
    rankVar = "RANK", sizeVar = "WORLD_SIZE", localVar = "LOCAL_RANK",
    localSizeVar = "LOCAL_WORLD_SIZE";
  } else if (any.get("OMPI_COMM_WORLD_RANK") || any.get("OMPI_COMM_WORLD_SIZE")) {
    out.launcher = Launcher::OpenMpi;
    rankVar = "OMPI_COMM_WORLD_RANK", sizeVar = "OMPI_COMM_WORLD_SIZE",
    localVar = "OMPI_COMM_WORLD_LOCAL_RANK", localSizeVar = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (any.get("SLURM_PROCID")) {
    out.launcher = Launcher::Slurm;
    rankVar = "SLURM_PROCID", sizeVar = "SLURM_NTASKS", localVar = "SLURM_LOCALID";
  }

  Reader r{env, launcherName(out.launcher)};
  if (out.launcher != Launcher::None) {
    auto size = r.required(sizeVar, 1, kMaxRanks);
    if (!size)
      return size.takeError();
    auto rank = r.required(rankVar, 0, kMaxRanks - 1);
    if (!rank)
      return rank.takeError();
    if (*rank >= *size)
      return makeError(r.launcher, " launch: ", rankVar, "=", *rank, " is not below ", sizeVar, "=",
                       *size);
    auto local = r.required(localVar, 0, kMaxRanks - 1);
    if (!local)
      return local.takeError();
    if (*local > *rank)
      return makeError(r.launcher, " launch: ", localVar, "=", *local, " exceeds ", rankVar, "=",
                       *rank, " (a local rank counts ranks on this node only)");
    out.rank = static_cast<int>(*rank);
    out.worldSize = static_cast<int>(*size);
    out.localRank = static_cast<int>(*local);
    if (!localSizeVar.empty()) {
      auto localSize = r.optional(localSizeVar, 1, kMaxRanks);
      if (!localSize)
        return localSize.takeError();
      if (*localSize) {
        if (**localSize > *size || *local >= **localSize)
          return makeError(r.launcher, " launch: ", localVar, "=", *local, " and ", localSizeVar,
                           "=", **localSize, " are inconsistent with ", sizeVar, "=", *size);
        out.localWorldSize = static_cast<int>(**localSize);
      }
    }
  }

  // Master address and port.
  if (auto addr = r.get("MASTER_ADDR")) {
    out.masterAddr = std::string(trim(*addr));
  } else if (out.launcher == Launcher::Torchrun) {
    return makeError("torchrun launch: MASTER_ADDR is not set");
  } else if (out.launcher == Launcher::Slurm) {
    std::optional<std::string> list = r.get("SLURM_STEP_NODELIST");
    const char *from = "SLURM_STEP_NODELIST";
    if (!list) {
      list = r.get("SLURM_JOB_NODELIST");
      from = "SLURM_JOB_NODELIST";
    }
    if (!list) {
      if (out.worldSize > 1)
        return makeError("slurm launch: neither MASTER_ADDR nor SLURM_STEP_NODELIST is set");
    } else {
      auto host = firstHostOfHostlist(*list);
      if (!host)
        return host.takeError().withContext(concat("slurm launch: ", from));
      out.masterAddr = std::move(*host);
    }
  } else if (out.launcher == Launcher::OpenMpi && out.worldSize > 1) {
    return makeError("openmpi launch: MASTER_ADDR is not set (Open MPI does not say where rank "
                     "0 runs: mpirun -x MASTER_ADDR=<host of rank 0>)");
  }

  auto port = r.optional("MASTER_PORT", 1, 65535);
  if (!port)
    return port.takeError();
  if (*port) {
    out.masterPort = static_cast<uint16_t>(**port);
  } else if (out.launcher == Launcher::Torchrun) {
    return makeError("torchrun launch: MASTER_PORT is not set");
  } else if (out.launcher == Launcher::Slurm || out.launcher == Launcher::OpenMpi) {
    auto jobId = r.optional("SLURM_JOB_ID", 0, INT64_MAX);
    if (!jobId)
      return jobId.takeError();
    out.masterPort = static_cast<uint16_t>(*jobId ? 20000 + **jobId % 20000 : 29500);
  }
  if (out.worldSize > 1 && out.masterPort == 0)
    return makeError(r.launcher, " launch: the master port is 0");

  // Job token.
  if (auto token = env("MTC_JOB_TOKEN")) {
    std::string_view t = trim(*token);
    if (t.size() > 256)
      return makeError("MTC_JOB_TOKEN is longer than 256 characters");
    for (char c : t)
      if (!std::isgraph(static_cast<unsigned char>(c)))
        return makeError("MTC_JOB_TOKEN contains a space or a control character");
    out.jobToken = std::string(t);
  }
  if (out.worldSize > 1 && out.jobToken.empty())
    return makeError(r.launcher, " launch of ", out.worldSize,
                     " ranks: MTC_JOB_TOKEN is not set (every rank needs the same token, e.g. "
                     "32 hex digits; mtrun generates one)");
  return out;
}

Expected<LaunchEnvironment> readLaunchEnvironment(const std::map<std::string, std::string> &env) {
  return readLaunchEnvironment(
      EnvironmentLookup([&env](const std::string &name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end())
          return std::nullopt;
        return it->second;
      }));
}

bool isLoopbackHost(const std::string &host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0)
    return false;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  for (addrinfo *ai = found; ai; ai = ai->ai_next) {
    const auto *address = reinterpret_cast<const sockaddr_in *>(ai->ai_addr);
    if ((ntohl(address->sin_addr.s_addr) >> 24) != 127)
      return false;
  }
  return true;
}

bool runsOnOneHost(const LaunchEnvironment &env) {
  return env.worldSize <= 1 || env.localWorldSize == env.worldSize ||
         isLoopbackHost(env.masterAddr);
}

Expected<std::string> localAddressToward(const std::string &host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *found = nullptr;
  if (int err = ::getaddrinfo(host.c_str(), "9", &hints, &found); err != 0)
    return makeError("cannot resolve '", host, "': ", ::gai_strerror(err));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0)
    return makeError("cannot create a socket: ", errnoCode());
  sockaddr_in local{};
  socklen_t length = sizeof local;
  bool ok = ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &length) == 0;
  std::error_code ec = errnoCode();
  ::close(fd);
  if (!ok)
    return makeError("no route to '", host, "': ", ec);
  char text[INET_ADDRSTRLEN];
  if (!::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
    return makeError("cannot print the local address toward '", host, "'");
  return std::string(text);
}

} // namespace mtc::rt
