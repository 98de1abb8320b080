//===- ConfigLowering.cpp - train {} and parallel {} blocks ---------------===//

#include "frontend/ConfigLowering.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mtc;
using namespace mtc::frontend;

namespace {

enum class ValueKind {
  PositiveInt,    // 4
  NonNegativeInt, // 1234
  NonNegative,    // 1.0
  Switch,         // on | off
  Word,           // one of `choices` (or of `aliases`)
  IntList,        // [3, 1]: positive integers
  Call,           // one of `choices`, optionally with keyword arguments
};

/// The value a keyword argument of a call-like setting takes.
enum class ArgKind {
  Positive,       // lr = 3e-4
  NonNegative,    // weight_decay = 0.1
  Fraction,       // momentum = 0.9: in [0, 1)
  NonNegativeInt, // warmup = 100
  PositiveInt,    // decay_steps = 1000
  Betas,          // betas = (0.9, 0.95): two fractions
};

struct ArgSchema {
  llvm::StringLiteral name;
  ArgKind kind;
};

struct SettingSchema {
  llvm::StringLiteral key;
  ValueKind kind;
  std::vector<llvm::StringLiteral> choices = {};
  /// For Call: the keyword arguments of each choice, in the order of `choices`.
  std::vector<std::vector<ArgSchema>> arguments = {};
  /// For Word: other spellings and the choice each stands for.
  std::vector<std::pair<llvm::StringLiteral, llvm::StringLiteral>> aliases = {};
};

/// Settings spelled two ways (Megatron's short name first): the alias and its key.
constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kSettingAliases[] = {
    {"vpp", "virtual_stages"}};

const std::vector<SettingSchema> &trainSchema() {
  static const std::vector<SettingSchema> schema = {
      {"optimizer",
       ValueKind::Call,
       {"adamw", "sgd"},
       {{{"lr", ArgKind::Positive},
         {"betas", ArgKind::Betas},
         {"eps", ArgKind::Positive},
         {"weight_decay", ArgKind::NonNegative}},
        {{"lr", ArgKind::Positive},
         {"momentum", ArgKind::Fraction},
         {"weight_decay", ArgKind::NonNegative}}}},
      {"lr",
       ValueKind::Call,
       {"constant", "cosine", "linear"},
       {{{"warmup", ArgKind::NonNegativeInt}},
        {{"warmup", ArgKind::NonNegativeInt},
         {"min", ArgKind::NonNegative},
         {"decay_steps", ArgKind::PositiveInt}},
        {{"warmup", ArgKind::NonNegativeInt},
         {"min", ArgKind::NonNegative},
         {"decay_steps", ArgKind::PositiveInt}}}},
      {"global_batch", ValueKind::PositiveInt},
      {"micro_batch", ValueKind::PositiveInt},
      {"clip_grad", ValueKind::NonNegative},
      {"precision", ValueKind::Word, {"fp32", "bf16", "fp16"}},
      {"seed", ValueKind::NonNegativeInt},
      {"steps", ValueKind::PositiveInt},
      {"dropout", ValueKind::Switch},
      {"eod_mask_loss", ValueKind::Switch},
  };
  return schema;
}

const std::vector<SettingSchema> &parallelSchema() {
  static const std::vector<SettingSchema> schema = {
      {"tp", ValueKind::PositiveInt},
      {"pp", ValueKind::PositiveInt},
      {"dp", ValueKind::PositiveInt},
      {"cp", ValueKind::PositiveInt},
      {"ep", ValueKind::PositiveInt},
      {"etp", ValueKind::PositiveInt},
      {"sp", ValueKind::Switch},
      // `zero-bubble` (the name older files use) is Qi et al.'s ZB-H1, the zero-bubble
      // schedule at 1F1B's memory.
      {"schedule",
       ValueKind::Word,
       {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"},
       {},
       {{"zero-bubble", "zb-h1"}}},
      {"virtual_stages", ValueKind::PositiveInt},
      {"pipeline_layers", ValueKind::IntList},
      {"micro_batches", ValueKind::PositiveInt},
      {"recompute", ValueKind::Word, {"none", "selective", "full"}},
      {"distributed_optimizer", ValueKind::Switch},
      {"cp_comm_type", ValueKind::Word, {"all_gather", "p2p"}},
  };
  return schema;
}

std::string joinChoices(llvm::ArrayRef<llvm::StringLiteral> choices) {
  std::string text;
  for (auto [i, choice] : llvm::enumerate(choices)) {
    if (i)
      text += i + 1 == choices.size() ? " or " : ", ";
    text += "'" + choice.str() + "'";
  }
  return text;
}

/// Turns setting values into attributes: numbers, words and calls with keyword arguments.
class SettingLowering {
public:
  SettingLowering(MLIRContext &context, Diagnostics &diags) : b(&context), diags(diags) {}

  /// A number written as a literal, possibly negated (`-1`), or nothing.
  static std::optional<double> number(const Expr &expr, bool &isInteger) {
    if (expr.kind == Expr::Kind::Number) {
      isInteger = expr.isInteger;
      return expr.number;
    }
    if (expr.kind == Expr::Kind::Unary && expr.op == "-" && expr.lhs &&
        expr.lhs->kind == Expr::Kind::Number) {
      isInteger = expr.lhs->isInteger;
      return -expr.lhs->number;
    }
    return std::nullopt;
  }

  /// Checks a keyword argument's value against its kind and turns it into an attribute.
  Attribute argument(const KeywordArg &kw, const ArgSchema &schema, llvm::StringRef callee) {
    const Expr &value = *kw.value;
    auto fail = [&](const llvm::Twine &what) -> Attribute {
      diags.error(value.range, "'" + kw.name + "' of " + callee + " must be " + what);
      return {};
    };
    auto fraction = [](double x) { return x >= 0 && x < 1; };
    bool isInteger = false;
    if (schema.kind == ArgKind::Betas) {
      SmallVector<double, 2> betas;
      if (value.kind == Expr::Kind::Tuple && value.args.size() == 2)
        for (const ExprPtr &element : value.args)
          if (std::optional<double> beta = number(*element, isInteger); beta && fraction(*beta))
            betas.push_back(*beta);
      if (betas.size() != 2)
        return fail("two numbers in [0, 1), as in (0.9, 0.95)");
      return b.getArrayAttr({b.getF64FloatAttr(betas[0]), b.getF64FloatAttr(betas[1])});
    }
    std::optional<double> x = number(value, isInteger);
    switch (schema.kind) {
    case ArgKind::Positive:
      if (!x || !(*x > 0))
        return fail("a positive number");
      return b.getF64FloatAttr(*x);
    case ArgKind::NonNegative:
      if (!x || !(*x >= 0))
        return fail("a non-negative number");
      return b.getF64FloatAttr(*x);
    case ArgKind::Fraction:
      if (!x || !fraction(*x))
        return fail("a number in [0, 1)");
      return b.getF64FloatAttr(*x);
    case ArgKind::NonNegativeInt:
    case ArgKind::PositiveInt: {
      bool positive = schema.kind == ArgKind::PositiveInt;
      if (!x || !isInteger || *x < (positive ? 1 : 0) || *x > 9.0e18)
        return fail(positive ? "a positive integer" : "a non-negative integer");
      return b.getI64IntegerAttr(static_cast<int64_t>(*x));
    }
    case ArgKind::Betas:
      break;
    }
    return {};
  }

  /// `adamw(lr = 3e-4)` -> {kind = "adamw", lr = 3.0e-4}; `constant` -> {kind = "constant"}.
  Attribute call(const Expr &expr, const SettingSchema &schema) {
    SmallVector<NamedAttribute> fields;
    fields.push_back(b.getNamedAttr("kind", b.getStringAttr(expr.name)));
    auto choice = llvm::find(schema.choices, expr.name);
    if (choice == schema.choices.end()) {
      diags.error(expr.nameRange, "unknown " + schema.key.str() + " '" + expr.name +
                                      "'; expected " + joinChoices(schema.choices));
      return {};
    }
    const std::vector<ArgSchema> &arguments = schema.arguments[choice - schema.choices.begin()];
    if (!expr.args.empty()) {
      diags.error(expr.args.front()->range,
                  "settings take keyword arguments only, e.g. " + expr.name + "(lr = 3e-4)");
      return {};
    }
    llvm::StringSet<> seen;
    for (const KeywordArg &kw : expr.kwargs) {
      auto arg = llvm::find_if(arguments, [&](const ArgSchema &a) { return a.name == kw.name; });
      if (arg == arguments.end()) {
        std::vector<llvm::StringLiteral> names;
        for (const ArgSchema &a : arguments)
          names.push_back(a.name);
        diags.error(kw.nameRange, "unknown argument '" + kw.name + "' for " + expr.name +
                                      "; expected " + joinChoices(names));
        return {};
      }
      if (!seen.insert(kw.name).second) {
        diags.error(kw.nameRange, "argument '" + kw.name + "' given twice");
        return {};
      }
      Attribute value = argument(kw, *arg, expr.name);
      if (!value)
        return {};
      fields.push_back(b.getNamedAttr(kw.name, value));
    }
    return b.getDictionaryAttr(fields);
  }

  Attribute setting(const ConfigEntry &entry, const SettingSchema &schema) {
    const Expr &value = *entry.value;
    auto fail = [&](const llvm::Twine &what) -> Attribute {
      diags.error(value.range, "'" + entry.key + "' expects " + what);
      return {};
    };
    switch (schema.kind) {
    case ValueKind::PositiveInt:
    case ValueKind::NonNegativeInt: {
      bool positive = schema.kind == ValueKind::PositiveInt;
      if (value.kind != Expr::Kind::Number || !value.isInteger ||
          value.number < (positive ? 1 : 0) || value.number > 9.0e18)
        return fail(positive ? "a positive integer" : "a non-negative integer");
      return b.getI64IntegerAttr(static_cast<int64_t>(value.number));
    }
    case ValueKind::NonNegative:
      if (value.kind != Expr::Kind::Number || value.number < 0)
        return fail("a non-negative number");
      return b.getF64FloatAttr(value.number);
    case ValueKind::Switch:
      if (value.kind != Expr::Kind::Name || (value.name != "on" && value.name != "off"))
        return fail("'on' or 'off'");
      return b.getBoolAttr(value.name == "on");
    case ValueKind::Word: {
      if (value.kind != Expr::Kind::Name)
        return fail(joinChoices(schema.choices));
      if (llvm::is_contained(schema.choices, value.name))
        return b.getStringAttr(value.name);
      for (const auto &[alias, choice] : schema.aliases)
        if (value.name == alias)
          return b.getStringAttr(choice);
      return fail(joinChoices(schema.choices));
    }
    case ValueKind::IntList: {
      SmallVector<int64_t> values;
      if (value.kind == Expr::Kind::Tuple)
        for (const ExprPtr &element : value.args) {
          if (element->kind != Expr::Kind::Number || !element->isInteger || element->number < 1 ||
              element->number > 9.0e18) {
            diags.error(element->range, "'" + entry.key + "' entries must be positive integers");
            return {};
          }
          values.push_back(static_cast<int64_t>(element->number));
        }
      if (value.kind != Expr::Kind::Tuple || values.empty())
        return fail("a list of positive integers, as in [3, 1]");
      return b.getDenseI64ArrayAttr(values);
    }
    case ValueKind::Call:
      if (value.kind == Expr::Kind::Name || value.kind == Expr::Kind::Call)
        return call(value, schema);
      return fail(joinChoices(schema.choices));
    }
    return {};
  }

  /// Lowers every entry of `block` that has a schema; layout entries are left to the caller.
  SmallVector<NamedAttribute> entries(const ConfigBlock &block,
                                      const std::vector<SettingSchema> &schema,
                                      llvm::StringMap<const ConfigEntry *> &byKey) {
    SmallVector<NamedAttribute> attrs;
    for (const ConfigEntry &entry : block.entries) {
      llvm::StringRef key = entry.key;
      for (const auto &[alias, canonical] : kSettingAliases)
        if (key == alias)
          key = canonical;
      if (auto [it, inserted] = byKey.try_emplace(key, &entry); !inserted) {
        std::string alias;
        if (it->second->key != entry.key)
          alias = " ('" + it->second->key + "' and '" + entry.key + "' are one setting)";
        diags.error(entry.keyRange,
                    "duplicate setting '" + entry.key + "' in " + block.kind + " {}" + alias);
        diags.note(it->second->keyRange, "first set here");
        continue;
      }
      if (block.kind == "parallel" && entry.key == "layout")
        continue;
      auto found = llvm::find_if(schema, [&](const SettingSchema &s) { return s.key == key; });
      if (found == schema.end() || !entry.value) {
        std::vector<llvm::StringLiteral> keys;
        for (const SettingSchema &s : schema)
          keys.push_back(s.key);
        if (block.kind == "parallel")
          keys.push_back("layout");
        diags.error(entry.keyRange, "unknown " + block.kind + " setting '" + entry.key +
                                        "'; expected " + joinChoices(keys));
        continue;
      }
      if (Attribute attr = setting(entry, *found))
        attrs.push_back(b.getNamedAttr(key, attr));
    }
    return attrs;
  }

  Builder b;
  Diagnostics &diags;
};

/// The validated settings of one block, by key.
class Settings {
public:
  explicit Settings(llvm::ArrayRef<NamedAttribute> attrs) : dict(attrs) {}

  std::optional<int64_t> integer(llvm::StringRef key) const {
    if (auto value = dyn_cast_or_null<IntegerAttr>(get(key)))
      return value.getInt();
    return std::nullopt;
  }
  FloatAttr real(llvm::StringRef key) const { return dyn_cast_or_null<FloatAttr>(get(key)); }
  std::optional<bool> flag(llvm::StringRef key) const {
    if (auto value = dyn_cast_or_null<BoolAttr>(get(key)))
      return value.getValue();
    return std::nullopt;
  }
  /// A word setting as its enum (the schema admits only the enum's words).
  template <typename Enum>
  std::optional<Enum> word(llvm::StringRef key,
                           std::optional<Enum> (*symbolize)(llvm::StringRef)) const {
    if (auto value = dyn_cast_or_null<StringAttr>(get(key)))
      return symbolize(value.getValue());
    return std::nullopt;
  }
  Attribute get(llvm::StringRef key) const {
    for (const NamedAttribute &attr : dict)
      if (attr.getName() == key)
        return attr.getValue();
    return {};
  }

private:
  llvm::ArrayRef<NamedAttribute> dict;
};

/// `adamw(lr = 3e-4)` as lowered by SettingLowering::call, typed.
mt::OptimizerAttr optimizerAttr(DictionaryAttr call) {
  if (!call)
    return {};
  Settings args(call.getValue());
  DenseF64ArrayAttr betas;
  if (auto pair = call.getAs<ArrayAttr>("betas"))
    betas =
        DenseF64ArrayAttr::get(call.getContext(), {cast<FloatAttr>(pair[0]).getValueAsDouble(),
                                                   cast<FloatAttr>(pair[1]).getValueAsDouble()});
  return mt::OptimizerAttr::get(
      call.getContext(), *mt::symbolizeOptimizerKind(call.getAs<StringAttr>("kind").getValue()),
      args.real("lr"), betas, args.real("eps"), args.real("weight_decay"), args.real("momentum"));
}

mt::LrScheduleAttr lrScheduleAttr(DictionaryAttr call) {
  if (!call)
    return {};
  Settings args(call.getValue());
  return mt::LrScheduleAttr::get(
      call.getContext(), *mt::symbolizeLrScheduleKind(call.getAs<StringAttr>("kind").getValue()),
      args.integer("warmup"), args.real("min"), args.integer("decay_steps"));
}

} // namespace

TrainSettings mtc::frontend::lowerTrainBlock(const ConfigBlock *block, MLIRContext &context,
                                             Diagnostics &diags) {
  SettingLowering lowering(context, diags);
  TrainSettings settings;
  SmallVector<NamedAttribute> attrs;
  llvm::StringMap<const ConfigEntry *> byKey;
  if (block)
    attrs = lowering.entries(*block, trainSchema(), byKey);
  Settings train(attrs);
  settings.microBatch = train.integer("micro_batch").value_or(1);
  std::optional<int64_t> globalBatch = train.integer("global_batch");
  if (globalBatch && *globalBatch % settings.microBatch != 0) {
    diags.error(byKey["global_batch"]->range, "global_batch " + llvm::Twine(*globalBatch) +
                                                  " is not a multiple of micro_batch " +
                                                  llvm::Twine(settings.microBatch));
    globalBatch.reset();
  }
  std::optional<mt::Precision> precision = train.word("precision", mt::symbolizePrecision);
  if (precision)
    settings.precision = mt::stringifyPrecision(*precision).str();
  settings.attr = mt::TrainAttr::get(
      &context, optimizerAttr(dyn_cast_or_null<DictionaryAttr>(train.get("optimizer"))),
      lrScheduleAttr(dyn_cast_or_null<DictionaryAttr>(train.get("lr"))), globalBatch,
      train.integer("micro_batch"), train.real("clip_grad"), precision, train.integer("seed"),
      train.integer("steps"), train.flag("dropout"), train.flag("eod_mask_loss"));
  return settings;
}

/// The pipeline settings: the schedule agrees with the virtual stages, and the layers split
/// into the pp x virtual-stages chunks (evenly, or as `pipeline_layers` says). Reports each
/// problem at the setting that causes it; returns false after an error.
static bool checkPipeline(const Settings &parallel,
                          const llvm::StringMap<const ConfigEntry *> &byKey, int64_t numLayers,
                          Diagnostics &diags) {
  int64_t pp = parallel.integer("pp").value_or(1);
  std::optional<mt::PipelineSchedule> schedule =
      parallel.word("schedule", mt::symbolizePipelineSchedule);
  std::optional<int64_t> virtualStages = parallel.integer("virtual_stages");
  int64_t chunks = virtualStages.value_or(schedule == mt::PipelineSchedule::ZeroBubbleV ? 2 : 1);
  const ConfigEntry *vs = byKey.lookup("virtual_stages");
  const ConfigEntry *scheduleEntry = byKey.lookup("schedule");
  const ConfigEntry *split = byKey.lookup("pipeline_layers");
  unsigned errors = diags.numErrors();
  if (const ConfigEntry *ppEntry = byKey.lookup("pp"); ppEntry && pp > numLayers)
    diags.error(ppEntry->range, "pp " + llvm::Twine(pp) + " exceeds the " + llvm::Twine(numLayers) +
                                    " layers there are to cut into pipeline stages");
  auto describe = [&](int64_t n) {
    return "'" + (vs ? vs->key : std::string("vpp")) + " " + std::to_string(n) + "'";
  };
  if (std::optional<mt::PipelineSettingProblem> problem = mt::checkPipelineSchedule(
          pp, schedule, virtualStages, {"pp", "vpp (virtual_stages)", describe})) {
    const ConfigEntry *at =
        problem->at == mt::PipelineSettingProblem::Setting::Schedule ? scheduleEntry : vs;
    diags.error((at ? at : scheduleEntry)->range, problem->message);
  }
  if (diags.numErrors() != errors)
    return false;

  if (split) {
    auto attr = dyn_cast_or_null<DenseI64ArrayAttr>(parallel.get("pipeline_layers"));
    if (!attr)
      return false; // its value was reported
    llvm::ArrayRef<int64_t> layers = attr.asArrayRef();
    if (static_cast<int64_t>(layers.size()) != pp * chunks) {
      diags.error(split->value->range, "pipeline_layers lists " + llvm::Twine(layers.size()) +
                                           " chunks; pp " + llvm::Twine(pp) + " x " +
                                           llvm::Twine(chunks) + " virtual stages has " +
                                           llvm::Twine(pp * chunks));
      return false;
    }
    if (llvm::Error error = mt::checkPipelineLayers(layers, numLayers)) {
      diags.error(split->value->range, llvm::toString(std::move(error)));
      return false;
    }
    return true;
  }
  if (pp == 1)
    return true; // no pipeline: the schedule is harmless
  if (llvm::Expected<SmallVector<int64_t>> even = mt::splitPipelineLayers(numLayers, pp, chunks);
      !even) {
    llvm::consumeError(even.takeError());
    const ConfigEntry *at = vs && chunks > 1 ? vs : byKey.lookup("pp");
    if (numLayers < pp * chunks) {
      diags.error(at->range, llvm::Twine(numLayers) + " layers are too few for pp " +
                                 llvm::Twine(pp) + " x " + llvm::Twine(chunks) +
                                 " virtual stages: each of the " + llvm::Twine(pp * chunks) +
                                 " chunks needs a layer");
      return false;
    }
    diags.error(
        at->range, llvm::Twine(numLayers) + " layers do not split evenly into pp " +
                       llvm::Twine(pp) + " x " + llvm::Twine(chunks) +
                       " virtual stages; give the layers of each chunk, e.g. "
                       "pipeline_layers [" +
                       [&] {
                         // The example: the remainder on the first chunks.
                         int64_t n = pp * chunks;
                         std::string text;
                         for (int64_t c = 0; c < n; ++c)
                           text += (c ? ", " : "") +
                                   std::to_string(numLayers / n + (c < numLayers % n));
                         return text;
                       }() +
                       "]");
    return false;
  }
  return true;
}

mt::ParallelAttr mtc::frontend::lowerParallelBlock(const ConfigBlock *block,
                                                   const llvm::StringMap<int64_t> &dims,
                                                   int64_t numLayers, llvm::StringRef vocabulary,
                                                   MLIRContext &context, Diagnostics &diags) {
  SettingLowering lowering(context, diags);
  Builder &b = lowering.b;
  if (!block)
    return mt::ParallelAttr::get(&context);
  if (block->isAuto)
    return mt::ParallelAttr::get(&context, /*autoSearch=*/true);

  llvm::StringMap<const ConfigEntry *> byKey;
  SmallVector<NamedAttribute> attrs = lowering.entries(*block, parallelSchema(), byKey);
  Settings parallel(attrs);
  auto degree = [&](llvm::StringRef axis) { return parallel.integer(axis).value_or(1); };
  auto requireDivides = [&](llvm::StringRef axis, llvm::StringRef dim, const ConfigEntry &at,
                            int64_t factor) {
    auto it = dims.find(dim);
    if (it == dims.end() || it->second % factor == 0)
      return;
    diags.error(at.range, axis + " " + llvm::Twine(factor) + " does not divide " + dim +
                              " = " + llvm::Twine(it->second));
  };

  // Megatron's default layout shards these dimensions over tp; each must divide evenly,
  // except the vocabulary, which the compiler pads (its padded classes masked).
  if (const ConfigEntry *tp = byKey.lookup("tp"); tp && degree("tp") > 1)
    for (llvm::StringRef dim : {"heads", "kv_heads", "ffn", "vocab"})
      if (dim != vocabulary)
        requireDivides("tp", dim, *tp, degree("tp"));
  if (const ConfigEntry *ep = byKey.lookup("ep"); ep && degree("ep") > 1)
    requireDivides("ep", "experts", *ep, degree("ep"));
  if (const ConfigEntry *cp = byKey.lookup("cp"); cp && degree("cp") > 1)
    requireDivides("cp", "seq", *cp, degree("cp"));
  // Ring attention balances causal work by cutting the sequence in 2 cp chunks.
  if (const ConfigEntry *ring = byKey.lookup("cp_comm_type");
      ring && degree("cp") > 1 &&
      parallel.word("cp_comm_type", mt::symbolizeContextParallelCommType) ==
          mt::ContextParallelCommType::P2P)
    requireDivides("cp_comm_type p2p cuts seq in 2 x cp chunks:", "seq", *ring, 2 * degree("cp"));
  if (const ConfigEntry *sp = byKey.lookup("sp")) {
    bool on = parallel.flag("sp").value_or(false);
    if (on && degree("tp") == 1)
      diags.error(sp->range, "sequence parallelism ('sp on') needs tensor parallelism: set tp > 1");
    else if (on)
      requireDivides("sp over tp", "seq", *sp, degree("tp"));
  }
  bool pipelineOk = checkPipeline(parallel, byKey, numLayers, diags);

  DictionaryAttr layoutAttr;
  if (const ConfigEntry *layout = byKey.lookup("layout")) {
    static const llvm::StringLiteral axes[] = {"dp", "tp", "pp", "cp", "ep"};
    SmallVector<NamedAttribute> pairs;
    llvm::StringSet<> mapped;
    for (auto [pair, range] : llvm::zip(layout->layout, layout->layoutRanges)) {
      const auto &[dim, axis] = pair;
      // A pair `dim: axis` lies on one line, so the two names' spans follow from its range.
      SourceRange dimRange = {range.begin, range.begin}, axisRange = {range.end, range.end};
      dimRange.end.col += dim.size();
      dimRange.end.offset += dim.size();
      axisRange.begin.col -= axis.size();
      axisRange.begin.offset -= axis.size();
      if (!dims.count(dim)) {
        diags.error(dimRange, "layout names unknown dimension '" + dim + "'");
        continue;
      }
      if (!llvm::is_contained(axes, axis)) {
        diags.error(axisRange, "unknown mesh axis '" + axis +
                                   "'; expected 'dp', 'tp', 'pp', 'cp' or 'ep'");
        continue;
      }
      if (!mapped.insert(dim).second) {
        diags.error(range, "dimension '" + dim + "' is mapped twice in the layout");
        continue;
      }
      if (int64_t factor = degree(axis);
          dims.lookup(dim) % factor != 0 && !(axis == "tp" && dim == vocabulary))
        diags.error(range, axis + " " + llvm::Twine(factor) + " does not divide " + dim +
                               " = " + llvm::Twine(dims.lookup(dim)));
      pairs.push_back(b.getNamedAttr(dim, b.getStringAttr(axis)));
    }
    layoutAttr = b.getDictionaryAttr(pairs);
  }
  // After an error the attribute need not verify: the module is never used.
  std::optional<mt::PipelineSchedule> schedule =
      parallel.word("schedule", mt::symbolizePipelineSchedule);
  std::optional<int64_t> virtualStages = parallel.integer("virtual_stages");
  auto pipelineLayers = dyn_cast_or_null<DenseI64ArrayAttr>(parallel.get("pipeline_layers"));
  if (!pipelineOk) {
    schedule.reset();
    virtualStages.reset();
    pipelineLayers = {};
  }
  return mt::ParallelAttr::get(
      &context, /*autoSearch=*/false, parallel.integer("tp"), parallel.integer("pp"),
      parallel.integer("dp"), parallel.integer("cp"), parallel.integer("ep"),
      parallel.integer("etp"), parallel.flag("sp"), schedule, virtualStages,
      parallel.integer("micro_batches"), parallel.word("recompute", mt::symbolizeRecomputePolicy),
      parallel.flag("distributed_optimizer"), layoutAttr, pipelineLayers,
      parallel.word("cp_comm_type", mt::symbolizeContextParallelCommType));
}
