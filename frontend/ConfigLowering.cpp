//===- ConfigLowering.cpp - train {} and parallel {} blocks ---------------===//

#include "frontend/ConfigLowering.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mtc::frontend;

namespace {

enum class ValueKind {
  PositiveInt,    // 4
  NonNegativeInt, // 1234
  NonNegative,    // 1.0
  Switch,         // on | off
  Word,           // one of `choices`
  Call,           // one of `choices`, optionally with keyword arguments
};

struct SettingSchema {
  llvm::StringLiteral key;
  ValueKind kind;
  std::vector<llvm::StringLiteral> choices = {};
  /// For Call: the keyword arguments each choice accepts (same for all choices).
  std::vector<llvm::StringLiteral> keywords = {};
};

const std::vector<SettingSchema> &trainSchema() {
  static const std::vector<SettingSchema> schema = {
      {"optimizer", ValueKind::Call, {"adamw", "sgd"},
       {"lr", "betas", "eps", "weight_decay", "momentum"}},
      {"lr", ValueKind::Call, {"constant", "cosine", "linear"},
       {"warmup", "min", "decay_steps"}},
      {"global_batch", ValueKind::PositiveInt},
      {"micro_batch", ValueKind::PositiveInt},
      {"clip_grad", ValueKind::NonNegative},
      {"precision", ValueKind::Word, {"fp32", "bf16", "fp16"}},
      {"seed", ValueKind::NonNegativeInt},
      {"steps", ValueKind::PositiveInt},
      {"dropout", ValueKind::Switch},
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
      {"sp", ValueKind::Switch},
      {"schedule", ValueKind::Word, {"gpipe", "1f1b", "interleaved", "zero-bubble"}},
      {"virtual_stages", ValueKind::PositiveInt},
      {"micro_batches", ValueKind::PositiveInt},
      {"recompute", ValueKind::Word, {"none", "selective", "full"}},
      {"distributed_optimizer", ValueKind::Switch},
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

/// Turns a literal setting value into an attribute: numbers, words, tuples and calls.
class SettingLowering {
public:
  SettingLowering(MLIRContext &context, Diagnostics &diags) : b(&context), diags(diags) {}

  Attribute literal(const Expr &expr) {
    switch (expr.kind) {
    case Expr::Kind::Number:
      if (expr.isInteger && std::fabs(expr.number) < 9.0e18)
        return b.getI64IntegerAttr(static_cast<int64_t>(expr.number));
      return b.getF64FloatAttr(expr.number);
    case Expr::Kind::Unary:
      if (expr.op == "-" && expr.lhs && expr.lhs->kind == Expr::Kind::Number) {
        if (expr.lhs->isInteger)
          return b.getI64IntegerAttr(-static_cast<int64_t>(expr.lhs->number));
        return b.getF64FloatAttr(-expr.lhs->number);
      }
      break;
    case Expr::Kind::Name:
      return b.getStringAttr(expr.name);
    case Expr::Kind::Tuple: {
      SmallVector<Attribute> elements;
      for (const ExprPtr &element : expr.args) {
        Attribute attr = literal(*element);
        if (!attr)
          return {};
        elements.push_back(attr);
      }
      return b.getArrayAttr(elements);
    }
    default:
      break;
    }
    diags.error(expr.range, "expected a number, a word or a tuple as a setting value");
    return {};
  }

  /// `adamw(lr = 3e-4)` -> {kind = "adamw", lr = 3.0e-4}; `constant` -> {kind = "constant"}.
  Attribute call(const Expr &expr, const SettingSchema &schema) {
    SmallVector<NamedAttribute> fields;
    fields.push_back(b.getNamedAttr("kind", b.getStringAttr(expr.name)));
    if (!llvm::is_contained(schema.choices, expr.name)) {
      diags.error(expr.nameRange, "unknown " + schema.key.str() + " '" + expr.name +
                                      "'; expected " + joinChoices(schema.choices));
      return {};
    }
    if (!expr.args.empty()) {
      diags.error(expr.args.front()->range,
                  "settings take keyword arguments only, e.g. " + expr.name + "(lr = 3e-4)");
      return {};
    }
    llvm::StringSet<> seen;
    for (const KeywordArg &kw : expr.kwargs) {
      if (!llvm::is_contained(schema.keywords, kw.name)) {
        diags.error(kw.nameRange, "unknown argument '" + kw.name + "' for " + expr.name +
                                      "; expected " + joinChoices(schema.keywords));
        return {};
      }
      if (!seen.insert(kw.name).second) {
        diags.error(kw.nameRange, "argument '" + kw.name + "' given twice");
        return {};
      }
      Attribute value = literal(*kw.value);
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
    case ValueKind::Word:
      if (value.kind != Expr::Kind::Name || !llvm::is_contained(schema.choices, value.name))
        return fail(joinChoices(schema.choices));
      return b.getStringAttr(value.name);
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
      if (auto [it, inserted] = byKey.try_emplace(entry.key, &entry); !inserted) {
        diags.error(entry.keyRange, "duplicate setting '" + entry.key + "' in " + block.kind +
                                        " {}");
        diags.note(it->second->keyRange, "first set here");
        continue;
      }
      if (block.kind == "parallel" && entry.key == "layout")
        continue;
      auto found = llvm::find_if(
          schema, [&](const SettingSchema &s) { return s.key == entry.key; });
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
        attrs.push_back(b.getNamedAttr(entry.key, attr));
    }
    return attrs;
  }

  Builder b;
  Diagnostics &diags;
};

int64_t intSetting(llvm::ArrayRef<NamedAttribute> attrs, llvm::StringRef key,
                   int64_t fallback) {
  for (const NamedAttribute &attr : attrs)
    if (attr.getName() == key)
      if (auto value = dyn_cast<IntegerAttr>(attr.getValue()))
        return value.getInt();
  return fallback;
}

} // namespace

TrainSettings mtc::frontend::lowerTrainBlock(const ConfigBlock *block, MLIRContext &context,
                                             Diagnostics &diags) {
  SettingLowering lowering(context, diags);
  TrainSettings settings;
  if (!block) {
    settings.attr = lowering.b.getDictionaryAttr({});
    return settings;
  }
  llvm::StringMap<const ConfigEntry *> byKey;
  SmallVector<NamedAttribute> attrs = lowering.entries(*block, trainSchema(), byKey);
  for (const NamedAttribute &attr : attrs)
    if (attr.getName() == "precision")
      settings.precision = cast<StringAttr>(attr.getValue()).str();
  settings.microBatch = intSetting(attrs, "micro_batch", 1);
  int64_t globalBatch = intSetting(attrs, "global_batch", settings.microBatch);
  if (globalBatch % settings.microBatch != 0 && byKey.count("global_batch"))
    diags.error(byKey["global_batch"]->range,
                "global_batch " + llvm::Twine(globalBatch) +
                    " is not a multiple of micro_batch " + llvm::Twine(settings.microBatch));
  settings.attr = lowering.b.getDictionaryAttr(attrs);
  return settings;
}

DictionaryAttr mtc::frontend::lowerParallelBlock(const ConfigBlock *block,
                                                 const llvm::StringMap<int64_t> &dims,
                                                 int64_t numLayers, MLIRContext &context,
                                                 Diagnostics &diags) {
  SettingLowering lowering(context, diags);
  Builder &b = lowering.b;
  if (!block)
    return b.getDictionaryAttr({});
  if (block->isAuto)
    return b.getDictionaryAttr({b.getNamedAttr("auto", b.getUnitAttr())});

  llvm::StringMap<const ConfigEntry *> byKey;
  SmallVector<NamedAttribute> attrs = lowering.entries(*block, parallelSchema(), byKey);
  auto degree = [&](llvm::StringRef axis) { return intSetting(attrs, axis, 1); };
  auto requireDivides = [&](llvm::StringRef axis, llvm::StringRef dim, const ConfigEntry &at,
                            int64_t factor) {
    auto it = dims.find(dim);
    if (it == dims.end() || it->second % factor == 0)
      return;
    diags.error(at.range, axis + " " + llvm::Twine(factor) + " does not divide " + dim +
                              " = " + llvm::Twine(it->second));
  };

  // Megatron's default layout shards these dimensions over tp; each must divide evenly.
  if (const ConfigEntry *tp = byKey.lookup("tp"); tp && degree("tp") > 1)
    for (llvm::StringRef dim : {"heads", "kv_heads", "ffn", "vocab"})
      requireDivides("tp", dim, *tp, degree("tp"));
  if (const ConfigEntry *ep = byKey.lookup("ep"); ep && degree("ep") > 1)
    requireDivides("ep", "experts", *ep, degree("ep"));
  if (const ConfigEntry *cp = byKey.lookup("cp"); cp && degree("cp") > 1)
    requireDivides("cp", "seq", *cp, degree("cp"));
  if (const ConfigEntry *sp = byKey.lookup("sp")) {
    bool on = llvm::any_of(attrs, [](const NamedAttribute &a) {
      return a.getName() == "sp" && a.getValue() == BoolAttr::get(a.getValue().getContext(), true);
    });
    if (on && degree("tp") == 1)
      diags.error(sp->range, "sequence parallelism ('sp on') needs tensor parallelism: set tp > 1");
    else if (on)
      requireDivides("sp over tp", "seq", *sp, degree("tp"));
  }
  if (const ConfigEntry *pp = byKey.lookup("pp"); pp && degree("pp") > numLayers)
    diags.error(pp->range, "pp " + llvm::Twine(degree("pp")) + " exceeds the " +
                               llvm::Twine(numLayers) +
                               " layers there are to cut into pipeline stages");
  if (const ConfigEntry *vs = byKey.lookup("virtual_stages");
      vs && numLayers % (degree("pp") * degree("virtual_stages")) != 0)
    diags.error(vs->range, llvm::Twine(numLayers) + " layers do not split into pp " +
                               llvm::Twine(degree("pp")) + " x virtual_stages " +
                               llvm::Twine(degree("virtual_stages")) + " equal chunks");

  if (const ConfigEntry *layout = byKey.lookup("layout")) {
    static const llvm::StringLiteral axes[] = {"dp", "tp", "pp", "cp", "ep"};
    SmallVector<NamedAttribute> pairs;
    llvm::StringSet<> mapped;
    for (auto [pair, range] : llvm::zip(layout->layout, layout->layoutRanges)) {
      const auto &[dim, axis] = pair;
      if (!dims.count(dim)) {
        diags.error(range, "layout names unknown dimension '" + dim + "'");
        continue;
      }
      if (!llvm::is_contained(axes, axis)) {
        diags.error(range, "unknown mesh axis '" + axis +
                               "'; expected 'dp', 'tp', 'pp', 'cp' or 'ep'");
        continue;
      }
      if (!mapped.insert(dim).second) {
        diags.error(range, "dimension '" + dim + "' is mapped twice in the layout");
        continue;
      }
      if (int64_t factor = degree(axis); dims.lookup(dim) % factor != 0)
        diags.error(range, axis + " " + llvm::Twine(factor) + " does not divide " + dim +
                               " = " + llvm::Twine(dims.lookup(dim)));
      pairs.push_back(b.getNamedAttr(dim, b.getStringAttr(axis)));
    }
    attrs.push_back(b.getNamedAttr("layout", b.getDictionaryAttr(pairs)));
  }
  return b.getDictionaryAttr(attrs);
}
