//===- MTConfigAttrs.cpp - #mt.train and #mt.parallel ---------------------===//
//
// Printers, parsers and verifiers of the typed settings and the module-level check of
// `mt.train` / `mt.parallel`.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mtc::mt;

//===----------------------------------------------------------------------===//
// Field printing and parsing
//===----------------------------------------------------------------------===//

namespace {

/// Prints `key = value` fields separated by commas, skipping absent ones.
class FieldPrinter {
public:
  explicit FieldPrinter(AsmPrinter &printer) : printer(printer) {}

  AsmPrinter &key(StringRef name) {
    if (!first)
      printer << ", ";
    first = false;
    return printer << name << " = ";
  }
  void field(StringRef name, std::optional<int64_t> value) {
    if (value)
      key(name) << *value;
  }
  void field(StringRef name, std::optional<bool> value) {
    if (value)
      key(name) << (*value ? "true" : "false");
  }
  void field(StringRef name, FloatAttr value) {
    if (value)
      key(name).printFloat(value.getValue());
  }
  /// Enum words print as keywords where they can (`fp32`), else quoted (`"1f1b"`).
  void word(StringRef name, std::optional<StringRef> value) {
    if (value)
      key(name).printKeywordOrString(*value);
  }

private:
  AsmPrinter &printer;
  bool first = true;
};

/// Parses `{ key = value, ... }`-style field lists: each key at most once, each value by
/// its callback.
ParseResult parseFields(AsmParser &parser, AsmParser::Delimiter delimiter, StringRef what,
                        ArrayRef<StringRef> keys,
                        function_ref<ParseResult(StringRef key, SMLoc loc)> parseValue) {
  llvm::StringSet<> seen;
  return parser.parseCommaSeparatedList(delimiter, [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    std::string key;
    if (parser.parseKeywordOrString(&key))
      return failure();
    if (!llvm::is_contained(keys, key)) {
      InFlightDiagnostic diag = parser.emitError(loc)
                                << "unknown " << what << " field '" << key << "'; expected";
      for (StringRef known : keys)
        diag << " '" << known << "'";
      return diag;
    }
    if (!seen.insert(key).second)
      return parser.emitError(loc) << what << " field '" << key << "' given twice";
    if (parser.parseEqual())
      return failure();
    return parseValue(key, loc);
  });
}

ParseResult parseInt(AsmParser &parser, std::optional<int64_t> &result) {
  int64_t value;
  if (parser.parseInteger(value))
    return failure();
  result = value;
  return success();
}

ParseResult parseF64(AsmParser &parser, FloatAttr &result) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  result = FloatAttr::get(Float64Type::get(parser.getContext()), value);
  return success();
}

ParseResult parseBool(AsmParser &parser, std::optional<bool> &result) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  if (word != "true" && word != "false")
    return parser.emitError(loc) << "expected 'true' or 'false', got '" << word << "'";
  result = word == "true";
  return success();
}

/// An enum value written as its word, bare or quoted.
template <typename Enum>
ParseResult parseWord(AsmParser &parser, std::optional<Enum> (*symbolize)(StringRef),
                      StringRef what, std::optional<Enum> &result) {
  SMLoc loc = parser.getCurrentLocation();
  std::string word;
  if (parser.parseKeywordOrString(&word))
    return failure();
  result = symbolize(word);
  if (!result)
    return parser.emitError(loc) << "unknown " << what << " '" << word << "'";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// OptimizerAttr
//===----------------------------------------------------------------------===//

static bool isFraction(double x) { return x >= 0 && x < 1; }

LogicalResult OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    OptimizerKind kind, FloatAttr lr, DenseF64ArrayAttr betas,
                                    FloatAttr eps, FloatAttr weightDecay, FloatAttr momentum) {
  StringRef name = stringifyOptimizerKind(kind);
  if (lr && !(lr.getValueAsDouble() > 0))
    return emitError() << name << " needs a positive lr";
  if (weightDecay && !(weightDecay.getValueAsDouble() >= 0))
    return emitError() << name << " needs a non-negative weight_decay";
  if (kind == OptimizerKind::AdamW) {
    if (momentum)
      return emitError() << "adamw takes no momentum (sgd does)";
    if (betas && (betas.size() != 2 || !isFraction(betas[0]) || !isFraction(betas[1])))
      return emitError() << "adamw betas must be two numbers in [0, 1)";
    if (eps && !(eps.getValueAsDouble() > 0))
      return emitError() << "adamw needs a positive eps";
  } else {
    if (betas || eps)
      return emitError() << "sgd takes no " << (betas ? "betas" : "eps") << " (adamw does)";
    if (momentum && !isFraction(momentum.getValueAsDouble()))
      return emitError() << "sgd momentum must be in [0, 1)";
  }
  return success();
}

static void printOptimizerSpec(AsmPrinter &printer, OptimizerAttr optimizer) {
  printer << stringifyOptimizerKind(optimizer.getKind());
  if (!optimizer.getLr() && !optimizer.getBetas() && !optimizer.getEps() &&
      !optimizer.getWeightDecay() && !optimizer.getMomentum())
    return;
  printer << '(';
  FieldPrinter fields(printer);
  fields.field("lr", optimizer.getLr());
  if (DenseF64ArrayAttr betas = optimizer.getBetas()) {
    fields.key("betas") << '(';
    llvm::interleaveComma(betas.asArrayRef(), printer,
                          [&](double beta) { printer.printFloat(llvm::APFloat(beta)); });
    printer << ')';
  }
  fields.field("eps", optimizer.getEps());
  fields.field("weight_decay", optimizer.getWeightDecay());
  fields.field("momentum", optimizer.getMomentum());
  printer << ')';
}

static OptimizerAttr parseOptimizerSpec(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  std::optional<OptimizerKind> kind;
  if (parseWord(parser, symbolizeOptimizerKind, "optimizer", kind))
    return {};
  FloatAttr lr, eps, weightDecay, momentum;
  DenseF64ArrayAttr betas;
  auto value = [&](StringRef key, SMLoc) -> ParseResult {
    if (key == "betas") {
      SmallVector<double, 2> values;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, [&]() -> ParseResult {
            double beta;
            if (parser.parseFloat(beta))
              return failure();
            values.push_back(beta);
            return success();
          }))
        return failure();
      betas = DenseF64ArrayAttr::get(parser.getContext(), values);
      return success();
    }
    FloatAttr &slot = key == "lr"             ? lr
                      : key == "eps"          ? eps
                      : key == "weight_decay" ? weightDecay
                                              : momentum;
    return parseF64(parser, slot);
  };
  if (parseFields(parser, AsmParser::Delimiter::OptionalParen, "optimizer",
                  {"lr", "betas", "eps", "weight_decay", "momentum"}, value))
    return {};
  return OptimizerAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                                   *kind, lr, betas, eps, weightDecay, momentum);
}

Attribute OptimizerAttr::parse(AsmParser &parser, Type) {
  OptimizerAttr optimizer;
  if (parser.parseLess() || !(optimizer = parseOptimizerSpec(parser)) || parser.parseGreater())
    return {};
  return optimizer;
}

void OptimizerAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printOptimizerSpec(printer, *this);
  printer << '>';
}

//===----------------------------------------------------------------------===//
// LrScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult LrScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     LrScheduleKind kind, std::optional<int64_t> warmup,
                                     FloatAttr min, std::optional<int64_t> decaySteps) {
  StringRef name = stringifyLrScheduleKind(kind);
  if (kind == LrScheduleKind::Constant && (min || decaySteps))
    return emitError() << "the constant learning-rate schedule takes only 'warmup'";
  if (warmup && *warmup < 0)
    return emitError() << "the " << name << " learning-rate schedule needs warmup >= 0";
  if (min && !(min.getValueAsDouble() >= 0))
    return emitError() << "the " << name << " learning-rate schedule needs min >= 0";
  if (decaySteps && *decaySteps < 1)
    return emitError() << "the " << name << " learning-rate schedule needs decay_steps >= 1";
  return success();
}

static void printLrScheduleSpec(AsmPrinter &printer, LrScheduleAttr schedule) {
  printer << stringifyLrScheduleKind(schedule.getKind());
  if (!schedule.getWarmup() && !schedule.getMin() && !schedule.getDecaySteps())
    return;
  printer << '(';
  FieldPrinter fields(printer);
  fields.field("warmup", schedule.getWarmup());
  fields.field("min", schedule.getMin());
  fields.field("decay_steps", schedule.getDecaySteps());
  printer << ')';
}

static LrScheduleAttr parseLrScheduleSpec(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  std::optional<LrScheduleKind> kind;
  if (parseWord(parser, symbolizeLrScheduleKind, "learning-rate schedule", kind))
    return {};
  std::optional<int64_t> warmup, decaySteps;
  FloatAttr min;
  auto value = [&](StringRef key, SMLoc) -> ParseResult {
    if (key == "min")
      return parseF64(parser, min);
    return parseInt(parser, key == "warmup" ? warmup : decaySteps);
  };
  if (parseFields(parser, AsmParser::Delimiter::OptionalParen, "learning-rate schedule",
                  {"warmup", "min", "decay_steps"}, value))
    return {};
  return LrScheduleAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                                    *kind, warmup, min, decaySteps);
}

Attribute LrScheduleAttr::parse(AsmParser &parser, Type) {
  LrScheduleAttr schedule;
  if (parser.parseLess() || !(schedule = parseLrScheduleSpec(parser)) || parser.parseGreater())
    return {};
  return schedule;
}

void LrScheduleAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printLrScheduleSpec(printer, *this);
  printer << '>';
}

//===----------------------------------------------------------------------===//
// TrainAttr
//===----------------------------------------------------------------------===//

LogicalResult TrainAttr::verify(function_ref<InFlightDiagnostic()> emitError, OptimizerAttr,
                                LrScheduleAttr, std::optional<int64_t> globalBatch,
                                std::optional<int64_t> microBatch, FloatAttr clipGrad,
                                std::optional<Precision>, std::optional<int64_t> seed,
                                std::optional<int64_t> steps, std::optional<bool>,
                                std::optional<bool>) {
  for (auto [name, value] :
       {std::pair<StringRef, std::optional<int64_t>>{"global_batch", globalBatch},
        {"micro_batch", microBatch},
        {"steps", steps}})
    if (value && *value < 1)
      return emitError() << name << " must be at least 1, got " << *value;
  if (globalBatch && *globalBatch % microBatch.value_or(1) != 0)
    return emitError() << "global_batch " << *globalBatch << " is not a multiple of micro_batch "
                       << *microBatch;
  if (seed && *seed < 0)
    return emitError() << "seed must be non-negative, got " << *seed;
  if (clipGrad && !(clipGrad.getValueAsDouble() >= 0))
    return emitError() << "clip_grad must be non-negative";
  return success();
}

static constexpr StringRef kTrainKeys[] = {"optimizer",   "lr",        "global_batch",
                                           "micro_batch", "clip_grad", "precision",
                                           "seed",        "steps",     "dropout",
                                           "eod_mask_loss"};

Attribute TrainAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  OptimizerAttr optimizer;
  LrScheduleAttr lr;
  std::optional<int64_t> globalBatch, microBatch, seed, steps;
  FloatAttr clipGrad;
  std::optional<Precision> precision;
  std::optional<bool> dropout, eodMaskLoss;
  auto value = [&](StringRef key, SMLoc) -> ParseResult {
    if (key == "optimizer")
      return success(static_cast<bool>(optimizer = parseOptimizerSpec(parser)));
    if (key == "lr")
      return success(static_cast<bool>(lr = parseLrScheduleSpec(parser)));
    if (key == "clip_grad")
      return parseF64(parser, clipGrad);
    if (key == "precision")
      return parseWord(parser, symbolizePrecision, "precision", precision);
    if (key == "dropout" || key == "eod_mask_loss")
      return parseBool(parser, key == "dropout" ? dropout : eodMaskLoss);
    return parseInt(parser, key == "global_batch"  ? globalBatch
                            : key == "micro_batch" ? microBatch
                            : key == "seed"        ? seed
                                                   : steps);
  };
  if (parseFields(parser, AsmParser::Delimiter::LessGreater, "train", kTrainKeys, value))
    return {};
  return TrainAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                               optimizer, lr, globalBatch, microBatch, clipGrad, precision, seed,
                               steps, dropout, eodMaskLoss);
}

void TrainAttr::print(AsmPrinter &printer) const {
  printer << '<';
  FieldPrinter fields(printer);
  if (OptimizerAttr optimizer = getOptimizer())
    printOptimizerSpec(fields.key("optimizer"), optimizer);
  if (LrScheduleAttr lr = getLr())
    printLrScheduleSpec(fields.key("lr"), lr);
  fields.field("global_batch", getGlobalBatch());
  fields.field("micro_batch", getMicroBatch());
  fields.field("clip_grad", getClipGrad());
  if (getPrecision())
    fields.word("precision", stringifyPrecision(*getPrecision()));
  fields.field("seed", getSeed());
  fields.field("steps", getSteps());
  fields.field("dropout", getDropout());
  fields.field("eod_mask_loss", getEodMaskLoss());
  printer << '>';
}

TrainAttr TrainAttr::lookup(ModuleOp module) {
  return module->getAttrOfType<TrainAttr>(MTDialect::kTrainAttrName);
}

//===----------------------------------------------------------------------===//
// ParallelAttr
//===----------------------------------------------------------------------===//

static constexpr StringRef kMeshAxes[] = {"dp", "tp", "pp", "cp", "ep"};

LogicalResult ParallelAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, bool autoSearch, std::optional<int64_t> tp,
    std::optional<int64_t> pp, std::optional<int64_t> dp, std::optional<int64_t> cp,
    std::optional<int64_t> ep, std::optional<int64_t> etp, std::optional<bool> sp,
    std::optional<PipelineSchedule> schedule, std::optional<int64_t> virtualStages,
    std::optional<int64_t> microBatches, std::optional<RecomputePolicy> recompute,
    std::optional<bool> distributedOptimizer, DictionaryAttr layout,
    DenseI64ArrayAttr pipelineLayers, std::optional<ContextParallelCommType> cpCommType) {
  if (autoSearch && (tp || pp || dp || cp || ep || etp || sp || schedule || virtualStages ||
                     microBatches || recompute || distributedOptimizer || layout ||
                     pipelineLayers || cpCommType))
    return emitError() << "a searched strategy ('auto') takes no other parallel setting";
  for (auto [name, value] : {std::pair<StringRef, std::optional<int64_t>>{"tp", tp},
                             {"pp", pp},
                             {"dp", dp},
                             {"cp", cp},
                             {"ep", ep},
                             {"etp", etp},
                             {"virtual_stages", virtualStages},
                             {"micro_batches", microBatches}})
    if (value && *value < 1)
      return emitError() << name << " must be at least 1, got " << *value;
  int64_t stages = pp.value_or(1);
  auto describe = [](int64_t chunks) { return "virtual_stages " + std::to_string(chunks); };
  if (std::optional<PipelineSettingProblem> problem = checkPipelineSchedule(
          stages, schedule, virtualStages, {"pp", "virtual_stages", describe}))
    return emitError() << problem->message;
  int64_t chunks = virtualStages.value_or(schedule == PipelineSchedule::ZeroBubbleV ? 2 : 1);
  if (pipelineLayers) {
    if (static_cast<int64_t>(pipelineLayers.size()) != stages * chunks)
      return emitError() << "pipeline_layers has " << pipelineLayers.size() << " entries; pp "
                         << stages << " x " << chunks << " virtual stages needs "
                         << stages * chunks;
    for (int64_t layers : pipelineLayers.asArrayRef())
      if (layers < 1)
        return emitError() << "pipeline_layers gives a chunk " << layers
                           << " layers; each needs at least 1";
  }
  if (layout)
    for (NamedAttribute entry : layout) {
      auto axis = dyn_cast<StringAttr>(entry.getValue());
      if (!axis || !llvm::is_contained(kMeshAxes, axis.getValue()))
        return emitError() << "layout maps '" << entry.getName().getValue()
                           << "' to an unknown mesh axis; expected dp, tp, pp, cp or ep";
    }
  return success();
}

static constexpr StringRef kParallelKeys[] = {"tp",
                                              "pp",
                                              "dp",
                                              "cp",
                                              "ep",
                                              "etp",
                                              "sp",
                                              "schedule",
                                              "virtual_stages",
                                              "micro_batches",
                                              "recompute",
                                              "distributed_optimizer",
                                              "layout",
                                              "pipeline_layers",
                                              "cp_comm_type"};

Attribute ParallelAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  MLIRContext *ctx = parser.getContext();
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalKeyword("auto"))) {
    if (parser.parseGreater())
      return {};
    return ParallelAttr::get(ctx, /*autoSearch=*/true);
  }
  std::optional<int64_t> tp, pp, dp, cp, ep, etp, virtualStages, microBatches;
  std::optional<bool> sp, distributedOptimizer;
  std::optional<PipelineSchedule> schedule;
  std::optional<RecomputePolicy> recompute;
  std::optional<ContextParallelCommType> cpCommType;
  DictionaryAttr layout;
  DenseI64ArrayAttr pipelineLayers;
  auto value = [&](StringRef key, SMLoc) -> ParseResult {
    if (key == "sp")
      return parseBool(parser, sp);
    if (key == "distributed_optimizer")
      return parseBool(parser, distributedOptimizer);
    if (key == "schedule")
      return parseWord(parser, symbolizePipelineSchedule, "pipeline schedule", schedule);
    if (key == "recompute")
      return parseWord(parser, symbolizeRecomputePolicy, "recompute policy", recompute);
    if (key == "cp_comm_type")
      return parseWord(parser, symbolizeContextParallelCommType,
                       "context-parallel communication type", cpCommType);
    if (key == "layout") {
      // {heads: tp, ffn: tp}, as in the DSL.
      NamedAttrList pairs;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() -> ParseResult {
            std::string dim, axis;
            if (parser.parseKeywordOrString(&dim) || parser.parseColon() ||
                parser.parseKeywordOrString(&axis))
              return failure();
            pairs.set(dim, StringAttr::get(ctx, axis));
            return success();
          }))
        return failure();
      layout = pairs.getDictionary(ctx);
      return success();
    }
    if (key == "pipeline_layers") {
      SmallVector<int64_t> layers;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
            return parser.parseInteger(layers.emplace_back());
          }))
        return failure();
      pipelineLayers = DenseI64ArrayAttr::get(ctx, layers);
      return success();
    }
    std::optional<int64_t> &slot = key == "tp"               ? tp
                                   : key == "pp"             ? pp
                                   : key == "dp"             ? dp
                                   : key == "cp"             ? cp
                                   : key == "ep"             ? ep
                                   : key == "etp"            ? etp
                                   : key == "virtual_stages" ? virtualStages
                                                             : microBatches;
    return parseInt(parser, slot);
  };
  // The '<' is already consumed: parse the list up to '>'.
  if (failed(parser.parseOptionalGreater())) {
    if (parseFields(parser, AsmParser::Delimiter::None, "parallel", kParallelKeys, value) ||
        parser.parseGreater())
      return {};
  }
  return ParallelAttr::getChecked([&] { return parser.emitError(loc); }, ctx,
                                  /*autoSearch=*/false, tp, pp, dp, cp, ep, etp, sp, schedule,
                                  virtualStages, microBatches, recompute, distributedOptimizer,
                                  layout, pipelineLayers, cpCommType);
}

void ParallelAttr::print(AsmPrinter &printer) const {
  printer << '<';
  if (getAutoSearch()) {
    printer << "auto>";
    return;
  }
  FieldPrinter fields(printer);
  fields.field("tp", getTp());
  fields.field("pp", getPp());
  fields.field("dp", getDp());
  fields.field("cp", getCp());
  fields.field("ep", getEp());
  fields.field("etp", getEtp());
  fields.field("sp", getSp());
  if (getSchedule())
    fields.word("schedule", stringifyPipelineSchedule(*getSchedule()));
  fields.field("virtual_stages", getVirtualStages());
  fields.field("micro_batches", getMicroBatches());
  if (getRecompute())
    fields.word("recompute", stringifyRecomputePolicy(*getRecompute()));
  fields.field("distributed_optimizer", getDistributedOptimizer());
  if (DictionaryAttr layout = getLayout()) {
    fields.key("layout") << '{';
    llvm::interleaveComma(layout, printer, [&](NamedAttribute entry) {
      printer.printKeywordOrString(entry.getName().getValue());
      printer << ": ";
      printer.printKeywordOrString(cast<StringAttr>(entry.getValue()).getValue());
    });
    printer << '}';
  }
  if (DenseI64ArrayAttr layers = getPipelineLayers()) {
    fields.key("pipeline_layers") << '[';
    llvm::interleaveComma(layers.asArrayRef(), printer);
    printer << ']';
  }
  if (getCpCommType())
    fields.word("cp_comm_type", stringifyContextParallelCommType(*getCpCommType()));
  printer << '>';
}

ParallelAttr ParallelAttr::lookup(ModuleOp module) {
  return module->getAttrOfType<ParallelAttr>(MTDialect::kParallelAttrName);
}

int64_t ParallelAttr::getDegree(StringRef axis) const {
  std::optional<int64_t> degree = axis == "tp"   ? getTp()
                                  : axis == "pp" ? getPp()
                                  : axis == "dp" ? getDp()
                                  : axis == "cp" ? getCp()
                                  : axis == "ep" ? getEp()
                                                 : std::nullopt;
  return degree.value_or(1);
}

int64_t ParallelAttr::getNumVirtualStages() const {
  if (getVirtualStages())
    return *getVirtualStages();
  return getSchedule() == PipelineSchedule::ZeroBubbleV ? 2 : 1;
}

PipelineSchedule ParallelAttr::getScheduleOrDefault() const {
  if (getSchedule())
    return *getSchedule();
  return getNumVirtualStages() > 1 ? PipelineSchedule::Interleaved : PipelineSchedule::OneFOneB;
}

std::optional<StringRef> ParallelAttr::getLayoutAxis(StringRef dim) const {
  if (DictionaryAttr layout = getLayout())
    if (auto axis = layout.getAs<StringAttr>(dim))
      return axis.getValue();
  return std::nullopt;
}

SmallVector<int64_t> ParallelAttr::getPipelineLayers(int64_t numLayers) const {
  if (DenseI64ArrayAttr layers = getPipelineLayers())
    return SmallVector<int64_t>(layers.asArrayRef());
  int64_t chunks = getPipelineParallel() * getNumVirtualStages();
  if (numLayers < chunks || numLayers % chunks != 0)
    return {};
  return SmallVector<int64_t>(chunks, numLayers / chunks);
}

//===----------------------------------------------------------------------===//
// Module attributes
//===----------------------------------------------------------------------===//

LogicalResult MTDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name != kTrainAttrName && name != kParallelAttrName)
    return success();
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitOpError() << "'" << name << "' belongs on the module";
  if (name == kTrainAttrName) {
    if (!isa<TrainAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a #mt.train<...> attribute, got "
                               << attr.getValue();
    return success();
  }
  auto parallel = dyn_cast<ParallelAttr>(attr.getValue());
  if (!parallel)
    return op->emitOpError() << "'" << name << "' must be a #mt.parallel<...> attribute, got "
                             << attr.getValue();
  // The split is checked against the layer stack where the module has one: not once the
  // repeats are lowered to loops (the compiled step's modules keep the attribute).
  if (DenseI64ArrayAttr layers = parallel.getPipelineLayers();
      layers && countLayers(module) > 0)
    if (llvm::Error error = checkPipelineLayers(layers.asArrayRef(), countLayers(module)))
      return op->emitOpError() << "'" << name
                               << "' pipeline_layers: " << llvm::toString(std::move(error));
  return success();
}
