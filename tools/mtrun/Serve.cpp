//===- Serve.cpp - `mtrun serve` ------------------------------------------===//
//
// Loads the model as `mtrun generate` does (GenerationModel.h) and checks every flag, binds,
// then answers requests on a pool of threads through Debian's cpp-httplib (the only file of
// mtc that includes it). The bodies are runtime/serve's: this file moves bytes, bounds them and
// serialises the model:
//
// - a body larger than --max-request-bytes is refused with 413 as it arrives (counted here,
//   whatever its framing: cpp-httplib 0.11 bounds only bodies with a Content-Length);
// - more than --max-concurrency generation requests at once, those computing and those
//   waiting for the model together, are refused with 503 at once rather than queued without
//   bound; the model computes one request at a time, in the order they come, on a thread of
//   its own (its buffers, like the tokenizer's caches, are not shared between threads, and
//   the kernels' thread settings belong to the thread that calls them);
// - one request per connection (no keep-alive): an idle client holds no thread of the pool,
//   and a refused body never leaves half a request on the connection;
// - SIGINT and SIGTERM stop the server: the generation in progress ends at its next token
//   (503), and mtrun exits 0. The handler resets itself, so a second signal ends mtrun at once.
//
// `--nodes N [--ranks-per-node R]` (or a launcher's job) serves a plan that `mtrun generate`
// runs on several ranks (tp, tp + sp, data-parallel copies; Job.h starts and joins the ranks):
// every rank loads its shards, rank 0 alone listens, and every request it admits is handed to
// the other ranks through the job's store (runtime/serve/RequestRelay.h), which they wait on
// between requests without a collective's timeout. Every rank then runs the same completion
// with the same seed over the shared logits (SharedLogits.h) and rank 0 answers. The ranks
// decide together, before each token, whether to stop (a signal to any of them), and after
// each request whether their communicators still work. Rank 0 watches the others' heartbeats
// while it serves: a rank that dies or goes silent stops the server, and rank 0 tells the
// others to end (an error, status 1). A stop ends every rank with status 0; a rank of a job
// takes every SIGINT and SIGTERM as the first (its launcher escalates), and one sent to
// another rank asks rank 0 to stop.
//
//===----------------------------------------------------------------------===//

#include "tools/mtrun/Serve.h"
#include "tools/mtrun/GenerationModel.h"
#include "tools/mtrun/Job.h"

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/serve/Completion.h"
#include "runtime/serve/CompletionRequest.h"
#include "runtime/serve/RequestRelay.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/Json.h"
#include "runtime/support/OutputPaths.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

namespace mtc::rt {
namespace {

constexpr const char *kUsage =
    "usage: mtrun serve PLAN (--load CKPT | --steps 0) [options]\n\n"
    "Answers text-generation requests over HTTP with the plan's `logits` function on this CPU\n"
    "(one generation at a time): Megatron's PUT /api, OpenAI's POST /v1/completions,\n"
    "GET /v1/models and GET /health. A plan partitioned over tp/sp runs on the ranks of its\n"
    "mesh (--nodes): rank 0 listens and every rank generates. Stops on SIGINT or SIGTERM\n"
    "(exit status 0).\n\n"
    "options:\n"
    "  --load DIR                 the parameters of the checkpoint in DIR\n"
    "  --steps 0                  the plan's initial parameters instead\n"
    "  --host H                   the address to listen on (default 127.0.0.1; 0.0.0.0: every\n"
    "                             interface; there is no TLS and no authentication)\n"
    "  --port N                   the port (default 5000, Megatron's; 0: any free port)\n"
    "  --port-file F              write the port to F once listening (for --port 0)\n"
    "  --max-request-bytes N      larger bodies are refused with 413 (default 1048576)\n"
    "  --max-concurrency N        generation requests at once, computing or waiting for the\n"
    "                             model; more are refused with 503 (default 8)\n"
    "  --seed S                   requests without a seed sample with S, S + 1, ... in the\n"
    "                             order they reach the model (default: the plan's seed)\n"
    "  --model-name NAME          the model's name in OpenAI's answers (default: PLAN's\n"
    "                             directory name without .plan)\n"
    "  --tokenizer-type T, --vocab-file F, --merge-file F, --tokenizer-model F,\n"
    "  --vocab-extra-ids N\n"
    "                             the tokenizer, as mtrun generate and mtc-data take it\n"
    "  --no-kv-cache              score the whole window for every token, even where the\n"
    "                             plan has a KV cache (prefill and decode_step)\n"
    "  --threads-per-rank N       threads of the kernels (default: OMP_NUM_THREADS, else\n"
    "                             this host's cores / its ranks)\n"
    "  --nodes N                  run N nodes' ranks (on this host unless a launcher started\n"
    "                             mtrun): a multiple of the plan's mesh size\n"
    "  --ranks-per-node R         ranks per node (default 1)\n"
    "  --comm-timeout S           fail a collective after S seconds without progress\n"
    "                             (default 60; the ranks wait for requests without it)\n";

/// Prints the error; on a rank of several, names it.
int failWith(const Error &err, const RankContext *job = nullptr) {
  if (job && job->size > 1)
    std::fprintf(stderr, "mtrun serve: error: rank %d: %s\n", job->rank, err.message().c_str());
  else
    std::fprintf(stderr, "mtrun serve: error: %s\n", err.message().c_str());
  return 1;
}

/// The paths and what answers on them; any other method gets 405.
constexpr const char *kRoutes = "PUT /api, POST /v1/completions, GET /v1/models, GET /health";

/// Whether `path` belongs to OpenAI's API (its errors have OpenAI's shape).
bool isOpenAIPath(const std::string &path) { return path.rfind("/v1/", 0) == 0; }

/// The error body for `path`: OpenAI's shape under /v1/, else Megatron's.
std::string errorBody(const std::string &path, const RequestError &error) {
  return errorResponse(isOpenAIPath(path) ? CompletionApi::OpenAI : CompletionApi::Megatron, error);
}

/// One request's place among the --max-concurrency allowed, if one is free; released when it
/// goes. `active` counts the places taken.
class ConcurrencySlot {
public:
  ConcurrencySlot(std::atomic<int64_t> &active, int64_t limit) : active_(active) {
    int64_t taken = active_.load();
    while (taken < limit && !active_.compare_exchange_weak(taken, taken + 1)) {
    }
    admitted_ = taken < limit;
  }
  ~ConcurrencySlot() {
    if (admitted_)
      active_.fetch_sub(1);
  }
  ConcurrencySlot(const ConcurrencySlot &) = delete;
  ConcurrencySlot &operator=(const ConcurrencySlot &) = delete;
  bool admitted() const { return admitted_; }

private:
  std::atomic<int64_t> &active_;
  bool admitted_ = false;
};

// A POSIX handler can only leave the signal in static storage: the one global of `mtrun
// serve`, written by the handler (on whichever thread the signal lands, the kernels' own
// included) and read by the watcher (rank 0) or between two waits for a request (the others).
std::atomic<int> stopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free, "written in a signal handler");

void onStopSignal(int signal) { stopSignal.store(signal); }

/// "SIGINT" or "SIGTERM".
const char *signalName(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

/// While alive: SIGINT and SIGTERM are left in stopSignal; the previous handlers come back
/// when destroyed. Alone, a second signal takes its default action (ends mtrun at once); a
/// rank of a job takes every one alike, as its launcher passes on what it gets (and, from a
/// terminal, the ranks get the signal themselves too) and escalates on its own.
class StopSignals {
public:
  explicit StopSignals(bool secondEndsAtOnce) {
    stopSignal.store(0);
    struct sigaction action{};
    action.sa_handler = onStopSignal;
    action.sa_flags = secondEndsAtOnce ? SA_RESETHAND : 0;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previousInt_);
    ::sigaction(SIGTERM, &action, &previousTerm_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &previousInt_, nullptr);
    ::sigaction(SIGTERM, &previousTerm_, nullptr);
  }
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;
  /// The signal received, 0 if none was.
  int signal() const { return stopSignal.load(); }

private:
  struct sigaction previousInt_{}, previousTerm_{};
};

/// While alive: a signal (StopSignals) sets `stopping`, and once `stopping` is set (by the
/// signal or by anyone else) the server stops. `check`, if given, runs every 250 ms on the
/// watcher's thread (rank 0 of a job watches the other ranks with it).
class StopWatcher {
public:
  StopWatcher(httplib::Server &server, std::atomic<bool> &stopping, std::function<void()> check)
      : server_(server), stopping_(stopping), check_(std::move(check)),
        thread_([this] { watch(); }) {}
  ~StopWatcher() {
    done_ = true;
    thread_.join();
  }
  StopWatcher(const StopWatcher &) = delete;
  StopWatcher &operator=(const StopWatcher &) = delete;

private:
  void watch() {
    for (int tick = 0; !done_; ++tick) {
      if (stopSignal.load() != 0)
        stopping_ = true;
      if (check_ && tick % 12 == 0 && !stopping_)
        check_();
      // Until listening ends: a stop before the server runs is not remembered.
      if (stopping_)
        server_.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  httplib::Server &server_;
  std::atomic<bool> &stopping_;
  std::function<void()> check_;
  std::atomic<bool> done_{false};
  std::thread thread_; // last: it starts once the members above exist
};

/// The one thread that runs the model, one job at a time in the order they come. The
/// kernels' OpenMP team and OpenBLAS's thread count belong to the thread that calls them, so
/// the model runs on a thread of its own rather than on whichever thread of the pool
/// received the request.
class ModelThread {
public:
  explicit ModelThread(int kernelThreads)
      : thread_([this, kernelThreads] {
          setKernelThreads(kernelThreads);
          work();
        }) {}
  ~ModelThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  ModelThread(const ModelThread &) = delete;
  ModelThread &operator=(const ModelThread &) = delete;

  /// Runs `job` on the model's thread once the jobs before it are done; returns its result.
  template <class Job> std::invoke_result_t<Job> run(Job job) {
    std::packaged_task<std::invoke_result_t<Job>()> task(std::move(job));
    auto result = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back([&task] { task(); });
    }
    wake_.notify_one();
    return result.get();
  }

private:
  void work() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty())
          return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool done_ = false;
  std::thread thread_; // last: it starts once the members above exist
};

/// Sets a JSON answer.
void answerJson(httplib::Response &response, int status, const std::string &body) {
  response.status = status;
  response.set_content(body, "application/json");
}

/// The name of the plan directory `plan` without its .plan.
std::string planName(const std::string &plan) {
  std::filesystem::path path(plan);
  if (!path.has_filename())
    path = path.parent_path();
  return path.extension() == ".plan" ? path.stem().string() : path.filename().string();
}

/// What the server is given, checked, besides the model.
struct ServerSettings {
  std::string host, model;
  int64_t port = 5000, maxBytes = 1 << 20, maxConcurrency = 8, seed = 0;
  std::optional<std::string> portFile;
  std::chrono::milliseconds commTimeout{60000};
};

/// Rank 0's link to the other ranks of a job: the world they generate over, the job's store
/// and the bell that hands them requests.
struct JobLink {
  RankContext &job;
  JobStore &store;
  RequestBell bell;
};

/// Rank 0: answers requests over HTTP until a signal (to it or, through the store, to another
/// rank) or a failure of the job; with `link`, every request it admits is generated by every
/// rank of the job.
int serveRequests(GenerationModel &generation, const CompletionModel &completionModel,
                  const ServerSettings &settings, const StopSignals &signals, JobLink *link) {
  const RankContext *job = link ? &link->job : nullptr;
  httplib::Server server;
  // Bodies with a Content-Length above the bound are refused on it (cpp-httplib drops them
  // unkept), and before they are sent to a client that waits for "100 Continue".
  server.set_payload_max_length(static_cast<size_t>(settings.maxBytes));
  auto tooLargeError = [&] {
    return RequestError{413,
                        concat("the request body is larger than ", settings.maxBytes,
                               " bytes (--max-request-bytes)"),
                        ""};
  };
  server.set_expect_100_continue_handler([&](const httplib::Request &request,
                                             httplib::Response &response) {
    if (request.get_header_value<uint64_t>("Content-Length") <=
        static_cast<uint64_t>(settings.maxBytes))
      return 100;
    answerJson(response, 413, errorBody(request.path, tooLargeError()));
    std::fprintf(stderr, "mtrun serve: %s %s 413 (before the body)\n", request.method.c_str(),
                 request.path.c_str());
    return 413;
  });
  server.set_keep_alive_max_count(1);
  // A client silent for this long (before its request, within it) is left, so that a stopping
  // server waits for no one longer.
  server.set_keep_alive_timeout(5);
  server.set_read_timeout(10);
  server.set_write_timeout(10);
  // Threads beyond the concurrency bound answer the excess (503) and the health checks.
  const size_t threads = static_cast<size_t>(settings.maxConcurrency) + 4;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  ModelThread modelThread(generation.threads());
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> active{0}, completed{0};
  int64_t unseeded = 0; // requests without a seed that reached the model (its thread's)
  const int64_t started = static_cast<int64_t>(std::time(nullptr));
  // Why the job must end (the first failure of its ranks or communicators; rank 0 of a job
  // only), and the note of a stop another rank asked for.
  std::mutex endMutex;
  std::optional<Error> failure;
  std::optional<std::string> stopNote;
  auto fail = [&](Error err) {
    {
      std::lock_guard<std::mutex> lock(endMutex);
      if (!failure)
        failure = std::move(err);
    }
    stopping = true;
  };
  const RequestError stoppedError{503, "the server is stopping: the request was not completed", ""};

  // One request on the model's thread: alone, or handed to every rank of the job first.
  auto runOnModel = [&](CompletionApi api, const std::string &body,
                        const CompletionRequest &completion)
      -> std::variant<std::vector<CompletionResult>, RequestError> {
    uint64_t requestSeed =
        completion.seed ? *completion.seed : static_cast<uint64_t>(settings.seed + unseeded++);
    if (!link)
      return complete(completionModel, completion, requestSeed, [&] { return stopping.load(); });
    if (stopping.load())
      return stoppedError;
    if (Error err = link->bell.ring({RelayedRequest::Kind::Generate, api, requestSeed, body});
        !err.ok()) {
      fail(std::move(err));
      return stoppedError;
    }
    Communicator *world = link->job.world.get();
    const uint64_t number = link->bell.rung();
    bool broken = false;
    auto results = complete(completionModel, completion, requestSeed, [&] {
      Expected<bool> agreed =
          anyRank(world, stopping.load(), concat("request ", number, ": agreeing to go on"));
      if (!agreed) {
        broken = true;
        fail(agreed.takeError());
        return true;
      }
      // A signal to another rank stops the server too.
      if (*agreed && !stopping.load()) {
        {
          std::lock_guard<std::mutex> lock(endMutex);
          stopNote = "a rank was sent SIGINT or SIGTERM during a request";
        }
        stopping = true;
      }
      return *agreed;
    });
    // The communicators still work (a failure above was the model's, agreed by every rank),
    // or the job ends.
    if (!broken)
      if (Expected<bool> after =
              anyRank(world, false, concat("request ", number, ": checking the ranks after it"));
          !after) {
        auto *error = std::get_if<RequestError>(&results);
        fail(error && error->status == 500 ? makeError("request ", number, ": ", error->message)
                                           : after.takeError());
      }
    if (Error err = link->bell.forgetLast(); !err.ok())
      fail(std::move(err));
    return results;
  };

  auto generate = [&](CompletionApi api, const httplib::Request &request,
                      httplib::Response &response, const httplib::ContentReader &reader) {
    auto start = std::chrono::steady_clock::now();
    auto reply = [&](int status, const std::string &body) {
      answerJson(response, status, body);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::fprintf(stderr, "mtrun serve: %s %s %d (%.1f ms)\n", request.method.c_str(),
                   request.path.c_str(), status, ms);
    };
    auto refuse = [&](const RequestError &error) {
      reply(error.status, errorResponse(api, error));
    };
    ConcurrencySlot slot(active, settings.maxConcurrency);
    if (!slot.admitted())
      return refuse({503,
                     concat("the server is busy: it takes ", settings.maxConcurrency,
                            " generation request", settings.maxConcurrency == 1 ? "" : "s",
                            " at a time (--max-concurrency); retry later"),
                     ""});
    // Past the bound the body is read on and dropped, so that the client, still sending,
    // gets the answer rather than a reset connection; past 64 times the bound it is left.
    std::string body;
    size_t received = 0;
    bool tooLarge = false;
    bool read = reader([&](const char *data, size_t size) {
      received += size;
      tooLarge = tooLarge || received > static_cast<size_t>(settings.maxBytes);
      if (!tooLarge)
        body.append(data, size);
      return received / 64 <= static_cast<size_t>(settings.maxBytes);
    });
    if (tooLarge || response.status == 413)
      return refuse(tooLargeError());
    if (!read)
      return refuse({400,
                     "the request body could not be read (a broken chunked or compressed "
                     "encoding?)",
                     ""});
    // Refused requests end here: the other ranks of a job never hear of them.
    std::variant<CompletionRequest, RequestError> parsed = parseCompletionRequest(api, body);
    if (auto *error = std::get_if<RequestError>(&parsed))
      return refuse(*error);
    const CompletionRequest &completion = std::get<CompletionRequest>(parsed);
    std::variant<std::vector<CompletionResult>, RequestError> results =
        modelThread.run([&] { return runOnModel(api, body, completion); });
    if (auto *error = std::get_if<RequestError>(&results))
      return refuse(*error);
    std::string id = concat("cmpl-", started, "-", completed.fetch_add(1));
    reply(200, completionResponse(completion, std::get<0>(results), id,
                                  static_cast<int64_t>(std::time(nullptr)), settings.model));
  };

  server.Put("/api", [&](const httplib::Request &q, httplib::Response &r,
                         const httplib::ContentReader &reader) {
    generate(CompletionApi::Megatron, q, r, reader);
  });
  server.Post("/v1/completions", [&](const httplib::Request &q, httplib::Response &r,
                                     const httplib::ContentReader &reader) {
    generate(CompletionApi::OpenAI, q, r, reader);
  });
  // Not counted among the generation requests: they answer while the model computes.
  server.Get("/health", [&](const httplib::Request &, httplib::Response &r) {
    answerJson(r, 200,
               JsonValue(JsonObject{{"status", "ok"},
                                    {"active_requests", active.load()},
                                    {"max_concurrency", settings.maxConcurrency}})
                   .serialize());
  });
  server.Get("/v1/models", [&](const httplib::Request &, httplib::Response &r) {
    answerJson(r, 200,
               JsonValue(JsonObject{{"object", "list"},
                                    {"data", JsonArray{JsonObject{{"id", settings.model},
                                                                  {"object", "model"},
                                                                  {"created", started},
                                                                  {"owned_by", "mtc"}}}}})
                   .serialize());
  });
  // Every other method on these paths: 405 with the one that answers.
  auto wrongMethod = [](const char *allowed) {
    return [allowed](const httplib::Request &request, httplib::Response &response) {
      response.set_header("Allow", allowed);
      answerJson(response, 405,
                 errorBody(request.path, {405,
                                          concat(request.method, " is not allowed on ",
                                                 request.path, ": use ", allowed),
                                          ""}));
    };
  };
  const std::pair<const char *, const char *> routes[] = {
      {"/api", "PUT"}, {"/v1/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}};
  for (const auto &[path, allowed] : routes) {
    std::string method = allowed;
    if (method != "GET")
      server.Get(path, wrongMethod(allowed));
    if (method != "POST")
      server.Post(path, wrongMethod(allowed));
    if (method != "PUT")
      server.Put(path, wrongMethod(allowed));
    server.Delete(path, wrongMethod(allowed));
    server.Patch(path, wrongMethod(allowed));
    server.Options(path, wrongMethod(allowed));
  }
  // Called for every status from 400 on; the answers above carry their own body.
  server.set_error_handler([](const httplib::Request &request, httplib::Response &response) {
    if (!response.body.empty())
      return;
    std::string message = response.status == 404
                              ? concat("no such path: ", request.path, " (", kRoutes, ")")
                          : response.status == 413 ? std::string("the request body is too large")
                                                   : concat("HTTP status ", response.status);
    answerJson(response, response.status, errorBody(request.path, {response.status, message, ""}));
  });

  // Rank 0 of a job ends it: the other ranks stop (a clean stop) or abort with its error, and
  // the store, which this process runs, stays until they have ended or gone silent.
  auto endJob = [&](const Error *why) {
    if (!link)
      return;
    RelayedRequest last{why ? RelayedRequest::Kind::Abort : RelayedRequest::Kind::Stop,
                        CompletionApi::OpenAI, 0, why ? why->message() : std::string()};
    if (Error err = link->bell.ring(last); !err.ok())
      std::fprintf(stderr, "mtrun serve: warning: cannot tell the other ranks to end: %s\n",
                   err.message().c_str());
    waitUntilPeersAreSilent(*link->store.client, 0, link->job.size, HeartbeatOptions(),
                            settings.commTimeout + HeartbeatOptions().silenceThreshold());
  };
  auto failJob = [&](const Error &err) {
    endJob(&err);
    return failWith(err, job);
  };

  const int bound = settings.port == 0 ? server.bind_to_any_port(settings.host)
                    : server.bind_to_port(settings.host, static_cast<int>(settings.port))
                        ? static_cast<int>(settings.port)
                        : -1;
  if (bound < 0)
    return failJob(makeError("cannot listen on ", settings.host, ":", settings.port,
                             " (is the port in use, or the address not this machine's?)"));
  if (settings.portFile) {
    // Written whole under another name first: a reader never sees half a number.
    std::string partial = *settings.portFile + ".partial";
    std::ofstream out(partial, std::ios::trunc);
    out << bound << "\n";
    out.close();
    std::error_code ec;
    if (!out || (std::filesystem::rename(partial, *settings.portFile, ec), ec))
      return failJob(makeError("--port-file: cannot write '", *settings.portFile, "'"));
  }
  const bool ipv6 = settings.host.find(':') != std::string::npos;
  std::fprintf(stderr, "mtrun serve: listening on http://%s%s%s:%d (%s)\n", ipv6 ? "[" : "",
               settings.host.c_str(), ipv6 ? "]" : "", bound, kRoutes);
  std::string ranks =
      job ? concat(" on ", job->size, " ranks (", describeMesh(generation.plan(), job->size), ")")
          : std::string();
  std::fprintf(stderr, "mtrun serve: generating with the %s%s\n",
               generation.usesKVCache() ? "KV cache (prefill, then decode_step per token)"
                                        : "window path (the whole window per token)",
               ranks.c_str());

  // Rank 0 of a job watches the others while it serves: a stop one of them asks for, and
  // their heartbeats (a rank that has ended or gone silent ends the job).
  std::function<void()> watchJob;
  if (link)
    watchJob = [&, tick = 0]() mutable {
      Expected<std::optional<std::string>> asked = link->bell.stopAsked();
      if (asked && *asked) {
        {
          std::lock_guard<std::mutex> lock(endMutex);
          stopNote = **asked;
        }
        stopping = true;
        return;
      }
      if (tick++ % 4 != 0)
        return;
      Expected<std::vector<RankHeartbeat>> beats = readHeartbeats(
          *link->store.client, link->job.size, HeartbeatOptions(), std::chrono::seconds(5));
      if (!beats)
        return;
      for (const RankHeartbeat &beat : *beats)
        // A rank without a heartbeat (a warning at its start) is judged by its collectives.
        if (beat.rank != 0 && beat.age && beat.silent(HeartbeatOptions()))
          return fail(makeError("serving on ", link->job.size, " ranks: ", beat.describe()));
    };
  {
    StopWatcher watcher(server, stopping, watchJob);
    server.listen_after_bind();
  }
  const int signal = signals.signal();
  // Listening has ended and every request with it (the pool's threads are joined).
  std::lock_guard<std::mutex> lock(endMutex);
  if (failure)
    return failJob(*failure);
  if (signal == 0 && !stopNote)
    return failJob(makeError("the server stopped listening"));
  endJob(nullptr);
  std::string why = signal != 0 ? concat("by ", signalName(signal))
                                : concat("at the request of another rank (", *stopNote, ")");
  std::fprintf(stderr, "mtrun serve: stopped %s after %lld completed generation requests\n",
               why.c_str(), static_cast<long long>(completed.load()));
  return 0;
}

/// Every rank of a job but 0: generates every request rank 0 hands over, until it says stop
/// (status 0) or fails (1), or this rank's communicators or rank 0 fail.
int followRequests(const CompletionModel &completionModel, RankContext &job, JobStore &store,
                   const StopSignals &signals) {
  RequestListener listener(store.client, job.rank, job.size);
  bool asked = false;
  // A signal to this rank while it waits asks rank 0 to stop the server (during a request the
  // ranks agree on it before the next token).
  auto idle = [&]() -> Error {
    if (asked || signals.signal() == 0)
      return Error::success();
    asked = true;
    return listener.askToStop(
        concat("rank ", job.rank, " was sent ", signalName(signals.signal())));
  };
  for (;;) {
    Expected<RelayedRequest> message = listener.next(idle);
    if (!message)
      return failWith(message.error(), &job);
    if (message->kind == RelayedRequest::Kind::Stop)
      return 0;
    if (message->kind == RelayedRequest::Kind::Abort)
      return failWith(makeError("rank 0 ended the job: ", message->body), &job);
    std::variant<CompletionRequest, RequestError> parsed =
        parseCompletionRequest(message->api, message->body);
    if (auto *error = std::get_if<RequestError>(&parsed))
      return failWith(makeError("rank 0's request does not read here: ", error->message), &job);
    // The same completion as rank 0's, for the same decisions; the answer is rank 0's to give.
    std::optional<Error> broken;
    auto results =
        complete(completionModel, std::get<CompletionRequest>(parsed), message->seed, [&] {
          Expected<bool> agreed =
              anyRank(job.world.get(), signals.signal() != 0, "agreeing to go on");
          if (!agreed) {
            broken = agreed.takeError();
            return true;
          }
          return *agreed;
        });
    if (broken)
      return failWith(*broken, &job);
    if (Expected<bool> after =
            anyRank(job.world.get(), false, "checking the ranks after a request");
        !after) {
      auto *error = std::get_if<RequestError>(&results);
      return failWith(error && error->status == 500 ? makeError(error->message) : after.error(),
                      &job);
    }
  }
}

/// The launcher of `--nodes N`: checks what every rank would refuse alike (the plan's layout
/// for the job's ranks, the tokenizer), then starts the ranks and waits for them; a signal
/// passed to them is the job's normal end.
int launchRanks(const CommandLine &line, int argc, char **argv, int64_t ranks, int64_t ranksPerNode,
                std::chrono::milliseconds commTimeout) {
  Expected<Plan> plan = loadPlan(line.positional.front());
  if (!plan)
    return failWith(plan.error());
  if (Error err = checkGenerationLayout(*plan, ranks, "serve"); !err.ok())
    return failWith(err);
  Expected<TokenizerOptions> tokenizerFlags = tokenizerOptions(line);
  if (!tokenizerFlags)
    return failWith(tokenizerFlags.error());
  if (Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(*tokenizerFlags); !tokenizer)
    return failWith(tokenizer.error());
  std::vector<std::string> args(argv, argv + argc); // "serve" first
  Expected<int> threads =
      threadsForLocalRanks(line.value("--threads-per-rank"), static_cast<int>(ranks), args, 1);
  if (!threads)
    return failWith(threads.error());
  if (Error err =
          startLocalRanks(std::move(args), static_cast<int>(ranks), static_cast<int>(ranksPerNode),
                          *threads, commTimeout + std::chrono::seconds(5),
                          /*signalEndsTheJob=*/true);
      !err.ok())
    return failWith(err);
  return 0;
}

int serveMain(int argc, char **argv) {
  Expected<CommandLine> line = parseCommandLine(
      argc, argv, 1,
      {{"--load", "--steps", "--host", "--port", "--port-file", "--max-request-bytes",
        "--max-concurrency", "--seed", "--model-name", "--threads-per-rank", "--nodes",
        "--ranks-per-node", "--comm-timeout", kTokenizerFlags[0], kTokenizerFlags[1],
        kTokenizerFlags[2], kTokenizerFlags[3], kTokenizerFlags[4]},
       {},
       {"--help", "-h", "--no-kv-cache"},
       " of mtrun serve (see mtrun serve --help)"});
  if (!line)
    return failWith(line.error());
  if (line->flags.count("--help") || line->flags.count("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (line->positional.empty())
    return failWith(makeError("no PLAN given (usage: mtrun serve PLAN --load CKPT; see mtrun "
                              "serve --help)"));
  if (line->positional.size() > 1)
    return failWith(
        makeError("unexpected argument '", line->positional[1], "' (mtrun serve takes one PLAN)"));
  ServerSettings settings;
  Expected<int64_t> port = parseInteger(line->value("--port"), "--port", 5000, 0, 65535);
  Expected<int64_t> maxBytes = parseInteger(line->value("--max-request-bytes"),
                                            "--max-request-bytes", 1 << 20, 1, int64_t(1) << 30);
  Expected<int64_t> maxConcurrency =
      parseInteger(line->value("--max-concurrency"), "--max-concurrency", 8, 1, 1024);
  constexpr int64_t kMaxRanks = 65536, kMaxCommTimeoutSeconds = 24 * 60 * 60;
  Expected<int64_t> nodes = parseInteger(line->value("--nodes"), "--nodes", 1, 1, kMaxRanks);
  Expected<int64_t> ranksPerNode =
      parseInteger(line->value("--ranks-per-node"), "--ranks-per-node", 1, 1, kMaxRanks);
  Expected<int64_t> commTimeout =
      parseInteger(line->value("--comm-timeout"), "--comm-timeout", 60, 1, kMaxCommTimeoutSeconds);
  for (const Error *err : {&port.error(), &maxBytes.error(), &maxConcurrency.error(),
                           &nodes.error(), &ranksPerNode.error(), &commTimeout.error()})
    if (!err->ok())
      return failWith(*err);
  settings.port = *port;
  settings.maxBytes = *maxBytes;
  settings.maxConcurrency = *maxConcurrency;
  settings.commTimeout = std::chrono::seconds(*commTimeout);
  settings.host = line->value("--host").value_or("127.0.0.1");
  settings.model = line->value("--model-name").value_or(planName(line->positional[0]));
  settings.portFile = line->value("--port-file");
  if (settings.portFile)
    if (Error err = checkOutputFile(*settings.portFile, "--port-file"); !err.ok())
      return failWith(err);

  const int64_t requested = *nodes * *ranksPerNode;
  if (requested > kMaxRanks)
    return failWith(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                              requested, " ranks, more than the ", kMaxRanks,
                              " this runtime runs"));
  Expected<LaunchEnvironment> env = readLaunchEnvironment(processEnvironment());
  if (!env)
    return failWith(env.error());
  if (env->launcher == Launcher::None && requested > 1)
    return launchRanks(*line, argc, argv, requested, *ranksPerNode, settings.commTimeout);
  if (env->launcher != Launcher::None && line->value("--nodes") && requested != env->worldSize)
    return failWith(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                              requested, " ranks, but ", launcherName(env->launcher), " started ",
                              env->worldSize));
  // What every rank would refuse alike, before any joins: a plan generation cannot run here.
  if (Expected<Plan> plan = loadPlan(line->positional.front()); !plan)
    return failWith(plan.error());
  else if (Error err = checkGenerationLayout(*plan, env->worldSize, "serve"); !err.ok())
    return failWith(err);
  Expected<TokenizerOptions> tokenizer = tokenizerOptions(*line);
  if (!tokenizer)
    return failWith(tokenizer.error());

  JobStore store;
  Expected<RankContext> job = joinJob(*env, settings.commTimeout, store);
  if (!job) {
    RankContext self{env->rank, env->worldSize, nullptr};
    return failWith(job.error(), &self);
  }
  const int ranksOnHost = env->launcher == Launcher::None ? 1
                          : env->localWorldSize > 0       ? env->localWorldSize
                                                          : env->worldSize;
  // On several ranks a signal stops the job from here (one that comes while the model loads,
  // once rank 0 listens): a rank it ended during the load would fail the job. Alone, a signal
  // ends the load (its default action) and stops the server once it listens.
  std::optional<StopSignals> signals;
  if (job->size > 1)
    signals.emplace(/*secondEndsAtOnce=*/false);
  Expected<std::unique_ptr<GenerationModel>> loaded =
      GenerationModel::load({line->positional.front(), line->value("--load"),
                             line->value("--steps"), line->value("--threads-per-rank"), *tokenizer,
                             line->flags.count("--no-kv-cache") > 0, ranksOnHost},
                            job->world.get());
  int status = 1;
  if (!loaded) {
    status = failWith(loaded.error(), &*job);
  } else if (Expected<int64_t> seed = parseInteger(line->value("--seed"), "--seed",
                                                   static_cast<int64_t>((*loaded)->plan().seed), 0,
                                                   std::numeric_limits<int64_t>::max());
             !seed) {
    status = failWith(seed.error(), &*job);
  } else {
    settings.seed = *seed;
    GenerationModel &generation = **loaded;
    CompletionModel completionModel;
    completionModel.tokenizer = &generation.tokenizer();
    completionModel.window = generation.window();
    completionModel.vocabulary = generation.vocabulary();
    completionModel.logitsOfLast = generation.logitsOfLast();
    completionModel.logitsOfEach =
        [&generation](std::span<const int64_t> ids,
                      const std::function<void(int64_t, std::span<const float>)> &visit) {
          if (Error err = generation.logits().run(ids); !err.ok())
            return err;
          for (int64_t t = 0; t < static_cast<int64_t>(ids.size()); ++t)
            visit(t, generation.logits().at(t));
          return Error::success();
        };
    if (!signals)
      signals.emplace(/*secondEndsAtOnce=*/true);
    if (job->size == 1) {
      status = serveRequests(generation, completionModel, settings, *signals, nullptr);
    } else if (job->rank == 0) {
      JobLink link{*job, store, RequestBell(store.client)};
      // serveRequests ends the job itself (its other ranks are told to stop or abort).
      return serveRequests(generation, completionModel, settings, *signals, &link);
    } else {
      status = followRequests(completionModel, *job, store, *signals);
    }
  }
  if (status != 0)
    finishFailedRank(*job, store, settings.commTimeout);
  return status;
}

} // namespace

int runServe(int argc, char **argv) { return serveMain(argc, argv); }

} // namespace mtc::rt
