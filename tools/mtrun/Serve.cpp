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
// One rank: a partitioned or pipeline plan, `--nodes`/`--ranks-per-node` above 1 and a
// launcher's job of several ranks are refused before the model loads (`mtrun generate --nodes
// N` runs a partitioned plan).
//
//===----------------------------------------------------------------------===//

#include "tools/mtrun/Serve.h"
#include "tools/mtrun/GenerationModel.h"

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/serve/Completion.h"
#include "runtime/serve/CompletionRequest.h"
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
#include <string>
#include <thread>
#include <type_traits>

namespace mtc::rt {
namespace {

constexpr const char *kUsage =
    "usage: mtrun serve PLAN (--load CKPT | --steps 0) [options]\n\n"
    "Answers text-generation requests over HTTP with the plan's `logits` function on this CPU\n"
    "(one rank, one generation at a time): Megatron's PUT /api, OpenAI's POST /v1/completions,\n"
    "GET /v1/models and GET /health. Stops on SIGINT or SIGTERM (exit status 0).\n\n"
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
    "  --threads-per-rank N       threads of the kernels (default: OMP_NUM_THREADS, else cores)\n"
    "  --nodes N, --ranks-per-node R\n"
    "                             1 only: serving on several ranks is not implemented (mtrun\n"
    "                             generate --nodes N runs a partitioned plan)\n";

int failWith(const Error &err) {
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
// included) and read by the watcher.
std::atomic<int> stopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free, "written in a signal handler");

void onStopSignal(int signal) { stopSignal.store(signal); }

/// While alive: SIGINT and SIGTERM set `stopping` and stop the server; the previous handlers
/// come back when destroyed.
class SignalWatcher {
public:
  SignalWatcher(httplib::Server &server, std::atomic<bool> &stopping)
      : server_(server), stopping_(stopping) {
    stopSignal.store(0);
    struct sigaction action{};
    action.sa_handler = onStopSignal;
    action.sa_flags = SA_RESETHAND; // a second signal takes its default action
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previousInt_);
    ::sigaction(SIGTERM, &action, &previousTerm_);
    thread_ = std::thread([this] { watch(); });
  }
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
    ::sigaction(SIGINT, &previousInt_, nullptr);
    ::sigaction(SIGTERM, &previousTerm_, nullptr);
  }
  SignalWatcher(const SignalWatcher &) = delete;
  SignalWatcher &operator=(const SignalWatcher &) = delete;
  /// The signal that stopped the server, 0 if none did.
  int signal() const { return stopSignal.load(); }

private:
  void watch() {
    while (!done_) {
      if (stopSignal.load() != 0) {
        stopping_ = true;
        // Until listening ends: a stop before the server runs is not remembered.
        server_.stop();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  httplib::Server &server_;
  std::atomic<bool> &stopping_;
  std::atomic<bool> done_{false};
  struct sigaction previousInt_{}, previousTerm_{};
  std::thread thread_;
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

int serveMain(int argc, char **argv) {
  Expected<CommandLine> line = parseCommandLine(
      argc, argv, 1,
      {{"--load", "--steps", "--host", "--port", "--port-file", "--max-request-bytes",
        "--max-concurrency", "--seed", "--model-name", "--threads-per-rank", "--nodes",
        "--ranks-per-node", kTokenizerFlags[0],
        kTokenizerFlags[1], kTokenizerFlags[2], kTokenizerFlags[3], kTokenizerFlags[4]},
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
  Expected<int64_t> port = parseInteger(line->value("--port"), "--port", 5000, 0, 65535);
  Expected<int64_t> maxBytes = parseInteger(line->value("--max-request-bytes"),
                                            "--max-request-bytes", 1 << 20, 1, int64_t(1) << 30);
  Expected<int64_t> maxConcurrency =
      parseInteger(line->value("--max-concurrency"), "--max-concurrency", 8, 1, 1024);
  for (const Error *err : {&port.error(), &maxBytes.error(), &maxConcurrency.error()})
    if (!err->ok())
      return failWith(*err);
  const std::string host = line->value("--host").value_or("127.0.0.1");
  const std::string model = line->value("--model-name").value_or(planName(line->positional[0]));
  std::optional<std::string> portFile = line->value("--port-file");
  if (portFile)
    if (Error err = checkOutputFile(*portFile, "--port-file"); !err.ok())
      return failWith(err);

  // One rank: refused before anything loads, where a job or its plan asks for more.
  Expected<int64_t> nodes = parseInteger(line->value("--nodes"), "--nodes", 1, 1, 65536);
  Expected<int64_t> ranksPerNode =
      parseInteger(line->value("--ranks-per-node"), "--ranks-per-node", 1, 1, 65536);
  for (const Error *err : {&nodes.error(), &ranksPerNode.error()})
    if (!err->ok())
      return failWith(*err);
  Expected<LaunchEnvironment> env = readLaunchEnvironment(processEnvironment());
  if (!env)
    return failWith(env.error());
  const int64_t ranks =
      env->launcher == Launcher::None ? *nodes * *ranksPerNode : int64_t(env->worldSize);
  if (ranks > 1)
    return failWith(makeError(
        "mtrun serve runs on one rank, and ",
        env->launcher == Launcher::None ? std::string("--nodes/--ranks-per-node ask for ")
                                        : concat(launcherName(env->launcher), " started "),
        ranks, " (serving on several ranks is not implemented; mtrun generate --nodes N "
               "generates on the ranks of a partitioned plan)"));
  if (Expected<Plan> plan = loadPlan(line->positional.front()); !plan) {
    return failWith(plan.error());
  } else if (plan->pipeline || plan->meshSize() > 1) {
    return failWith(makeError(
        line->positional.front(), ": ",
        plan->pipeline ? std::string("a pipeline plan runs its layers on several stages")
                       : concat("the plan is partitioned over a mesh of ", plan->meshSize(),
                                " ranks"),
        "; mtrun serve runs on one rank (serve the model compiled without --tp/--sp/--cp/--ep/"
        "--pp: a checkpoint loads under any layout)"));
  }
  Expected<TokenizerOptions> tokenizer = tokenizerOptions(*line);
  if (!tokenizer)
    return failWith(tokenizer.error());
  Expected<std::unique_ptr<GenerationModel>> loaded = GenerationModel::load(
      {line->positional.front(), line->value("--load"), line->value("--steps"),
       line->value("--threads-per-rank"), *tokenizer, line->flags.count("--no-kv-cache") > 0});
  if (!loaded)
    return failWith(loaded.error());
  GenerationModel &generation = **loaded;
  Expected<int64_t> seed =
      parseInteger(line->value("--seed"), "--seed", static_cast<int64_t>(generation.plan().seed), 0,
                   std::numeric_limits<int64_t>::max());
  if (!seed)
    return failWith(seed.error());
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

  httplib::Server server;
  // Bodies with a Content-Length above the bound are refused on it (cpp-httplib drops them
  // unkept), and before they are sent to a client that waits for "100 Continue".
  server.set_payload_max_length(static_cast<size_t>(*maxBytes));
  auto tooLargeError = [&] {
    return RequestError{
        413, concat("the request body is larger than ", *maxBytes, " bytes (--max-request-bytes)"),
        ""};
  };
  server.set_expect_100_continue_handler([&](const httplib::Request &request,
                                             httplib::Response &response) {
    if (request.get_header_value<uint64_t>("Content-Length") <= static_cast<uint64_t>(*maxBytes))
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
  const size_t threads = static_cast<size_t>(*maxConcurrency) + 4;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  ModelThread modelThread(generation.threads());
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> active{0}, completed{0};
  int64_t unseeded = 0; // requests without a seed that reached the model (its thread's)
  const int64_t started = static_cast<int64_t>(std::time(nullptr));

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
    ConcurrencySlot slot(active, *maxConcurrency);
    if (!slot.admitted())
      return refuse(
          {503,
           concat("the server is busy: it takes ", *maxConcurrency, " generation request",
                  *maxConcurrency == 1 ? "" : "s", " at a time (--max-concurrency); retry later"),
           ""});
    // Past the bound the body is read on and dropped, so that the client, still sending,
    // gets the answer rather than a reset connection; past 64 times the bound it is left.
    std::string body;
    size_t received = 0;
    bool tooLarge = false;
    bool read = reader([&](const char *data, size_t size) {
      received += size;
      tooLarge = tooLarge || received > static_cast<size_t>(*maxBytes);
      if (!tooLarge)
        body.append(data, size);
      return received / 64 <= static_cast<size_t>(*maxBytes);
    });
    if (tooLarge || response.status == 413)
      return refuse(tooLargeError());
    if (!read)
      return refuse({400,
                     "the request body could not be read (a broken chunked or compressed "
                     "encoding?)",
                     ""});
    std::variant<CompletionRequest, RequestError> parsed = parseCompletionRequest(api, body);
    if (auto *error = std::get_if<RequestError>(&parsed))
      return refuse(*error);
    const CompletionRequest &completion = std::get<CompletionRequest>(parsed);
    std::variant<std::vector<CompletionResult>, RequestError> results = modelThread.run([&] {
      uint64_t requestSeed =
          completion.seed ? *completion.seed : static_cast<uint64_t>(*seed + unseeded++);
      return complete(completionModel, completion, requestSeed, &stopping);
    });
    if (auto *error = std::get_if<RequestError>(&results))
      return refuse(*error);
    std::string id = concat("cmpl-", started, "-", completed.fetch_add(1));
    reply(200, completionResponse(completion, std::get<0>(results), id,
                                  static_cast<int64_t>(std::time(nullptr)), model));
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
                                    {"max_concurrency", *maxConcurrency}})
                   .serialize());
  });
  server.Get("/v1/models", [&](const httplib::Request &, httplib::Response &r) {
    answerJson(r, 200,
               JsonValue(JsonObject{{"object", "list"},
                                    {"data", JsonArray{JsonObject{{"id", model},
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

  const int bound =
      *port == 0
          ? server.bind_to_any_port(host)
          : (server.bind_to_port(host, static_cast<int>(*port)) ? static_cast<int>(*port) : -1);
  if (bound < 0)
    return failWith(makeError("cannot listen on ", host, ":", *port,
                              " (is the port in use, or the address not this machine's?)"));
  if (portFile) {
    // Written whole under another name first: a reader never sees half a number.
    std::string partial = *portFile + ".partial";
    std::ofstream out(partial, std::ios::trunc);
    out << bound << "\n";
    out.close();
    std::error_code ec;
    if (!out || (std::filesystem::rename(partial, *portFile, ec), ec))
      return failWith(makeError("--port-file: cannot write '", *portFile, "'"));
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  std::fprintf(stderr, "mtrun serve: listening on http://%s%s%s:%d (%s)\n", ipv6 ? "[" : "",
               host.c_str(), ipv6 ? "]" : "", bound, kRoutes);
  std::fprintf(stderr, "mtrun serve: generating with the %s\n",
               generation.usesKVCache() ? "KV cache (prefill, then decode_step per token)"
                                        : "window path (the whole window per token)");
  int signal = 0;
  {
    SignalWatcher watcher(server, stopping);
    server.listen_after_bind();
    signal = watcher.signal();
  }
  if (signal == 0)
    return failWith(makeError("the server stopped listening"));
  std::fprintf(stderr, "mtrun serve: stopped by %s after %lld completed generation requests\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(completed.load()));
  return 0;
}

} // namespace

int runServe(int argc, char **argv) { return serveMain(argc, argv); }

} // namespace mtc::rt
