//===- PipelineSchedule.cpp - The plan's pipeline schedule as data --------===//

#include "runtime/plan/PipelineSchedule.h"

#include "runtime/support/JsonRead.h"

#include <algorithm>
#include <array>
#include <map>
#include <new>

namespace mtc::rt {

namespace {

constexpr std::array<std::string_view, kNumTaskOps> kTaskOpNames = {
    "forward",         "backward",        "backward_input", "backward_weight",
    "send_activation", "recv_activation", "send_gradient",  "recv_gradient",
    "reduce_gradients", "optimizer_step"};

constexpr std::array<std::string_view, 5> kScheduleNames = {"gpipe", "1f1b", "interleaved",
                                                            "zb-h1", "zb-v"};

/// Bounds that keep every index in int32 and the checks' tables small: far past any
/// pipeline that is run (Megatron's largest runs use pp 64 and a few hundred micro-batches).
constexpr int64_t kMaxStages = 1024;
constexpr int64_t kMaxChunks = 1 << 16;
constexpr int64_t kMaxMicroBatches = 1 << 20;
/// The most (chunk, micro-batch) pairs of one schedule, for the per-pair tables.
constexpr int64_t kMaxPairs = int64_t(1) << 24;

// The reader throws jsonread::JsonReadError; parsePipeline catches it. Its messages name a
// value of the wrong type by kind and JSON text ("found integer 2").
using namespace jsonread;

std::vector<int64_t> asIntList(const JsonValue &v, const std::string &path, size_t count,
                               int64_t min, int64_t max, std::string_view countWhat) {
  const JsonArray &a = asArray(v, path, kindAndText);
  if (a.size() != count)
    fail(path, concat("has ", a.size(), " entries, expected ", count, " (", countWhat, ")"));
  std::vector<int64_t> out;
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(asInt(a[i], element(path, i), min, max, kindAndText));
  return out;
}

/// The reader of one "pipeline" object.
class Reader {
public:
  PipelinePlan read(const JsonValue &v);

private:
  PipelineSchedule readSchedule(const JsonValue &v, const std::string &path);
  StageTasks readStage(const JsonValue &v, const std::string &path, int64_t stage, int64_t m);
  ScheduleTask readTask(const JsonValue &v, const std::string &path, int64_t stage, int64_t m);
  /// Completeness and local order of one stage's list.
  void checkStage(const StageTasks &s, const std::string &path, int64_t stage, int64_t m) const;
  /// The compute tasks' start slots: in list order on each stage, within the total work.
  void checkSlots(const PipelineSchedule &s, const std::string &stagesPath) const;
  /// Matching between stages and deadlock freedom.
  void checkExchange(const PipelineSchedule &s, const std::string &path) const;

  /// The stage of the chunk that a send/recv of `t` talks to (-1: none, an end chunk).
  int64_t neighbourStage(const ScheduleTask &t) const;
  /// Whether a send/recv of chunk `c` toward chunk `n` crosses stages.
  bool crosses(int64_t c, int64_t n) const {
    return n >= 0 && n < chunks() && plan_.chunkStages[c] != plan_.chunkStages[n];
  }
  int64_t chunks() const { return plan_.stages * plan_.virtualStages; }

  PipelinePlan plan_;
};

int64_t Reader::neighbourStage(const ScheduleTask &t) const {
  int64_t n = (t.op == TaskOp::SendActivation || t.op == TaskOp::RecvGradient) ? t.chunk + 1
                                                                                : t.chunk - 1;
  return n >= 0 && n < chunks() ? plan_.chunkStages[n] : -1;
}

PipelinePlan Reader::read(const JsonValue &v) {
  const std::string top = "pipeline";
  const JsonObject &o = asObject(v, top, kindAndText);
  plan_.stages = asInt(get(o, top, "stages"), member(top, "stages"), 1, kMaxStages, kindAndText);
  plan_.virtualStages = asInt(get(o, top, "virtual_stages"), member(top, "virtual_stages"), 1,
                              kMaxChunks, kindAndText);
  if (plan_.stages * plan_.virtualStages > kMaxChunks)
    fail(top, concat("stages x virtual_stages = ", plan_.stages * plan_.virtualStages,
                     " chunks, more than the ", kMaxChunks, " this runtime reads"));
  const JsonValue &schedule = get(o, top, "schedule");
  if (!schedule.isString() ||
      std::find(kScheduleNames.begin(), kScheduleNames.end(), *schedule.getString()) ==
          kScheduleNames.end())
    fail(member(top, "schedule"), concat("unknown schedule ", kindAndText(schedule),
                                         " (expected gpipe, 1f1b, interleaved, zb-h1 or zb-v)"));
  plan_.schedule = *schedule.getString();

  const size_t n = static_cast<size_t>(chunks());
  std::string countWhat = concat("stages x virtual_stages = ", plan_.stages, " x ",
                                 plan_.virtualStages);
  plan_.chunkLayers = asIntList(get(o, top, "chunk_layers"), member(top, "chunk_layers"), n, 0,
                                int64_t(1) << 30, countWhat);
  plan_.chunkStages = asIntList(get(o, top, "chunk_stages"), member(top, "chunk_stages"), n, 0,
                                plan_.stages - 1, countWhat);
  std::vector<int64_t> held(static_cast<size_t>(plan_.stages), 0);
  for (int64_t s : plan_.chunkStages)
    ++held[static_cast<size_t>(s)];
  for (size_t s = 0; s < held.size(); ++s)
    if (held[s] != plan_.virtualStages)
      fail(member(top, "chunk_stages"),
           concat("stage ", s, " holds ", held[s], " chunks, expected virtual_stages = ",
                  plan_.virtualStages));

  if (const JsonValue *shared = o.find("shared_params")) {
    std::string sharedPath = member(top, "shared_params");
    for (const auto &[name, chunkList] : asObject(*shared, sharedPath, kindAndText)) {
      std::string path = member(sharedPath, name);
      const JsonArray &list = asArray(chunkList, path, kindAndText);
      std::vector<int64_t> chunkIndices =
          asIntList(chunkList, path, list.size(), 0, chunks() - 1, "the chunks reading it");
      if (chunkIndices.size() < 2 || !std::is_sorted(chunkIndices.begin(), chunkIndices.end()) ||
          std::adjacent_find(chunkIndices.begin(), chunkIndices.end()) != chunkIndices.end())
        fail(path, "must list at least two distinct chunks in ascending order");
      plan_.sharedParams.push_back({name, std::move(chunkIndices)});
    }
  }

  std::string schedulesPath = member(top, "schedules");
  const JsonArray &schedules = asArray(get(o, top, "schedules"), schedulesPath, kindAndText);
  if (schedules.empty())
    fail(schedulesPath, "is empty (a pipeline plan holds a schedule for at least one "
                        "micro-batch count)");
  for (size_t i = 0; i < schedules.size(); ++i) {
    std::string path = element(schedulesPath, i);
    PipelineSchedule s = readSchedule(schedules[i], path);
    for (size_t j = 0; j < plan_.schedules.size(); ++j)
      if (plan_.schedules[j].microBatches == s.microBatches)
        fail(member(path, "micro_batches"),
             concat(s.microBatches, " micro-batches has a schedule already (",
                    element(schedulesPath, j), ")"));
    plan_.schedules.push_back(std::move(s));
  }
  return std::move(plan_);
}

PipelineSchedule Reader::readSchedule(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path, kindAndText);
  PipelineSchedule s;
  s.microBatches = asInt(get(o, path, "micro_batches"), member(path, "micro_batches"), 1,
                         kMaxMicroBatches, kindAndText);
  if (s.microBatches * chunks() > kMaxPairs)
    fail(member(path, "micro_batches"),
         concat(s.microBatches, " micro-batches of ", chunks(), " chunks are more than the ",
                kMaxPairs, " tasks per kind this runtime reads"));
  std::string stagesPath = member(path, "stages");
  const JsonArray &stages = asArray(get(o, path, "stages"), stagesPath, kindAndText);
  if (stages.size() != static_cast<size_t>(plan_.stages))
    fail(stagesPath, concat("has ", stages.size(), " entries, expected one per stage (",
                            plan_.stages, ")"));
  for (size_t i = 0; i < stages.size(); ++i)
    s.stages.push_back(readStage(stages[i], element(stagesPath, i), static_cast<int64_t>(i),
                                 s.microBatches));
  checkSlots(s, stagesPath);
  checkExchange(s, path);
  return s;
}

StageTasks Reader::readStage(const JsonValue &v, const std::string &path, int64_t stage,
                             int64_t m) {
  const JsonObject &o = asObject(v, path, kindAndText);
  StageTasks s;
  const JsonValue &bubble = get(o, path, "bubble_fraction");
  std::optional<double> b = bubble.getNumber();
  if (!b || !(*b >= 0 && *b <= 1))
    fail(member(path, "bubble_fraction"),
         concat("expected a number from 0 to 1, found ", kindAndText(bubble)));
  s.bubbleFraction = *b;
  s.inFlight =
      asInt(get(o, path, "in_flight"), member(path, "in_flight"), 0, kMaxPairs, kindAndText);
  if (const JsonValue *bytes = o.find("activation_bytes"))
    s.activationBytes = asInt(*bytes, member(path, "activation_bytes"), 0, INT64_MAX, kindAndText);
  if (const JsonValue *bytes = o.find("peak_bytes"))
    s.peakBytes = asInt(*bytes, member(path, "peak_bytes"), 0, INT64_MAX, kindAndText);
  std::string tasksPath = member(path, "tasks");
  const JsonArray &tasks = asArray(get(o, path, "tasks"), tasksPath, kindAndText);
  s.tasks.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i)
    s.tasks.push_back(readTask(tasks[i], element(tasksPath, i), stage, m));
  checkStage(s, path, stage, m);
  return s;
}

ScheduleTask Reader::readTask(const JsonValue &v, const std::string &path, int64_t stage,
                              int64_t m) {
  const JsonObject &o = asObject(v, path, kindAndText);
  const JsonValue &opValue = get(o, path, "op");
  std::optional<TaskOp> op = opValue.isString() ? parseTaskOp(*opValue.getString()) : std::nullopt;
  if (!op) {
    std::string known;
    for (std::string_view name : kTaskOpNames)
      known.append(known.empty() ? "" : ", ").append(name);
    fail(member(path, "op"),
         concat("unknown op ", kindAndText(opValue), " (expected ", known, ")"));
  }
  ScheduleTask t{*op};
  bool perStep = t.op == TaskOp::ReduceGradients || t.op == TaskOp::OptimizerStep;
  if (!perStep) {
    t.chunk = static_cast<int32_t>(
        asInt(get(o, path, "chunk"), member(path, "chunk"), 0, chunks() - 1, kindAndText));
    t.microBatch = static_cast<int32_t>(
        asInt(get(o, path, "micro_batch"), member(path, "micro_batch"), 0, m - 1, kindAndText));
    if (plan_.chunkStages[static_cast<size_t>(t.chunk)] != stage)
      fail(member(path, "chunk"),
           concat(describeTask(t), ": chunk ", t.chunk, " runs on stage ",
                  plan_.chunkStages[static_cast<size_t>(t.chunk)], ", not on stage ", stage));
  }
  if (isComputeTask(t.op))
    t.start = asInt(get(o, path, "start"), member(path, "start"), 0, int64_t(1) << 40, kindAndText);
  if (isSendTask(t.op) || isRecvTask(t.op)) {
    t.peer = static_cast<int32_t>(
        asInt(get(o, path, "peer"), member(path, "peer"), 0, plan_.stages - 1, kindAndText));
    int64_t expected = neighbourStage(t);
    if (expected < 0)
      fail(path, concat(describeTask(t), ": chunk ", t.chunk, " has no neighbour in that "
                        "direction (chunks 0 to ", chunks() - 1, ")"));
    if (expected == stage)
      fail(path, concat(describeTask(t), ": the neighbouring chunk is on this stage too (a "
                        "local hand-over has no send/recv)"));
    if (t.peer != expected)
      fail(member(path, "peer"), concat(describeTask(t), ": peer ", t.peer,
                                        ", but the neighbouring chunk runs on stage ", expected));
  }
  return t;
}

void Reader::checkStage(const StageTasks &s, const std::string &path, int64_t stage,
                        int64_t m) const {
  std::string tasksPath = member(path, "tasks");
  // A forward and a backward per chunk of this stage and micro-batch at least: also what
  // keeps the table below as small as the list.
  const int64_t pairs = plan_.virtualStages * m;
  if (static_cast<int64_t>(s.tasks.size()) < 2 * pairs)
    fail(tasksPath, concat("stage ", stage, " has ", s.tasks.size(), " tasks, too few for a "
                           "forward and a backward of each of its ", plan_.virtualStages,
                           " chunks x ", m, " micro-batches"));
  // Position of each (op, chunk of this stage, micro-batch) in the list; -1 when absent.
  std::vector<int64_t> local(static_cast<size_t>(chunks()), -1);
  for (int64_t c = 0, k = 0; c < chunks(); ++c)
    if (plan_.chunkStages[static_cast<size_t>(c)] == stage)
      local[static_cast<size_t>(c)] = k++;
  std::vector<int64_t> at(kNumTaskOps * static_cast<size_t>(pairs), -1);
  auto pos = [&](TaskOp op, int64_t c, int64_t i) -> int64_t & {
    return at[static_cast<size_t>(op) * static_cast<size_t>(pairs) +
              static_cast<size_t>(local[static_cast<size_t>(c)] * m + i)];
  };
  int64_t reduceAt = -1, optimizerAt = -1;
  for (size_t k = 0; k < s.tasks.size(); ++k) {
    const ScheduleTask &t = s.tasks[k];
    std::string here = element(tasksPath, k);
    if (t.op == TaskOp::ReduceGradients || t.op == TaskOp::OptimizerStep) {
      int64_t &slot = t.op == TaskOp::ReduceGradients ? reduceAt : optimizerAt;
      if (slot >= 0)
        fail(here, concat(taskOpName(t.op), " appears twice (also tasks[", slot, "])"));
      slot = static_cast<int64_t>(k);
      continue;
    }
    int64_t &slot = pos(t.op, t.chunk, t.microBatch);
    if (slot >= 0)
      fail(here, concat(describeTask(t), " appears twice (also tasks[", slot, "])"));
    slot = static_cast<int64_t>(k);
  }
  const int64_t last = chunks() - 1;
  int64_t lastBackward = -1;
  auto missing = [&](std::string_view what, int64_t c, int64_t i) {
    fail(tasksPath, concat("stage ", stage, " has no ", what, " chunk ", c, " micro-batch ", i));
  };
  auto before = [&](int64_t first, int64_t second, const ScheduleTask &consumer,
                    std::string_view producer) {
    if (first >= second)
      fail(element(tasksPath, static_cast<size_t>(second)),
           concat(describeTask(consumer), " runs before ", producer, " (tasks[", first, "])"));
  };
  for (int64_t c = 0; c <= last; ++c) {
    if (plan_.chunkStages[static_cast<size_t>(c)] != stage)
      continue;
    for (int64_t i = 0; i < m; ++i) {
      int64_t f = pos(TaskOp::Forward, c, i), bw = pos(TaskOp::Backward, c, i),
              b = pos(TaskOp::BackwardInput, c, i), w = pos(TaskOp::BackwardWeight, c, i);
      if (f < 0)
        missing("forward", c, i);
      if (bw >= 0 && (b >= 0 || w >= 0))
        fail(tasksPath, concat("stage ", stage, " has both backward and backward_input/"
                               "backward_weight for chunk ", c, " micro-batch ", i));
      if (bw < 0 && b < 0)
        missing("backward (or backward_input)", c, i);
      if (bw < 0 && w < 0)
        missing("backward_weight", c, i);
      int64_t grad = bw >= 0 ? bw : b; // the input gradient's task
      const ScheduleTask &gradTask = s.tasks[static_cast<size_t>(grad)];
      before(f, grad, gradTask, "its forward");
      if (w >= 0)
        before(b, w, s.tasks[static_cast<size_t>(w)], "its backward_input");
      lastBackward = std::max({lastBackward, bw, w});
      // The forward's input: a receive, or the local chunk before it.
      if (c > 0) {
        if (crosses(c, c - 1)) {
          int64_t r = pos(TaskOp::RecvActivation, c, i);
          if (r < 0)
            missing("recv_activation", c, i);
          before(r, f, s.tasks[static_cast<size_t>(f)], "recv_activation");
        } else {
          before(pos(TaskOp::Forward, c - 1, i), f, s.tasks[static_cast<size_t>(f)],
                 concat("forward chunk ", c - 1));
        }
      }
      // The forward's output goes to the next chunk's stage.
      if (crosses(c, c + 1)) {
        int64_t snd = pos(TaskOp::SendActivation, c, i);
        if (snd < 0)
          missing("send_activation", c, i);
        before(f, snd, s.tasks[static_cast<size_t>(snd)], "its forward");
      }
      // The backward's output gradient: a receive, or the local chunk after it.
      if (c < last) {
        if (crosses(c, c + 1)) {
          int64_t r = pos(TaskOp::RecvGradient, c, i);
          if (r < 0)
            missing("recv_gradient", c, i);
          before(r, grad, gradTask, "recv_gradient");
        } else {
          int64_t next = pos(TaskOp::Backward, c + 1, i);
          if (next < 0)
            next = pos(TaskOp::BackwardInput, c + 1, i);
          before(next, grad, gradTask, concat("the backward of chunk ", c + 1));
        }
      }
      if (crosses(c, c - 1)) {
        int64_t snd = pos(TaskOp::SendGradient, c, i);
        if (snd < 0)
          missing("send_gradient", c, i);
        before(grad, snd, s.tasks[static_cast<size_t>(snd)], "its backward");
      }
    }
  }
  if (reduceAt < 0)
    fail(tasksPath, concat("stage ", stage, " has no reduce_gradients"));
  if (optimizerAt < 0)
    fail(tasksPath, concat("stage ", stage, " has no optimizer_step"));
  if (reduceAt < lastBackward)
    fail(element(tasksPath, static_cast<size_t>(reduceAt)),
         concat("reduce_gradients runs before the last backward (tasks[", lastBackward, "])"));
  if (optimizerAt != static_cast<int64_t>(s.tasks.size()) - 1)
    fail(element(tasksPath, static_cast<size_t>(optimizerAt)),
         "optimizer_step is not the last task");
  int64_t peak = peakInFlight(s.tasks);
  if (peak > s.inFlight)
    fail(member(path, "in_flight"),
         concat("is ", s.inFlight, ", but the tasks hold up to ", peak,
                " activations at once (forward done, backward not)"));
}

void Reader::checkSlots(const PipelineSchedule &s, const std::string &stagesPath) const {
  // A simulation that never idles every stage at once ends by the total work of all stages.
  int64_t total = 0;
  for (const StageTasks &stage : s.stages)
    for (const ScheduleTask &t : stage.tasks)
      if (isComputeTask(t.op))
        total += unitSlots(t.op);
  for (size_t st = 0; st < s.stages.size(); ++st) {
    int64_t free = 0;
    const std::vector<ScheduleTask> &tasks = s.stages[st].tasks;
    for (size_t k = 0; k < tasks.size(); ++k) {
      const ScheduleTask &t = tasks[k];
      if (!isComputeTask(t.op))
        continue;
      std::string here = member(element(member(element(stagesPath, st), "tasks"), k), "start");
      if (t.start < free)
        fail(here, concat(describeTask(t), " starts at slot ", t.start,
                          ", before the stage's previous compute task ends (slot ", free, ")"));
      free = t.start + unitSlots(t.op);
      if (free > total)
        fail(here, concat(describeTask(t), " ends at slot ", free, ", past the ", total,
                          " slots of the schedule's whole work"));
    }
  }
}

void Reader::checkExchange(const PipelineSchedule &s, const std::string &path) const {
  // The messages from stage a to stage b (keyed (a, b)), in the order a sends them and b
  // receives them, with where b receives each.
  using Channel = std::pair<size_t, size_t>;
  std::map<Channel, std::vector<const ScheduleTask *>> sent, received;
  std::map<Channel, std::vector<size_t>> receivedAt;
  const size_t p = s.stages.size();
  for (size_t st = 0; st < p; ++st)
    for (size_t k = 0; k < s.stages[st].tasks.size(); ++k) {
      const ScheduleTask &t = s.stages[st].tasks[k];
      if (isSendTask(t.op)) {
        sent[{st, static_cast<size_t>(t.peer)}].push_back(&t);
      } else if (isRecvTask(t.op)) {
        received[{static_cast<size_t>(t.peer), st}].push_back(&t);
        receivedAt[{static_cast<size_t>(t.peer), st}].push_back(k);
      }
    }
  for (const auto &[channel, out] : sent) {
    // As many as sent: checkStage found one send and one receive per crossing.
    const auto &in = received[channel];
    const auto [a, b] = channel;
    for (size_t k = 0; k < out.size() && k < in.size(); ++k) {
      // send_activation chunk c matches recv_activation chunk c + 1; send_gradient chunk c
      // matches recv_gradient chunk c - 1.
      bool activation = out[k]->op == TaskOp::SendActivation;
      TaskOp want = activation ? TaskOp::RecvActivation : TaskOp::RecvGradient;
      int32_t chunk = out[k]->chunk + (activation ? 1 : -1);
      if (in[k]->op != want || in[k]->chunk != chunk || in[k]->microBatch != out[k]->microBatch)
        fail(element(member(element(member(path, "stages"), b), "tasks"), receivedAt[channel][k]),
             concat("stage ", b, "'s receive number ", k + 1, " from stage ", a, " is ",
                    describeTask(*in[k]), ", but the message stage ", a, " sends there is ",
                    describeTask(*out[k]), " (receives must be in the order of the sends)"));
    }
  }
  // Every stage runs its list; a send never blocks, a receive waits for its message.
  std::vector<size_t> next(p, 0);
  std::map<Channel, size_t> delivered, consumed;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t st = 0; st < p; ++st) {
      const std::vector<ScheduleTask> &tasks = s.stages[st].tasks;
      while (next[st] < tasks.size()) {
        const ScheduleTask &t = tasks[next[st]];
        if (isRecvTask(t.op)) {
          Channel channel{static_cast<size_t>(t.peer), st};
          if (consumed[channel] == delivered[channel])
            break;
          ++consumed[channel];
        } else if (isSendTask(t.op)) {
          ++delivered[{st, static_cast<size_t>(t.peer)}];
        }
        ++next[st];
        progress = true;
      }
    }
  }
  for (size_t st = 0; st < p; ++st)
    if (next[st] < s.stages[st].tasks.size())
      fail(path, concat("the schedule deadlocks: stage ", st, " waits forever at tasks[",
                        next[st], "] (", describeTask(s.stages[st].tasks[next[st]]),
                        " from stage ", s.stages[st].tasks[next[st]].peer, ")"));
}

} // namespace

std::string_view taskOpName(TaskOp op) { return kTaskOpNames[static_cast<size_t>(op)]; }

std::string describeTask(const ScheduleTask &t) {
  if (t.op == TaskOp::ReduceGradients || t.op == TaskOp::OptimizerStep)
    return std::string(taskOpName(t.op));
  return concat(taskOpName(t.op), " chunk ", t.chunk, " micro-batch ", t.microBatch);
}

std::optional<TaskOp> parseTaskOp(std::string_view name) {
  for (size_t i = 0; i < kTaskOpNames.size(); ++i)
    if (kTaskOpNames[i] == name)
      return static_cast<TaskOp>(i);
  return std::nullopt;
}

bool isComputeTask(TaskOp op) {
  return op == TaskOp::Forward || op == TaskOp::Backward || op == TaskOp::BackwardInput ||
         op == TaskOp::BackwardWeight;
}
int64_t unitSlots(TaskOp op) { return op == TaskOp::Backward ? 2 : 1; }

bool isSendTask(TaskOp op) { return op == TaskOp::SendActivation || op == TaskOp::SendGradient; }
bool isRecvTask(TaskOp op) { return op == TaskOp::RecvActivation || op == TaskOp::RecvGradient; }

size_t receiveWindowEnd(const std::vector<ScheduleTask> &tasks, size_t current) {
  size_t end = current;
  for (size_t computes = 0; end < tasks.size(); ++end)
    if (isComputeTask(tasks[end].op) && ++computes > kReceiveLookahead)
      break;
  return end;
}

namespace {

/// The compute tasks of one list that read a message, by (forward or backward, chunk,
/// micro-batch): a flat table over the list's own chunks and micro-batches, built from the
/// list alone (the layout search walks many large lists of many stages).
class MessageReaders {
public:
  explicit MessageReaders(const std::vector<ScheduleTask> &tasks) {
    auto reads = [](const ScheduleTask &t) {
      return t.op == TaskOp::Forward || t.op == TaskOp::Backward ||
             t.op == TaskOp::BackwardInput;
    };
    for (const ScheduleTask &t : tasks)
      if (reads(t) && t.chunk >= 0 && t.microBatch >= 0) {
        if (size_t(t.chunk) >= slotOfChunk_.size())
          slotOfChunk_.resize(size_t(t.chunk) + 1, -1);
        if (slotOfChunk_[size_t(t.chunk)] < 0)
          slotOfChunk_[size_t(t.chunk)] = chunks_++;
        microBatches_ = std::max<int64_t>(microBatches_, t.microBatch + 1);
      }
    at_.assign(static_cast<size_t>(2 * chunks_ * microBatches_), tasks.size());
    for (size_t k = 0; k < tasks.size(); ++k)
      if (reads(tasks[k]))
        if (size_t *slot = find(tasks[k].op != TaskOp::Forward, tasks[k].chunk,
                                tasks[k].microBatch))
          *slot = k;
  }
  /// The task that reads the message `send` (of another list), or the list's size: a
  /// forward of the next chunk for an activation, a backward (or backward_input) of the
  /// previous chunk for a gradient.
  size_t readerOf(const ScheduleTask &send, size_t none) {
    bool gradient = send.op == TaskOp::SendGradient;
    size_t *slot = find(gradient, gradient ? send.chunk - 1 : send.chunk + 1, send.microBatch);
    return slot ? *slot : none;
  }

private:
  size_t *find(bool backward, int64_t c, int64_t i) {
    if (c < 0 || size_t(c) >= slotOfChunk_.size() || slotOfChunk_[size_t(c)] < 0 || i < 0 ||
        i >= microBatches_)
      return nullptr;
    int64_t slot = slotOfChunk_[size_t(c)];
    return &at_[static_cast<size_t>(((backward ? 1 : 0) * chunks_ + slot) * microBatches_ + i)];
  }
  std::vector<int64_t> slotOfChunk_; // by chunk: its row of the table, or -1
  int64_t chunks_ = 0, microBatches_ = 0;
  std::vector<size_t> at_;
};

} // namespace

std::vector<size_t> sendReleases(const std::vector<StageTasks> &stages, int64_t stage) {
  const std::vector<ScheduleTask> &tasks = stages[size_t(stage)].tasks;
  std::vector<size_t> release(tasks.size(), tasks.size());
  MessageReaders mine(tasks);
  // Per peer: its readers, and for each of its tasks the next send back to this stage.
  struct Peer {
    MessageReaders readers;
    std::vector<size_t> nextSendBack;
  };
  std::vector<std::optional<Peer>> peers(stages.size());
  for (size_t k = 0; k < tasks.size(); ++k) {
    const ScheduleTask &send = tasks[k];
    if (!isSendTask(send.op) || send.peer < 0 || size_t(send.peer) >= stages.size())
      continue;
    const std::vector<ScheduleTask> &theirs = stages[size_t(send.peer)].tasks;
    std::optional<Peer> &peer = peers[size_t(send.peer)];
    if (!peer) {
      peer.emplace(Peer{MessageReaders(theirs),
                        std::vector<size_t>(theirs.size() + 1, theirs.size())});
      for (size_t j = theirs.size(); j-- > 0;)
        peer->nextSendBack[j] = isSendTask(theirs[j].op) && theirs[j].peer == stage
                                    ? j
                                    : peer->nextSendBack[j + 1];
    }
    size_t read = peer->readers.readerOf(send, theirs.size());
    if (read >= theirs.size())
      continue;
    size_t back = peer->nextSendBack[read + 1];
    if (back >= theirs.size())
      continue;
    size_t at = mine.readerOf(theirs[back], tasks.size());
    if (at > k && at < tasks.size())
      release[k] = at;
  }
  return release;
}

int64_t peakInFlight(const std::vector<ScheduleTask> &tasks) {
  int64_t held = 0, peak = 0;
  for (const ScheduleTask &t : tasks) {
    if (t.op == TaskOp::Forward)
      peak = std::max(peak, ++held);
    else if (t.op == TaskOp::Backward || t.op == TaskOp::BackwardInput)
      --held;
  }
  return peak;
}

std::vector<int64_t> PipelinePlan::stagesOf(const SharedParam &shared) const {
  std::vector<int64_t> stages;
  for (int64_t chunk : shared.chunks)
    stages.push_back(chunkStages[size_t(chunk)]);
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

Expected<const PipelineSchedule *> PipelinePlan::forMicroBatches(int64_t m) const {
  std::string have;
  for (const PipelineSchedule &s : schedules) {
    if (s.microBatches == m)
      return &s;
    have.append(have.empty() ? "" : ", ").append(concat(s.microBatches));
  }
  return makeError("the plan's pipeline has no schedule for ", m,
                   " micro-batches per step (it has schedules for ", have.empty() ? "none" : have,
                   "; choose a global batch that gives one of them)");
}

Expected<PipelinePlan> parsePipeline(const JsonValue &pipeline) {
  try {
    return Reader().read(pipeline);
  } catch (const JsonReadError &e) {
    return Error::failure(e.message);
  } catch (const std::bad_alloc &) {
    return makeError("pipeline: out of memory");
  }
}

} // namespace mtc::rt
