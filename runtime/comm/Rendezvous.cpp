//===- Rendezvous.cpp - TCP key-value store for rendezvous ------------------===//
//
// The server accepts on one thread and serves each connection on its own thread (a job has
// one connection per rank). Waiting requests block on a condition variable with their
// deadline. Stopping shuts every socket down, which wakes the blocked reads, then joins.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Rendezvous.h"

#include <gloo/common/error.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mtc::rt {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
constexpr Deadline kNoDeadline = Deadline::max();
constexpr uint32_t kMaxFrameBytes = 64u << 20;
constexpr auto kHelloTimeout = std::chrono::seconds(10);

enum Op : uint8_t { OpHello = 1, OpSet = 2, OpGet = 3, OpWait = 4, OpAges = 5 };
enum Status : uint8_t { StOk = 0, StRefused = 1, StTimeout = 2, StBadRequest = 3 };

Deadline after(std::chrono::milliseconds d) {
  if (d.count() < 0 || d > std::chrono::hours(24 * 365))
    return kNoDeadline;
  return Clock::now() + d;
}

struct Writer {
  std::string buf;
  void u8(uint8_t v) { buf.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      buf.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      buf.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf.append(s);
  }
};

struct Reader {
  std::string_view data;
  size_t pos = 0;
  bool ok = true;
  bool need(size_t n) {
    if (!ok || data.size() - pos < n)
      ok = false;
    return ok;
  }
  uint8_t u8() { return need(1) ? static_cast<uint8_t>(data[pos++]) : 0; }
  uint32_t u32() {
    if (!need(4))
      return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(static_cast<uint8_t>(data[pos++])) << (8 * i);
    return v;
  }
  uint64_t u64() {
    if (!need(8))
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(static_cast<uint8_t>(data[pos++])) << (8 * i);
    return v;
  }
  std::string str() {
    uint32_t n = u32();
    if (!need(n))
      return {};
    std::string s(data.substr(pos, n));
    pos += n;
    return s;
  }
  bool atEnd() const { return ok && pos == data.size(); }
};

/// Waits until `fd` is ready for `events` or the deadline passes.
Error waitFd(int fd, short events, Deadline deadline, const char *what) {
  for (;;) {
    int ms = -1;
    if (deadline != kNoDeadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        return makeError("timed out ", what);
      ms = static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
    }
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0)
      return Error::success();
    if (r < 0 && errno != EINTR)
      return makeError(what, ": poll: ", errnoCode());
  }
}

Error sendAll(int fd, const char *p, size_t n, Deadline deadline) {
  while (n > 0) {
    if (Error e = waitFd(fd, POLLOUT, deadline, "sending"); !e.ok())
      return e;
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return makeError("send: ", errnoCode());
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Error::success();
}

Error recvAll(int fd, char *p, size_t n, Deadline deadline) {
  while (n > 0) {
    if (Error e = waitFd(fd, POLLIN, deadline, "waiting for a reply"); !e.ok())
      return e;
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0)
      return makeError("connection closed by the peer");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return makeError("recv: ", errnoCode());
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Error::success();
}

Error sendFrame(int fd, std::string_view payload, Deadline deadline) {
  Writer w;
  w.u32(static_cast<uint32_t>(payload.size()));
  w.buf.append(payload);
  return sendAll(fd, w.buf.data(), w.buf.size(), deadline);
}

Expected<std::string> recvFrame(int fd, Deadline deadline, uint32_t maxBytes) {
  char header[4];
  if (Error e = recvAll(fd, header, 4, deadline); !e.ok())
    return e;
  Reader r{std::string_view(header, 4)};
  uint32_t n = r.u32();
  if (n > maxBytes)
    return makeError("frame of ", n, " bytes exceeds the limit of ", maxBytes);
  std::string payload(n, '\0');
  if (Error e = recvAll(fd, payload.data(), n, deadline); !e.ok())
    return e;
  return payload;
}

bool tokensEqual(std::string_view a, std::string_view b) {
  // Constant time in the contents (the length is not secret).
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string hexOf(const unsigned char *p, size_t n) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(digits[p[i] >> 4]);
    s.push_back(digits[p[i] & 15]);
  }
  return s;
}

} // namespace

Expected<std::string> generateJobToken() {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError("/dev/urandom: ", errnoCode());
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t r = ::read(fd, bytes + got, sizeof bytes - got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      Error e =
          makeError("/dev/urandom: ", r == 0 ? std::string("end of file") : errnoCode().message());
      ::close(fd);
      return e;
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return hexOf(bytes, sizeof bytes);
}

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct StoreServer::State {
  int listenFd = -1;
  int wakePipe[2] = {-1, -1};
  uint16_t port = 0;
  std::string token;

  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::vector<char>> data;
  std::map<std::string, Clock::time_point> setAt; // when each key of `data` was last set
  bool stopping = false;
  struct Connection {
    int fd;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Connection> connections;
  std::thread acceptThread;

  void acceptLoop();
  void serve(int fd);
  std::string handle(std::string_view request);
  void stop();
};

void StoreServer::State::acceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listenFd, POLLIN, 0}, {wakePipe[0], POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents)
      return;
    if (!(fds[0].revents & POLLIN))
      continue;
    int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) {
      ::close(fd);
      return;
    }
    // Reap finished connections.
    for (auto it = connections.begin(); it != connections.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    connections.push_back(Connection{fd, std::thread(), done});
    connections.back().thread = std::thread([this, fd, done] {
      serve(fd);
      std::lock_guard<std::mutex> l(mutex);
      for (auto &c : connections)
        if (c.fd == fd && c.done == done)
          c.fd = -1;
      ::close(fd);
      done->store(true);
    });
  }
}

void StoreServer::State::serve(int fd) {
  // The first frame must be HELLO with the token, and come soon.
  Expected<std::string> hello = recvFrame(fd, Clock::now() + kHelloTimeout, 4096);
  if (!hello)
    return;
  Reader r{*hello};
  uint8_t op = r.u8();
  std::string presented = r.str();
  Writer reply;
  if (op != OpHello || !r.atEnd() || !tokensEqual(presented, token)) {
    reply.u8(StRefused);
    (void)sendFrame(fd, reply.buf, Clock::now() + std::chrono::seconds(1));
    return;
  }
  reply.u8(StOk);
  if (!sendFrame(fd, reply.buf, Clock::now() + kHelloTimeout).ok())
    return;
  for (;;) {
    Expected<std::string> request = recvFrame(fd, kNoDeadline, kMaxFrameBytes);
    if (!request)
      return;
    std::string answer = handle(*request);
    if (answer.empty())
      return; // stopping
    if (!sendFrame(fd, answer, Clock::now() + std::chrono::seconds(30)).ok())
      return;
  }
}

std::string StoreServer::State::handle(std::string_view request) {
  Reader r{request};
  Writer w;
  uint8_t op = r.u8();
  std::unique_lock<std::mutex> lock(mutex);
  switch (op) {
  case OpSet: {
    std::string key = r.str();
    std::string value = r.str();
    if (!r.atEnd())
      break;
    data[key] = std::vector<char>(value.begin(), value.end());
    setAt[key] = Clock::now();
    changed.notify_all();
    w.u8(StOk);
    return w.buf;
  }
  case OpGet: {
    std::string key = r.str();
    uint64_t ms = r.u64();
    if (!r.atEnd())
      break;
    Deadline deadline = after(std::chrono::milliseconds(static_cast<int64_t>(ms)));
    changed.wait_until(lock, deadline, [&] { return stopping || data.count(key) != 0; });
    if (stopping)
      return {};
    auto it = data.find(key);
    if (it == data.end()) {
      w.u8(StTimeout);
    } else {
      w.u8(StOk);
      w.str(std::string_view(it->second.data(), it->second.size()));
    }
    return w.buf;
  }
  case OpWait: {
    uint32_t n = r.u32();
    std::vector<std::string> keys;
    for (uint32_t i = 0; i < n && r.ok; ++i)
      keys.push_back(r.str());
    uint64_t ms = r.u64();
    if (!r.atEnd())
      break;
    auto missing = [&] {
      std::vector<std::string> m;
      for (const auto &k : keys)
        if (!data.count(k))
          m.push_back(k);
      return m;
    };
    Deadline deadline = after(std::chrono::milliseconds(static_cast<int64_t>(ms)));
    changed.wait_until(lock, deadline, [&] { return stopping || missing().empty(); });
    if (stopping)
      return {};
    std::vector<std::string> m = missing();
    w.u8(m.empty() ? StOk : StTimeout);
    w.u32(static_cast<uint32_t>(m.size()));
    for (const auto &k : m)
      w.str(k);
    return w.buf;
  }
  case OpAges: {
    uint32_t n = r.u32();
    std::vector<std::string> keys;
    for (uint32_t i = 0; i < n && r.ok; ++i)
      keys.push_back(r.str());
    if (!r.atEnd())
      break;
    const Clock::time_point now = Clock::now();
    w.u8(StOk);
    w.u32(n);
    for (const auto &k : keys) {
      auto it = setAt.find(k);
      const bool present = it != setAt.end();
      const auto age = present
                           ? std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second)
                           : std::chrono::milliseconds(0);
      w.u8(present);
      w.u64(static_cast<uint64_t>(age.count()));
    }
    return w.buf;
  }
  default:
    break;
  }
  w.u8(StBadRequest);
  return w.buf;
}

void StoreServer::State::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    for (auto &c : connections)
      if (c.fd >= 0)
        ::shutdown(c.fd, SHUT_RDWR);
    changed.notify_all();
  }
  if (wakePipe[1] >= 0) {
    char c = 1;
    (void)!::write(wakePipe[1], &c, 1);
  }
  if (acceptThread.joinable())
    acceptThread.join();
  // No new connections now; join the rest without the lock (they take it to finish).
  std::list<Connection> rest;
  {
    std::lock_guard<std::mutex> lock(mutex);
    rest.swap(connections);
  }
  for (auto &c : rest)
    if (c.thread.joinable())
      c.thread.join();
  if (listenFd >= 0)
    ::close(listenFd);
  for (int &fd : wakePipe)
    if (fd >= 0)
      ::close(fd), fd = -1;
  listenFd = -1;
}

StoreServer::StoreServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

StoreServer::~StoreServer() {
  if (state_)
    state_->stop();
}

uint16_t StoreServer::port() const { return state_->port; }

Expected<std::unique_ptr<StoreServer>> StoreServer::start(const std::string &bindAddress,
                                                          uint16_t port, std::string token) {
  if (token.empty())
    return makeError("store server: the job token is empty");
  std::string where = concat(bindAddress.empty() ? "0.0.0.0" : bindAddress, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string service = std::to_string(port);
  int gai = ::getaddrinfo(bindAddress.empty() ? nullptr : bindAddress.c_str(), service.c_str(),
                          &hints, &res);
  if (gai != 0)
    return makeError("store server: cannot resolve ", where, ": ", ::gai_strerror(gai));
  auto state = std::make_unique<State>();
  state->token = std::move(token);
  Error lastError = makeError("store server: no address for ", where);
  for (addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      lastError = makeError("store server: socket: ", errnoCode());
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      lastError = makeError("store server: cannot listen on ", where, ": ", errnoCode());
      ::close(fd);
      continue;
    }
    state->listenFd = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (state->listenFd < 0)
    return lastError;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(state->listenFd, reinterpret_cast<sockaddr *>(&bound), &len);
  state->port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
  if (::pipe2(state->wakePipe, O_CLOEXEC) != 0) {
    ::close(state->listenFd);
    return makeError("store server: pipe: ", errnoCode());
  }
  State *s = state.get();
  try {
    s->acceptThread = std::thread([s] { s->acceptLoop(); });
  } catch (const std::exception &e) {
    s->stop();
    return makeError("store server: cannot start its thread: ", e.what());
  }
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(state)));
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

namespace {

/// One connection attempt to any address of host:port, within `deadline`.
Expected<int> connectOnce(const std::string &host, uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string service = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0)
    return makeError("cannot resolve '", host, "': ", ::gai_strerror(gai));
  Error last = makeError("no address");
  for (addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = makeError("socket: ", errnoCode());
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      Deadline attempt = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      if (Error e = waitFd(fd, POLLOUT, attempt, "connecting"); !e.ok()) {
        last = std::move(e);
        ::close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = makeError(errnoCode());
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

} // namespace

Expected<std::shared_ptr<TcpStore>> TcpStore::connect(const std::string &host, uint16_t port,
                                                      const std::string &token,
                                                      std::chrono::milliseconds timeout) {
  std::string endpoint = concat(host, ":", port);
  Deadline deadline = after(timeout);
  Error last;
  for (;;) {
    Expected<int> fd = connectOnce(host, port, deadline);
    if (fd) {
      Writer hello;
      hello.u8(OpHello);
      hello.str(token);
      Deadline helloDeadline = std::max(deadline, Clock::now() + std::chrono::seconds(1));
      Error e = sendFrame(*fd, hello.buf, helloDeadline);
      Expected<std::string> reply =
          e.ok() ? recvFrame(*fd, helloDeadline, 4096) : Expected<std::string>(std::move(e));
      if (reply && !reply->empty() && (*reply)[0] == StOk)
        return std::shared_ptr<TcpStore>(new TcpStore(*fd, host, port, token, timeout));
      ::close(*fd);
      if (reply || reply.error().message() == "connection closed by the peer")
        return makeError("the rendezvous store at ", endpoint,
                         " refused this process: its job token (MTC_JOB_TOKEN) differs");
      return reply.takeError().withContext(concat("rendezvous store at ", endpoint));
    }
    last = fd.takeError();
    if (Clock::now() + std::chrono::milliseconds(50) >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return makeError("cannot reach the rendezvous store at ", endpoint, " within ", timeout.count(),
                   " ms (is rank 0 running?): ", last.message());
}

TcpStore::TcpStore(int fd, std::string host, uint16_t port, std::string token,
                   std::chrono::milliseconds timeout)
    : fd_(fd), host_(std::move(host)), port_(port), token_(std::move(token)),
      endpoint_(concat(host_, ":", port_)), timeout_(timeout) {}

Expected<std::shared_ptr<TcpStore>>
TcpStore::connectAgain(std::chrono::milliseconds timeout) const {
  return connect(host_, port_, token_, timeout);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0)
    ::close(fd_);
}

Expected<std::string> TcpStore::request(const std::string &payload, std::chrono::milliseconds wait,
                                        std::chrono::milliseconds replyTimeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0)
    return makeError("rendezvous store at ", endpoint_, ": connection lost earlier");
  // The server answers a waiting request at its deadline; allow for the trip.
  Deadline deadline = after(std::max(wait, std::chrono::milliseconds(0)) + replyTimeout);
  Error e = sendFrame(fd_, payload, deadline);
  Expected<std::string> reply =
      e.ok() ? recvFrame(fd_, deadline, kMaxFrameBytes) : Expected<std::string>(std::move(e));
  if (!reply || reply->empty()) {
    ::close(fd_);
    fd_ = -1;
    if (reply)
      return makeError("rendezvous store at ", endpoint_, ": empty reply");
    return reply.takeError().withContext(concat("rendezvous store at ", endpoint_));
  }
  return reply;
}

Error TcpStore::trySet(const std::string &key, const std::vector<char> &value) {
  Writer w;
  w.u8(OpSet);
  w.str(key);
  w.str(std::string_view(value.data(), value.size()));
  Expected<std::string> reply = request(w.buf, std::chrono::milliseconds(0), defaultReplyTimeout());
  if (!reply)
    return reply.takeError();
  if ((*reply)[0] != StOk)
    return makeError("rendezvous store at ", endpoint_, " rejected setting '", key, "'");
  return Error::success();
}

Expected<std::vector<char>> TcpStore::tryGet(const std::string &key,
                                             std::chrono::milliseconds timeout) {
  Writer w;
  w.u8(OpGet);
  w.str(key);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  Expected<std::string> reply = request(w.buf, timeout, defaultReplyTimeout());
  if (!reply)
    return reply.takeError();
  Reader r{*reply};
  uint8_t status = r.u8();
  if (status == StTimeout)
    return makeError("rendezvous store at ", endpoint_, ": key '", key, "' not set within ",
                     timeout.count(), " ms");
  std::string value = r.str();
  if (status != StOk || !r.atEnd())
    return makeError("rendezvous store at ", endpoint_, ": bad reply to get '", key, "'");
  return std::vector<char>(value.begin(), value.end());
}

Expected<std::vector<std::string>> TcpStore::waitMissing(const std::vector<std::string> &keys,
                                                         std::chrono::milliseconds timeout) {
  Writer w;
  w.u8(OpWait);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto &k : keys)
    w.str(k);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  Expected<std::string> reply = request(w.buf, timeout, defaultReplyTimeout());
  if (!reply)
    return reply.takeError();
  Reader r{*reply};
  uint8_t status = r.u8();
  uint32_t n = r.u32();
  std::vector<std::string> missing;
  for (uint32_t i = 0; i < n && r.ok; ++i)
    missing.push_back(r.str());
  if ((status != StOk && status != StTimeout) || !r.atEnd())
    return makeError("rendezvous store at ", endpoint_, ": bad reply to wait");
  return missing;
}

Expected<std::vector<std::optional<std::chrono::milliseconds>>>
TcpStore::ages(const std::vector<std::string> &keys, std::chrono::milliseconds replyTimeout) {
  Writer w;
  w.u8(OpAges);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto &k : keys)
    w.str(k);
  Expected<std::string> reply = request(w.buf, std::chrono::milliseconds(0), replyTimeout);
  if (!reply)
    return reply.takeError();
  Reader r{*reply};
  uint8_t status = r.u8();
  uint32_t n = r.u32();
  std::vector<std::optional<std::chrono::milliseconds>> result;
  for (uint32_t i = 0; i < n && r.ok; ++i) {
    bool present = r.u8() != 0;
    uint64_t ms = r.u64();
    result.push_back(present ? std::optional(std::chrono::milliseconds(static_cast<int64_t>(ms)))
                             : std::nullopt);
  }
  if (status != StOk || !r.atEnd() || result.size() != keys.size())
    return makeError("rendezvous store at ", endpoint_, ": bad reply to ages");
  return result;
}

void TcpStore::set(const std::string &key, const std::vector<char> &data) {
  if (Error e = trySet(key, data); !e.ok())
    throw gloo::IoException(e.message());
}

std::vector<char> TcpStore::get(const std::string &key) {
  Expected<std::vector<char>> v = tryGet(key, timeout_);
  if (!v)
    throw gloo::IoException(v.error().message());
  return std::move(*v);
}

void TcpStore::wait(const std::vector<std::string> &keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string> &keys,
                    const std::chrono::milliseconds &timeout) {
  Expected<std::vector<std::string>> missing = waitMissing(keys, timeout);
  if (!missing)
    throw gloo::IoException(missing.error().message());
  if (!missing->empty()) {
    std::string list;
    for (const auto &k : *missing)
      list += (list.empty() ? "'" : ", '") + k + "'";
    throw gloo::IoException(concat("rendezvous store at ", endpoint_, ": key(s) ", list,
                                   " not set within ", timeout.count(), " ms"));
  }
}

//===----------------------------------------------------------------------===//
// Job store and rendezvous
//===----------------------------------------------------------------------===//

Expected<JobStore> openJobStore(int rank, const std::string &masterAddr, uint16_t port,
                                const std::string &token, std::chrono::milliseconds timeout,
                                const std::string &bindAddress) {
  JobStore js;
  uint16_t connectPort = port;
  if (rank == 0) {
    auto server = StoreServer::start(bindAddress, port, token);
    if (!server)
      return server.takeError().withContext("rank 0");
    connectPort = (*server)->port();
    js.server = std::move(*server);
  } else if (port == 0) {
    return makeError("rank ", rank, ": the master port is 0 (only rank 0 may pick a port)");
  }
  auto client = TcpStore::connect(
      rank == 0 ? std::string(masterAddr.empty() ? "127.0.0.1" : masterAddr) : masterAddr,
      connectPort, token, timeout);
  if (!client)
    return client.takeError().withContext(concat("rank ", rank));
  js.client = std::move(*client);
  return js;
}

Error waitForRanks(TcpStore &store, std::string_view prefix, int rank, int size,
                   std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    return makeError("rendezvous '", prefix, "': rank ", rank, " is not in [0, ", size, ")");
  std::string base = concat(prefix, "/arrived/");
  std::string value = std::to_string(size);
  if (Error e = store.trySet(base + std::to_string(rank), {value.begin(), value.end()}); !e.ok())
    return std::move(e).withContext(concat("rendezvous '", prefix, "' (rank ", rank, ")"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    keys.push_back(base + std::to_string(r));
  Expected<std::vector<std::string>> missing = store.waitMissing(keys, timeout);
  if (!missing)
    return missing.takeError().withContext(concat("rendezvous '", prefix, "' (rank ", rank, ")"));
  if (missing->empty())
    return Error::success();
  std::string list;
  for (const auto &k : *missing)
    list += (list.empty() ? "" : ", ") + k.substr(base.size());
  return makeError("rendezvous '", prefix, "' of ", size, " ranks timed out after ",
                   timeout.count(), " ms (seen from rank ", rank, "): rank(s) ", list,
                   " did not arrive");
}

} // namespace mtc::rt
