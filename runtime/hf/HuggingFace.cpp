//===- HuggingFace.cpp - Hugging Face checkpoints in and out --------------===//

#include "runtime/hf/HuggingFace.h"

#include "runtime/exec/Checkpoint.h"
#include "runtime/plan/VocabularyPadding.h"
#include "runtime/support/RegularFile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <sys/stat.h>

namespace mtc::rt::hf {
namespace {

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += concat(i ? ", " : "", shape[i]);
  return s + "]";
}

/// Two attribute values the compiled f32 kernels cannot tell apart.
bool sameAsFloat(double a, double b) { return static_cast<float>(a) == static_cast<float>(b); }

/// The values of `values` without repeats (as f32), in first-seen order.
std::vector<double> distinct(const std::vector<double> &values) {
  std::vector<double> out;
  for (double v : values)
    if (std::none_of(out.begin(), out.end(), [&](double o) { return sameAsFloat(o, v); }))
      out.push_back(v);
  return out;
}

//===----------------------------------------------------------------------===//
// program.mlir
//===----------------------------------------------------------------------===//

/// The number after `key` in `line` ("epsilon = 1.000000e-05 : f64" -> 1e-5), in MLIR's
/// decimal form or its hexadecimal bit pattern (0x3EE4F8B588E368F1).
std::optional<double> numberAfter(std::string_view line, std::string_view key) {
  size_t at = line.find(key);
  if (at == std::string_view::npos)
    return std::nullopt;
  std::string_view rest = line.substr(at + key.size());
  size_t end = rest.find_first_of(" ,}:");
  std::string token(rest.substr(0, end));
  if (token.size() == 18 && token.starts_with("0x")) {
    char *stop = nullptr;
    uint64_t bits = std::strtoull(token.c_str() + 2, &stop, 16);
    if (*stop != '\0')
      return std::nullopt;
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  char *stop = nullptr;
  double d = std::strtod(token.c_str(), &stop);
  if (token.empty() || *stop != '\0')
    return std::nullopt;
  return d;
}

//===----------------------------------------------------------------------===//
// Recognising the model
//===----------------------------------------------------------------------===//

/// A parameter an architecture has: its name in the plan (without the layer's prefix for a
/// layer parameter) and its dims by role (V vocabulary, D hidden, S positions, H heads,
/// K key/value heads, d head size, F feed-forward, E experts), after `layers` for a layer
/// parameter.
struct Role {
  std::string_view name;
  bool layer;
  std::string_view dims;
  bool optional = false;
};

const std::vector<Role> &rolesOf(Architecture arch) {
  static const std::vector<Role> gpt2 = {
      {"wte", false, "VD"}, {"wpe", false, "SD"}, {"lnf.g", false, "D"}, {"lnf.b", false, "D"},
      {"ln1.g", true, "D"}, {"ln1.b", true, "D"}, {"wq", true, "DHd"},   {"wk", true, "DHd"},
      {"wv", true, "DHd"},  {"bq", true, "Hd"},   {"bk", true, "Hd"},    {"bv", true, "Hd"},
      {"wo", true, "HdD"},  {"bo", true, "D"},    {"ln2.g", true, "D"},  {"ln2.b", true, "D"},
      {"w1", true, "DF"},   {"b1", true, "F"},    {"w2", true, "FD"},    {"b2", true, "D"},
  };
  static const std::vector<Role> llama = {
      {"embed", false, "VD"},   {"norm", false, "D"}, {"lm_head", false, "DV", true},
      {"attn_norm", true, "D"}, {"wq", true, "DHd"},  {"wk", true, "DKd"},
      {"wv", true, "DKd"},      {"wo", true, "HdD"},  {"ffn_norm", true, "D"},
      {"w1", true, "DF"},       {"w3", true, "DF"},   {"w2", true, "FD"},
  };
  // Llama's, with a router and the feed-forward stacked per expert (E).
  static const std::vector<Role> mixtral = {
      {"embed", false, "VD"},   {"norm", false, "D"}, {"lm_head", false, "DV", true},
      {"attn_norm", true, "D"}, {"wq", true, "DHd"},  {"wk", true, "DKd"},
      {"wv", true, "DKd"},      {"wo", true, "HdD"},  {"ffn_norm", true, "D"},
      {"router", true, "DE"},   {"w1", true, "EDF"},  {"w3", true, "EDF"},
      {"w2", true, "EFD"},
  };
  return arch == Architecture::Gpt2 ? gpt2 : arch == Architecture::Llama ? llama : mixtral;
}

std::string describeArchitecture(Architecture arch) {
  return concat(arch == Architecture::Gpt2    ? "GPT-2"
                : arch == Architecture::Llama ? "Llama"
                                              : "Mixtral",
                " (", architectureName(arch), ")");
}

} // namespace

//===----------------------------------------------------------------------===//
// PlanOps
//===----------------------------------------------------------------------===//

Expected<PlanOps> scanPlanOps(std::string_view program, std::string_view where) {
  PlanOps ops;
  size_t lineNo = 0;
  while (!program.empty()) {
    size_t nl = program.find('\n');
    std::string_view line = program.substr(0, nl);
    program.remove_prefix(nl == std::string_view::npos ? program.size() : nl + 1);
    ++lineNo;
    size_t at = line.find("= mt.");
    if (at == std::string_view::npos)
      continue;
    std::string_view rest = line.substr(at + 5);
    std::string_view op = rest.substr(0, rest.find(' '));
    auto bad = [&](std::string_view what) {
      return makeError(where, ":", lineNo, ": cannot read the ", what, " of this mt.", op);
    };
    auto valueOr = [&](std::string_view key, double fallback, std::vector<double> &into) -> Error {
      if (line.find(key) == std::string_view::npos) {
        into.push_back(fallback);
        return Error::success();
      }
      std::optional<double> v = numberAfter(line, key);
      if (!v)
        return bad(key.substr(0, key.find(' ')));
      into.push_back(*v);
      return Error::success();
    };
    Error err;
    if (op == "layer_norm")
      err = valueOr("epsilon = ", 1e-5, ops.layerNormEps);
    else if (op == "rms_norm")
      err = valueOr("epsilon = ", 1e-6, ops.rmsNormEps);
    else if (op == "rope")
      err = valueOr("theta = ", 10000.0, ops.ropeTheta);
    else if (op == "topk") {
      // "%w, %i = mt.topk %logits over expert k topk : ..."
      size_t k = line.find(" k ");
      if (k == std::string_view::npos)
        return bad("k");
      std::string_view name = line.substr(k + 3);
      ops.topKDims.emplace_back(name.substr(0, name.find(' ')));
    } else if (op == "dispatch")
      ++(line.find(" dropless") != std::string_view::npos ? ops.droplessDispatch
                                                          : ops.cappedDispatch);
    else if (op == "gelu")
      ++(line.find(" approximate") != std::string_view::npos ? ops.geluTanh : ops.geluExact);
    else if (op == "attention") {
      std::optional<double> scale = numberAfter(line, " scale ");
      if (!scale)
        return bad("scale");
      ops.attentionScale.push_back(*scale);
      ++(line.find(" causal ") != std::string_view::npos ? ops.causalAttention
                                                         : ops.bidirectionalAttention);
    }
    if (!err.ok())
      return err;
  }
  return ops;
}

Expected<PlanOps> readPlanOps(const Plan &plan) {
  if (!plan.findFile("program.mlir"))
    return makeError(plan.dir, ": the plan has no program.mlir to read its ops from");
  std::filesystem::path file = plan.dir / "program.mlir";
  Expected<std::string> text = readInputFile(file);
  if (!text)
    return text.takeError();
  return scanPlanOps(*text, file.string());
}

//===----------------------------------------------------------------------===//
// ModelMap
//===----------------------------------------------------------------------===//

std::string_view architectureName(Architecture arch) {
  return arch == Architecture::Gpt2    ? "GPT2LMHeadModel"
         : arch == Architecture::Llama ? "LlamaForCausalLM"
                                       : "MixtralForCausalLM";
}

std::string_view modelType(Architecture arch) {
  return arch == Architecture::Gpt2 ? "gpt2" : arch == Architecture::Llama ? "llama" : "mixtral";
}

int64_t TensorMap::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Expected<ModelMap> mapModel(const Plan &plan, const PlanOps &ops) {
  ModelMap model;
  auto shortName = [](const ParamInfo &p) {
    return p.layer ? std::string_view(p.name).substr(p.layer->size() + 1)
                   : std::string_view(p.name);
  };
  if (plan.findParam("wte"))
    model.arch = Architecture::Gpt2;
  else if (plan.findParam("embed"))
    // A router among the layer parameters makes it Mixtral.
    model.arch = std::any_of(plan.params.begin(), plan.params.end(),
                             [](const ParamInfo &p) {
                               return p.layer && p.name == concat(*p.layer, ".router");
                             })
                     ? Architecture::Mixtral
                     : Architecture::Llama;
  else if (plan.params.empty())
    return makeError(plan.dir, ": the plan's model '", plan.model, "' has no parameters");
  else
    return makeError("the plan's model '", plan.model,
                     "' is neither GPT-2 nor Llama to mtc-hf: its parameter '", plan.params[0].name,
                     "' ", formatDims(plan.params[0].dims),
                     " maps to no Hugging Face tensor (a GPT-2 model has 'wte', a Llama model "
                     "'embed')");
  const Architecture arch = model.arch;
  const std::vector<Role> &roles = rolesOf(arch);

  // Every parameter has a role, all layer parameters are of one layer, and no role is missing.
  std::map<std::string, size_t, std::less<>> byRole; // "name" or "layer:name"
  std::optional<std::string> layerName;
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    std::string_view name = shortName(p);
    bool known = std::any_of(roles.begin(), roles.end(), [&](const Role &r) {
      return r.name == name && r.layer == p.layer.has_value();
    });
    if (known && p.layer && layerName && *layerName != *p.layer)
      known = false;
    if (!known)
      return makeError("parameter '", p.name, "' ", formatDims(p.dims),
                       " of the plan's model maps to no tensor of a Hugging Face ",
                       describeArchitecture(arch), " model");
    if (p.layer)
      layerName = *p.layer;
    byRole[concat(p.layer ? "layer:" : "", name)] = i;
  }
  for (const Role &r : roles)
    if (!r.optional && !byRole.count(concat(r.layer ? "layer:" : "", r.name)))
      return makeError("the plan's model has no ", r.layer ? "layer " : "", "parameter '", r.name,
                       "', which a ", describeArchitecture(arch), " model has");
  auto param = [&](std::string_view name, bool layer) -> const ParamInfo & {
    return plan.params[byRole.at(concat(layer ? "layer:" : "", name))];
  };

  // The sizes, from the parameters that define them; then every shape is checked.
  auto dimAt = [&](std::string_view name, bool layer, size_t index) -> int64_t {
    std::vector<int64_t> shape = realShape(plan, param(name, layer).dims);
    size_t at = index + (layer ? 1 : 0);
    return at < shape.size() ? shape[at] : 0;
  };
  ModelDims &dims = model.dims;
  const char *embed = arch == Architecture::Gpt2 ? "wte" : "embed";
  dims.vocab = dimAt(embed, false, 0);
  dims.hidden = dimAt(embed, false, 1);
  dims.heads = dimAt("wq", true, 1);
  dims.headDim = dimAt("wq", true, 2);
  dims.kvHeads = arch == Architecture::Gpt2 ? dims.heads : dimAt("wk", true, 1);
  const bool moe = arch == Architecture::Mixtral;
  dims.ffn = dimAt("w1", true, moe ? 2 : 1);
  if (moe)
    dims.experts = dimAt("router", true, 1);
  dims.layers = param("wq", true).instances;
  dims.positions =
      arch == Architecture::Gpt2 ? dimAt("wpe", false, 0) : plan.dimSize("seq").value_or(0);
  model.tiedEmbeddings = arch == Architecture::Gpt2 || !byRole.count("lm_head");
  for (const Role &r : roles) {
    auto it = byRole.find(concat(r.layer ? "layer:" : "", r.name));
    if (it == byRole.end())
      continue;
    const ParamInfo &p = plan.params[it->second];
    std::vector<int64_t> want;
    if (r.layer)
      want.push_back(dims.layers);
    for (char c : r.dims)
      want.push_back(c == 'V'   ? dims.vocab
                     : c == 'D' ? dims.hidden
                     : c == 'S' ? dims.positions
                     : c == 'H' ? dims.heads
                     : c == 'K' ? dims.kvHeads
                     : c == 'd' ? dims.headDim
                     : c == 'E' ? dims.experts
                                : dims.ffn);
    std::vector<int64_t> have = realShape(plan, p.dims);
    if (have != want)
      return makeError("parameter '", p.name, "' is ", formatShape(have), " ", formatDims(p.dims),
                       " but a ", describeArchitecture(arch), " model of the plan's sizes has ",
                       formatShape(want));
  }
  if (arch == Architecture::Gpt2 && dims.heads * dims.headDim != dims.hidden)
    return makeError("heads x head_dim = ", dims.heads * dims.headDim,
                     " differs from hidden = ", dims.hidden,
                     ": GPT-2's attention has n_embd / n_head per head");
  if (arch != Architecture::Gpt2 && dims.headDim % 2 != 0)
    return makeError("head_dim = ", dims.headDim, " is odd: rotary embeddings need an even one");
  if (arch != Architecture::Gpt2 && (dims.kvHeads == 0 || dims.heads % dims.kvHeads != 0))
    return makeError("heads = ", dims.heads, " is not a multiple of kv_heads = ", dims.kvHeads);

  // The ops: what config.json can state.
  auto one = [&](const std::vector<double> &values, std::string_view what) -> Expected<double> {
    std::vector<double> d = distinct(values);
    if (d.empty())
      return makeError("the plan's program has no ", what, ", which a ", describeArchitecture(arch),
                       " model has");
    if (d.size() > 1)
      return makeError("the plan's ", what, "s differ (", d[0], " and ", d[1], "): a ",
                       describeArchitecture(arch), " config states one value for all");
    return d[0];
  };
  auto none = [&](bool present, std::string_view what) -> Error {
    if (present)
      return makeError("the plan's program has ", what, ", which a ", describeArchitecture(arch),
                       " model has not");
    return Error::success();
  };
  if (arch == Architecture::Gpt2) {
    Expected<double> eps = one(ops.layerNormEps, "layer_norm epsilon");
    if (!eps)
      return eps.takeError();
    model.normEps = *eps;
    for (Error err :
         {none(!ops.rmsNormEps.empty(), "rms_norm ops"), none(!ops.ropeTheta.empty(), "rope ops")})
      if (!err.ok())
        return err;
    if (ops.geluTanh + ops.geluExact == 0)
      return makeError("the plan's program has no gelu, which a GPT-2 model has");
    if (ops.geluTanh && ops.geluExact)
      return makeError("the plan mixes the tanh and the exact gelu; a GPT-2 config states one "
                       "activation_function");
    model.geluTanh = ops.geluTanh > 0;
  } else {
    Expected<double> eps = one(ops.rmsNormEps, "rms_norm epsilon");
    if (!eps)
      return eps.takeError();
    model.normEps = *eps;
    Expected<double> theta = one(ops.ropeTheta, "rope theta");
    if (!theta)
      return theta.takeError();
    model.ropeTheta = *theta;
    for (Error err : {none(!ops.layerNormEps.empty(), "layer_norm ops"),
                      none(ops.geluTanh + ops.geluExact > 0, "gelu ops")})
      if (!err.ok())
        return err;
  }
  if (moe) {
    // HF's Mixtral sends every token to its experts; a capacity factor drops tokens, so the
    // logits would differ. Refused rather than warned: an import is meant to reproduce them.
    if (ops.cappedDispatch)
      return makeError("the plan's dispatch has a capacity factor, which drops tokens; a ",
                       describeArchitecture(arch),
                       " model routes every token (use dispatch(..., dropless) in the .mtl)");
    if (!ops.droplessDispatch)
      return makeError("the plan's program has no dispatch, which a ", describeArchitecture(arch),
                       " model has");
    std::vector<int64_t> ks;
    for (const std::string &name : ops.topKDims) {
      std::optional<int64_t> k = plan.dimSize(name);
      if (!k)
        return makeError("the plan has no size for its topk's k dim '", name, "'");
      if (std::find(ks.begin(), ks.end(), *k) == ks.end())
        ks.push_back(*k);
    }
    if (ks.empty())
      return makeError("the plan's program has no topk, which a ", describeArchitecture(arch),
                       " model has");
    if (ks.size() > 1)
      return makeError("the plan's topk ks differ (", ks[0], " and ", ks[1], "): a ",
                       describeArchitecture(arch), " config states one num_experts_per_tok");
    dims.expertsPerToken = ks[0];
  } else {
    if (!ops.topKDims.empty() || ops.droplessDispatch + ops.cappedDispatch > 0)
      return makeError("the plan's program routes to experts (topk, dispatch), which a ",
                       describeArchitecture(arch), " model does not");
  }
  if (ops.bidirectionalAttention)
    return makeError("the plan's attention is not causal; a ", describeArchitecture(arch),
                     " model's is");
  const double scale = 1.0 / std::sqrt(static_cast<double>(dims.headDim));
  for (double s : distinct(ops.attentionScale))
    if (!sameAsFloat(s, scale))
      return makeError("the plan's attention scale is ", s, "; a ", describeArchitecture(arch),
                       " model's is 1/sqrt(head_dim) = ", scale);
  if (ops.attentionScale.empty())
    return makeError("the plan's program has no attention, which a ", describeArchitecture(arch),
                     " model has");

  // The tensors, in the order of the HF model's state dict.
  auto index = [&](std::string_view name, bool layer) {
    return byRole.at(concat(layer ? "layer:" : "", name));
  };
  auto same = [&](std::string name, std::vector<int64_t> shape,
                  std::vector<std::pair<std::string_view, int64_t>> sources, bool layer,
                  int64_t layerIndex, int64_t rows, int64_t cols) {
    TensorMap t{std::move(name), std::move(shape), {}};
    for (auto [source, ignored] : sources) {
      (void)ignored;
      t.parts.push_back(
          {index(source, layer), layer ? layerIndex : -1, PartLayout::Same, rows, cols, 0});
    }
    model.tensors.push_back(std::move(t));
  };
  auto linear = [&](std::string name, std::string_view source, int64_t layerIndex, int64_t in,
                    int64_t out, bool rope) {
    bool layer = layerIndex >= 0;
    model.tensors.push_back({std::move(name),
                             {out, in},
                             {{index(source, layer), layerIndex,
                               rope ? PartLayout::TransposedRope : PartLayout::Transposed, in, out,
                               rope ? dims.headDim : 0}}});
  };
  const int64_t D = dims.hidden, V = dims.vocab, F = dims.ffn;
  const int64_t Hd = dims.heads * dims.headDim, Kd = dims.kvHeads * dims.headDim;
  if (arch == Architecture::Gpt2) {
    same("transformer.wte.weight", {V, D}, {{"wte", 0}}, false, -1, V, D);
    same("transformer.wpe.weight", {dims.positions, D}, {{"wpe", 0}}, false, -1, dims.positions, D);
    for (int64_t l = 0; l < dims.layers; ++l) {
      std::string h = concat("transformer.h.", l, ".");
      same(h + "ln_1.weight", {D}, {{"ln1.g", 0}}, true, l, 1, D);
      same(h + "ln_1.bias", {D}, {{"ln1.b", 0}}, true, l, 1, D);
      same(h + "attn.c_attn.weight", {D, 3 * Hd}, {{"wq", 0}, {"wk", 0}, {"wv", 0}}, true, l, D,
           Hd);
      same(h + "attn.c_attn.bias", {3 * Hd}, {{"bq", 0}, {"bk", 0}, {"bv", 0}}, true, l, 1, Hd);
      same(h + "attn.c_proj.weight", {Hd, D}, {{"wo", 0}}, true, l, Hd, D);
      same(h + "attn.c_proj.bias", {D}, {{"bo", 0}}, true, l, 1, D);
      same(h + "ln_2.weight", {D}, {{"ln2.g", 0}}, true, l, 1, D);
      same(h + "ln_2.bias", {D}, {{"ln2.b", 0}}, true, l, 1, D);
      same(h + "mlp.c_fc.weight", {D, F}, {{"w1", 0}}, true, l, D, F);
      same(h + "mlp.c_fc.bias", {F}, {{"b1", 0}}, true, l, 1, F);
      same(h + "mlp.c_proj.weight", {F, D}, {{"w2", 0}}, true, l, F, D);
      same(h + "mlp.c_proj.bias", {D}, {{"b2", 0}}, true, l, 1, D);
    }
    same("transformer.ln_f.weight", {D}, {{"lnf.g", 0}}, false, -1, 1, D);
    same("transformer.ln_f.bias", {D}, {{"lnf.b", 0}}, false, -1, 1, D);
  } else {
    // Llama and Mixtral differ in the feed-forward only. Mixtral's w1/w3/w2 are [layers,
    // experts, in, out]: expert e of layer l is the [in, out] slice l * experts + e, so a
    // part's `layer` indexes that slice.
    const int64_t E = dims.experts;
    same("model.embed_tokens.weight", {V, D}, {{"embed", 0}}, false, -1, V, D);
    for (int64_t l = 0; l < dims.layers; ++l) {
      std::string h = concat("model.layers.", l, ".");
      linear(h + "self_attn.q_proj.weight", "wq", l, D, Hd, true);
      linear(h + "self_attn.k_proj.weight", "wk", l, D, Kd, true);
      linear(h + "self_attn.v_proj.weight", "wv", l, D, Kd, false);
      linear(h + "self_attn.o_proj.weight", "wo", l, Hd, D, false);
      if (moe) {
        linear(h + "block_sparse_moe.gate.weight", "router", l, D, E, false);
        for (int64_t e = 0; e < E; ++e) {
          std::string x = concat(h, "block_sparse_moe.experts.", e, ".");
          linear(x + "w1.weight", "w1", l * E + e, D, F, false);
          linear(x + "w2.weight", "w2", l * E + e, F, D, false);
          linear(x + "w3.weight", "w3", l * E + e, D, F, false);
        }
      } else {
        linear(h + "mlp.gate_proj.weight", "w1", l, D, F, false);
        linear(h + "mlp.up_proj.weight", "w3", l, D, F, false);
        linear(h + "mlp.down_proj.weight", "w2", l, F, D, false);
      }
      same(h + "input_layernorm.weight", {D}, {{"attn_norm", 0}}, true, l, 1, D);
      same(h + "post_attention_layernorm.weight", {D}, {{"ffn_norm", 0}}, true, l, 1, D);
    }
    same("model.norm.weight", {D}, {{"norm", 0}}, false, -1, 1, D);
    if (!model.tiedEmbeddings)
      linear("lm_head.weight", "lm_head", -1, D, V, false);
  }
  return model;
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

// mtc's `rope` rotates interleaved pairs, Meta's original Llama layout: within a head the
// pair (2i, 2i+1) turns by position * theta^(-2i/hd) (hd the head size):
//
//   x'[2i] = x[2i] cos - x[2i+1] sin,   x'[2i+1] = x[2i] sin + x[2i+1] cos.
//
// Hugging Face's Llama rotates halves (`rotate_half`): element i pairs with i + hd/2 at the
// same frequency theta^(-2i/hd):
//
//   y'[i] = y[i] cos - y[i+hd/2] sin,   y'[i+hd/2] = y[i+hd/2] cos + y[i] sin.
//
// So with y[i] = x[2i] and y[i + hd/2] = x[2i+1], i.e. HF element j*hd/2 + i holding plan
// element 2i + j (j in {0, 1}), the rotated vectors are the same up to that permutation of
// each head's elements. q and k are permuted alike, so every q.k and the attention are the
// same; v and o_proj are not permuted. This is exactly what transformers'
// convert_llama_weights_to_hf.py does to Meta's wq and wk:
//
//   permute(w) = w.view(n_heads, hd // 2, 2, dim).transpose(1, 2).reshape(n_heads * hd, dim)
//
// takes Meta's row h*hd + 2i + j (view index [h, i, j]) to [h, j, i] after the transpose,
// the HF row h*hd + j*hd/2 + i. Import applies its inverse (HF row -> plan row, below) and
// export the permutation itself, to the output dim of q_proj and k_proj (the plan's
// [hidden, heads, head_dim] columns) for every head, key/value heads included.
int64_t ropePlanRow(int64_t hfRow, int64_t headDim) {
  const int64_t half = headDim / 2;
  const int64_t j = hfRow / half, i = hfRow % half;
  return 2 * i + j;
}

namespace {

/// Calls f(hf index, parameter, index in that parameter) for every element of `t`.
template <class F> void forEachElement(const TensorMap &t, F &&f) {
  if (t.parts.size() == 1 && t.parts[0].layout != PartLayout::Same) {
    const TensorPart &p = t.parts[0];
    const int64_t base = p.layer < 0 ? 0 : p.layer * p.rows * p.cols;
    for (int64_t o = 0; o < p.cols; ++o) {
      int64_t col = o;
      if (p.layout == PartLayout::TransposedRope)
        col = o / p.headDim * p.headDim + ropePlanRow(o % p.headDim, p.headDim);
      for (int64_t i = 0; i < p.rows; ++i)
        f(o * p.rows + i, p.param, base + i * p.cols + col);
    }
    return;
  }
  int64_t width = 0;
  for (const TensorPart &p : t.parts)
    width += p.cols;
  const int64_t rows = t.parts.empty() ? 0 : t.parts[0].rows;
  for (int64_t a = 0; a < rows; ++a) {
    int64_t offset = 0;
    for (const TensorPart &p : t.parts) {
      const int64_t base = (p.layer < 0 ? 0 : p.layer * p.rows * p.cols) + a * p.cols;
      for (int64_t c = 0; c < p.cols; ++c)
        f(a * width + offset + c, p.param, base + c);
      offset += p.cols;
    }
  }
}

} // namespace

std::vector<float> gatherTensor(const TensorMap &t, const std::vector<std::vector<float>> &params) {
  std::vector<float> out(size_t(t.numElements()));
  forEachElement(t, [&](int64_t hf, size_t param, int64_t at) {
    out[size_t(hf)] = params[param][size_t(at)];
  });
  return out;
}

void scatterTensor(const TensorMap &t, std::span<const float> values,
                   std::vector<std::vector<float>> &params) {
  forEachElement(t, [&](int64_t hf, size_t param, int64_t at) {
    params[param][size_t(at)] = values[size_t(hf)];
  });
}

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

Error checkConfig(const JsonValue &value, const ModelMap &model, std::string_view where) {
  const JsonObject *config = value.getObject();
  if (!config)
    return makeError(where, ": a JSON ", jsonKindName(value.kind()), ", not an object");
  const Architecture arch = model.arch;
  const std::string modelName = describeArchitecture(arch);
  const JsonValue *type = config->find("model_type");
  if (!type || !type->getString())
    return makeError(where, ": no \"model_type\" string (a Hugging Face config has one)");
  if (*type->getString() != modelType(arch))
    return makeError(where, ": a config of model_type '", *type->getString(),
                     "', but the plan's model is ", modelName, ", model_type '", modelType(arch),
                     "'");
  // An integer member; absent or null: `fallback` if given, else an error.
  auto integer = [&](std::string_view key, std::optional<int64_t> fallback) -> Expected<int64_t> {
    const JsonValue *v = config->find(key);
    if (!v || v->isNull()) {
      if (fallback)
        return *fallback;
      return makeError(where, ": no \"", key, "\" (", modelName, " configs have it)");
    }
    std::optional<int64_t> i = v->getInt();
    if (!v->isInt() || !i)
      return makeError(where, ": \"", key, "\" is a ", jsonKindName(v->kind()), ", not an integer");
    return *i;
  };
  auto number = [&](const JsonObject &o, std::string_view key,
                    double fallback) -> Expected<double> {
    const JsonValue *v = o.find(key);
    if (!v || v->isNull())
      return fallback;
    std::optional<double> d = v->getNumber();
    if (!d)
      return makeError(where, ": \"", key, "\" is a ", jsonKindName(v->kind()), ", not a number");
    return *d;
  };
  auto boolean = [&](std::string_view key, bool fallback) -> Expected<bool> {
    const JsonValue *v = config->find(key);
    if (!v || v->isNull())
      return fallback;
    std::optional<bool> b = v->getBool();
    if (!b)
      return makeError(where, ": \"", key, "\" is a ", jsonKindName(v->kind()), ", not a bool");
    return *b;
  };
  auto string = [&](std::string_view key, std::string_view fallback) -> Expected<std::string> {
    const JsonValue *v = config->find(key);
    if (!v || v->isNull())
      return std::string(fallback);
    if (!v->getString())
      return makeError(where, ": \"", key, "\" is a ", jsonKindName(v->kind()), ", not a string");
    return *v->getString();
  };
  auto expect = [&](std::string_view key, std::optional<int64_t> fallback, int64_t want,
                    std::string_view plan) -> Error {
    Expected<int64_t> have = integer(key, fallback);
    if (!have)
      return have.takeError();
    if (*have != want)
      return makeError(where, ": \"", key, "\" is ", *have, " but the plan's model has ", plan,
                       " = ", want);
    return Error::success();
  };
  auto expectBool = [&](std::string_view key, bool fallback, bool want,
                        std::string_view why) -> Error {
    Expected<bool> have = boolean(key, fallback);
    if (!have)
      return have.takeError();
    if (*have != want)
      return makeError(where, ": \"", key, "\" is ", *have, ", but ", why);
    return Error::success();
  };
  auto expectEps = [&](std::string_view key, double fallback) -> Error {
    Expected<double> eps = number(*config, key, fallback);
    if (!eps)
      return eps.takeError();
    if (!sameAsFloat(*eps, model.normEps))
      return makeError(where, ": \"", key, "\" is ", *eps,
                       " but the plan's norms use eps = ", model.normEps,
                       " (set eps in the .mtl to match)");
    return Error::success();
  };
  const ModelDims &d = model.dims;
  std::vector<Error> checks;
  if (arch == Architecture::Gpt2) {
    checks.push_back(expect("vocab_size", std::nullopt, d.vocab, "vocab"));
    checks.push_back(expect("n_positions", std::nullopt, d.positions, "seq (wpe's rows)"));
    checks.push_back(expect("n_embd", std::nullopt, d.hidden, "hidden"));
    checks.push_back(expect("n_layer", std::nullopt, d.layers, "layers"));
    checks.push_back(expect("n_head", std::nullopt, d.heads, "heads"));
    checks.push_back(expect("n_inner", 4 * d.hidden, d.ffn, "ffn"));
    checks.push_back(expectEps("layer_norm_epsilon", 1e-5));
    Expected<std::string> act = string("activation_function", "gelu_new");
    if (!act)
      return act.takeError();
    bool tanh = *act == "gelu_new" || *act == "gelu_pytorch_tanh";
    if (!tanh && *act != "gelu")
      return makeError(where, ": \"activation_function\" is '", *act,
                       "'; mtc-hf maps gelu_new, gelu_pytorch_tanh (mtc's gelu) and gelu "
                       "(gelu(x, approximate = none))");
    if (tanh != model.geluTanh)
      return makeError(where, ": \"activation_function\" is '", *act, "' but the plan's gelu is ",
                       model.geluTanh ? "the tanh approximation (gelu_new)" : "exact (gelu)");
    checks.push_back(expectBool("scale_attn_weights", true, true,
                                "the plan scales attention by 1/sqrt(head_dim)"));
    checks.push_back(expectBool("scale_attn_by_inverse_layer_idx", false, false,
                                "the plan's attention scale is the same in every layer"));
    checks.push_back(
        expectBool("add_cross_attention", false, false, "the plan's model has no cross-attention"));
    checks.push_back(expectBool("tie_word_embeddings", true, true,
                                "the plan's output head is the embedding wte"));
  } else {
    checks.push_back(expect("vocab_size", std::nullopt, d.vocab, "vocab"));
    checks.push_back(expect("hidden_size", std::nullopt, d.hidden, "hidden"));
    checks.push_back(expect("num_hidden_layers", std::nullopt, d.layers, "layers"));
    checks.push_back(expect("num_attention_heads", std::nullopt, d.heads, "heads"));
    Expected<int64_t> heads = integer("num_attention_heads", std::nullopt);
    checks.push_back(expect("num_key_value_heads",
                            heads ? std::optional<int64_t>(*heads) : std::nullopt, d.kvHeads,
                            "kv_heads"));
    Expected<int64_t> hidden = integer("hidden_size", std::nullopt);
    std::optional<int64_t> headDim;
    if (hidden && heads && *heads > 0)
      headDim = *hidden / *heads;
    checks.push_back(expect("head_dim", headDim, d.headDim, "head_dim"));
    checks.push_back(expect("intermediate_size", std::nullopt, d.ffn, "ffn"));
    const bool moe = arch == Architecture::Mixtral;
    // MixtralConfig's defaults differ from LlamaConfig's: eps 1e-5, theta 1e6.
    checks.push_back(expectEps("rms_norm_eps", moe ? 1e-5 : 1e-6));
    if (moe) {
      checks.push_back(expect("num_local_experts", 8, d.experts, "experts"));
      checks.push_back(expect("num_experts_per_tok", 2, d.expertsPerToken, "topk"));
      Expected<double> jitter = number(*config, "router_jitter_noise", 0.0);
      if (!jitter)
        return jitter.takeError();
      if (*jitter != 0.0)
        return makeError(where, ": \"router_jitter_noise\" is ", *jitter,
                         "; the plan's router has no noise");
      // A sliding window no shorter than the sequence changes nothing.
      Expected<int64_t> window = integer("sliding_window", d.positions);
      if (!window)
        return window.takeError();
      if (*window < d.positions)
        return makeError(where, ": \"sliding_window\" is ", *window,
                         ", below the plan's sequence length seq = ", d.positions,
                         "; the plan's attention sees the whole sequence");
    }
    Expected<int64_t> positions = integer("max_position_embeddings", std::nullopt);
    if (!positions)
      return positions.takeError();
    if (*positions < d.positions)
      return makeError(where, ": \"max_position_embeddings\" is ", *positions,
                       ", below the plan's sequence length seq = ", d.positions);
    Expected<std::string> act = string("hidden_act", "silu");
    if (!act)
      return act.takeError();
    if (*act != "silu")
      return makeError(where, ": \"hidden_act\" is '", *act,
                       "' but the plan's feed-forward is swiglu (silu)");
    checks.push_back(
        expectBool("attention_bias", false, false, "the plan's attention has no biases"));
    checks.push_back(expectBool("mlp_bias", false, false, "the plan's feed-forward has no biases"));
    checks.push_back(expectBool("tie_word_embeddings", false, model.tiedEmbeddings,
                                model.tiedEmbeddings
                                    ? "the plan's model has no lm_head (its output is embed)"
                                    : "the plan's model has its own lm_head"));
    // Rotary embeddings: rope_theta (transformers 4) or rope_parameters (5), no scaling.
    const JsonObject *rope = config;
    if (const JsonValue *p = config->find("rope_parameters"); p && !p->isNull()) {
      if (!p->getObject())
        return makeError(where, ": \"rope_parameters\" is a ", jsonKindName(p->kind()),
                         ", not an object");
      rope = p->getObject();
    }
    Expected<double> theta =
        number(*rope, "rope_theta", arch == Architecture::Mixtral ? 1e6 : 10000.0);
    if (!theta)
      return theta.takeError();
    if (!sameAsFloat(*theta, model.ropeTheta))
      return makeError(where, ": \"rope_theta\" is ", *theta,
                       " but the plan's rope has theta = ", model.ropeTheta);
    for (const JsonObject *o : {config, rope})
      for (std::string_view key : {"rope_scaling", "rope_type", "type"}) {
        const JsonValue *v = o->find(key);
        if (!v || v->isNull() || (o == config && key != "rope_scaling"))
          continue;
        const JsonValue *kind = v;
        if (const JsonObject *scaling = v->getObject()) {
          kind = scaling->find("rope_type");
          if (!kind)
            kind = scaling->find("type");
        }
        if (!kind || !kind->getString() || *kind->getString() != "default")
          return makeError(where, ": \"", key, "\" asks for a rotary scaling ",
                           kind && kind->getString() ? concat("'", *kind->getString(), "'")
                                                     : std::string("mtc-hf cannot read"),
                           "; mtc's rope has none");
      }
  }
  for (Error &err : checks)
    if (!err.ok())
      return std::move(err);
  return Error::success();
}

JsonValue makeConfig(const ModelMap &model, std::string_view dtype) {
  const ModelDims &d = model.dims;
  JsonObject c;
  c.insert("architectures", JsonArray{JsonValue(architectureName(model.arch))});
  c.insert("model_type", JsonValue(modelType(model.arch)));
  if (model.arch == Architecture::Gpt2) {
    c.insert("vocab_size", d.vocab);
    c.insert("n_positions", d.positions);
    c.insert("n_ctx", d.positions);
    c.insert("n_embd", d.hidden);
    c.insert("n_layer", d.layers);
    c.insert("n_head", d.heads);
    c.insert("n_inner", d.ffn);
    c.insert("activation_function", model.geluTanh ? "gelu_new" : "gelu");
    c.insert("layer_norm_epsilon", model.normEps);
    // Dropout is a training setting of the plan, not part of the weights.
    c.insert("resid_pdrop", 0.0);
    c.insert("embd_pdrop", 0.0);
    c.insert("attn_pdrop", 0.0);
    c.insert("scale_attn_weights", true);
    c.insert("scale_attn_by_inverse_layer_idx", false);
    c.insert("reorder_and_upcast_attn", false);
    c.insert("initializer_range", 0.02);
  } else {
    c.insert("vocab_size", d.vocab);
    c.insert("hidden_size", d.hidden);
    c.insert("intermediate_size", d.ffn);
    c.insert("num_hidden_layers", d.layers);
    c.insert("num_attention_heads", d.heads);
    c.insert("num_key_value_heads", d.kvHeads);
    c.insert("head_dim", d.headDim);
    c.insert("max_position_embeddings", d.positions);
    c.insert("rms_norm_eps", model.normEps);
    c.insert("rope_theta", model.ropeTheta);
    c.insert("rope_scaling", nullptr);
    c.insert("hidden_act", "silu");
    c.insert("attention_dropout", 0.0);
    if (model.arch == Architecture::Mixtral) {
      c.insert("num_local_experts", d.experts);
      c.insert("num_experts_per_tok", d.expertsPerToken);
      c.insert("router_jitter_noise", 0.0);
      c.insert("sliding_window", nullptr);
      c.insert("output_router_logits", false);
    } else {
      c.insert("attention_bias", false);
      c.insert("mlp_bias", false);
      c.insert("pretraining_tp", 1);
    }
    c.insert("initializer_range", 0.02);
  }
  c.insert("tie_word_embeddings", model.tiedEmbeddings);
  c.insert("torch_dtype", std::string(dtype));
  return c;
}

//===----------------------------------------------------------------------===//
// Directories
//===----------------------------------------------------------------------===//

namespace {

constexpr std::string_view kConfigName = "config.json";
constexpr std::string_view kWeightsName = "model.safetensors";
constexpr std::string_view kIndexName = "model.safetensors.index.json";

/// Whether `path` exists (stat: a link counts as what it points to).
bool pathExists(const std::filesystem::path &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// The tensors of an HF directory: the single file or every shard of the index.
struct HfWeights {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<std::string> fileNames;
  struct Entry {
    const SafetensorsFile *file = nullptr;
    const SafetensorsFile::Tensor *tensor = nullptr;
    size_t fileIndex = 0;
  };
  std::map<std::string, Entry, std::less<>> tensors;
};

Expected<HfWeights> readWeights(const std::filesystem::path &dir) {
  HfWeights w;
  auto addFile = [&](const std::filesystem::path &path,
                     std::string name) -> Expected<const SafetensorsFile *> {
    Expected<SafetensorsFile> file = SafetensorsFile::read(path);
    if (!file)
      return file.takeError();
    w.files.push_back(std::make_unique<SafetensorsFile>(std::move(*file)));
    w.fileNames.push_back(std::move(name));
    return w.files.back().get();
  };
  const std::filesystem::path single = dir / kWeightsName, index = dir / kIndexName;
  if (pathExists(single)) {
    Expected<const SafetensorsFile *> file = addFile(single, std::string(kWeightsName));
    if (!file)
      return file.takeError();
    for (const SafetensorsFile::Tensor &t : (*file)->tensors())
      w.tensors[t.name] = {*file, &t, 0};
    return w;
  }
  if (!pathExists(index))
    return makeError(dir, ": no ", kWeightsName, " and no ", kIndexName,
                     " (mtc-hf reads safetensors checkpoints; a pytorch_model.bin is not read)");
  Expected<std::string> text = readInputFile(index);
  if (!text)
    return text.takeError();
  std::string where = index.string();
  Expected<JsonValue> json = parseJson(*text);
  if (!json)
    return json.takeError().withContext(where);
  const JsonObject *root = json->getObject();
  const JsonValue *mapValue = root ? root->find("weight_map") : nullptr;
  const JsonObject *map = mapValue ? mapValue->getObject() : nullptr;
  if (!map)
    return makeError(where, ": no \"weight_map\" object");
  // shard name -> the tensors the map puts there
  std::map<std::string, std::set<std::string>, std::less<>> shards;
  for (const auto &[name, shard] : *map) {
    const std::string *file = shard.getString();
    if (!file)
      return makeError(where, ": weight_map[\"", name, "\"] is a ", jsonKindName(shard.kind()),
                       ", not a file name");
    if (file->empty() || file->find('/') != std::string::npos || *file == "." || *file == "..")
      return makeError(where, ": weight_map[\"", name, "\"] names '", *file,
                       "', not a file of the directory");
    shards[*file].insert(name);
  }
  for (const auto &[shard, names] : shards) {
    Expected<const SafetensorsFile *> file = addFile(dir / shard, shard);
    if (!file)
      return file.takeError();
    for (const SafetensorsFile::Tensor &t : (*file)->tensors()) {
      if (!names.count(t.name))
        return makeError(dir / shard, ": tensor '", t.name, "' is not where ", kIndexName,
                         " puts it (an extra tensor, or a stale shard)");
      w.tensors[t.name] = {*file, &t, w.files.size() - 1};
    }
    for (const std::string &name : names)
      if (!(*file)->find(name))
        return makeError(dir / shard, ": no tensor '", name, "', which ", kIndexName,
                         " puts in it");
  }
  return w;
}

/// HF tensors that transformers itself does not load into these models: GPT-2's attention
/// mask buffers (old checkpoints saved them) and old Llama checkpoints' inv_freq.
bool isBuffer(Architecture arch, std::string_view name) {
  if (arch == Architecture::Gpt2)
    return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
  return name.ends_with(".rotary_emb.inv_freq");
}

} // namespace

Expected<TrainingState> importDirectory(const std::filesystem::path &dir, const Plan &plan,
                                        const ModelMap &model, ImportSummary *summary) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return makeError(dir, ": no such Hugging Face model directory");
  if (!S_ISDIR(st.st_mode))
    return makeError(dir, " is ", describeFileType(st.st_mode),
                     ", not a Hugging Face model directory");
  const std::filesystem::path configPath = dir / kConfigName;
  Expected<std::string> configText = readInputFile(configPath);
  if (!configText)
    return configText.takeError();
  Expected<JsonValue> config = parseJson(*configText);
  if (!config)
    return config.takeError().withContext(concat(configPath.string(), ": not JSON"));
  if (Error err = checkConfig(*config, model, configPath.string()); !err.ok())
    return err;
  Expected<HfWeights> weights = readWeights(dir);
  if (!weights)
    return weights.takeError();

  // The plan's parameters at their real vocabulary size.
  std::vector<std::vector<float>> params;
  try {
    for (const ParamInfo &p : plan.params) {
      int64_t n = 1;
      for (int64_t s : realShape(plan, p.dims))
        n *= s;
      params.emplace_back(size_t(n), 0.0f);
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the parameters");
  }
  std::set<std::string, std::less<>> used;
  std::set<std::string> dtypes;
  // GPT-2 checkpoints saved from GPT2Model (the original ones) lack the "transformer." prefix.
  auto lookup = [&](std::string_view name) -> const HfWeights::Entry * {
    if (auto it = weights->tensors.find(name); it != weights->tensors.end())
      return &it->second;
    if (model.arch == Architecture::Gpt2 && name.starts_with("transformer."))
      if (auto it = weights->tensors.find(name.substr(12)); it != weights->tensors.end())
        return &it->second;
    return nullptr;
  };
  auto readTensor = [&](const HfWeights::Entry &e,
                        const std::vector<int64_t> &shape) -> Expected<std::vector<float>> {
    const SafetensorsFile::Tensor &t = *e.tensor;
    std::string where = (dir / weights->fileNames[e.fileIndex]).string();
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      return makeError(where, ": tensor '", t.name, "' is ", dtypeName(t.dtype),
                       "; mtc-hf imports F32, F16 and BF16 tensors");
    if (t.shape != shape)
      return makeError(where, ": tensor '", t.name, "' is ", formatShape(t.shape),
                       " but the plan's ", describeArchitecture(model.arch), " model has ",
                       formatShape(shape));
    dtypes.insert(std::string(dtypeName(t.dtype)));
    return e.file->toFloat32(t);
  };
  for (const TensorMap &t : model.tensors) {
    const HfWeights::Entry *e = lookup(t.name);
    if (!e)
      return makeError(dir, ": no tensor '", t.name, "', which the plan's ",
                       describeArchitecture(model.arch), " model needs");
    Expected<std::vector<float>> values = readTensor(*e, t.shape);
    if (!values)
      return values.takeError();
    scatterTensor(t, *values, params);
    used.insert(e->tensor->name);
  }
  // What is left: buffers, a tied output head equal to the embedding, or an error.
  int64_t ignored = 0;
  for (const auto &[name, e] : weights->tensors) {
    if (used.count(name))
      continue;
    if (isBuffer(model.arch, name)) {
      ++ignored;
      continue;
    }
    if (name == "lm_head.weight" && model.tiedEmbeddings) {
      const TensorMap &embedding = model.tensors[0];
      Expected<std::vector<float>> head = readTensor(e, embedding.shape);
      if (!head)
        return head.takeError();
      if (*head != gatherTensor(embedding, params))
        return makeError(dir, ": lm_head.weight differs from the embedding ", embedding.name,
                         ", but the plan's output head is the embedding (tied)");
      ++ignored;
      continue;
    }
    return makeError(dir / weights->fileNames[e.fileIndex], ": tensor '", name,
                     "' maps to no parameter of the plan's ", describeArchitecture(model.arch),
                     " model (an extra tensor)");
  }
  if (summary) {
    summary->tensors = static_cast<int64_t>(model.tensors.size());
    summary->files = static_cast<int64_t>(weights->files.size());
    summary->ignored = ignored;
    summary->dtypes.assign(dtypes.begin(), dtypes.end());
  }

  TrainingState state;
  state.step = 0;
  try {
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const ParamInfo &p = plan.params[i];
      std::vector<float> values =
          plan.vocabularyPadded() ? padVocabulary(plan, p.dims, params[i]) : std::move(params[i]);
      state.params.push_back({p.name, dimSizes(p.dims), std::move(values)});
    }
    for (const StateInfo &s : plan.states)
      state.states.push_back(
          {s.name, dimSizes(s.dims), std::vector<float>(size_t(s.numElements()), 0.0f)});
  } catch (const std::bad_alloc &) {
    return makeError("out of memory building the checkpoint");
  }
  return state;
}

Error exportDirectory(const std::filesystem::path &dir, const Plan &plan, const ModelMap &model,
                      const TrainingState &whole, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    return makeError("mtc-hf exports F32 or BF16 tensors, not ", dtypeName(dtype));
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return makeError(dir, " is ", describeFileType(st.st_mode), ", not a directory");
    std::error_code ec;
    if (!std::filesystem::is_empty(dir, ec) || ec)
      return makeError(dir, " exists and is not empty: mtc-hf export writes a new directory");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return makeError(dir, ": cannot create the directory: ", ec);

  TrainingState real = withRealVocabulary(plan, whole);
  std::vector<std::vector<float>> params;
  for (TrainingState::Tensor &t : real.params)
    params.push_back(std::move(t.values));
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<BFloat16>> bf16;
  std::vector<TensorRef> refs;
  try {
    for (const TensorMap &t : model.tensors) {
      std::vector<float> values = gatherTensor(t, params);
      if (dtype == DType::BF16) {
        std::vector<BFloat16> b(values.size());
        std::transform(values.begin(), values.end(), b.begin(), floatToBf16);
        bf16.push_back(std::move(b));
      } else {
        f32.push_back(std::move(values));
      }
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory gathering the tensors");
  }
  for (size_t i = 0; i < model.tensors.size(); ++i)
    refs.push_back(dtype == DType::BF16
                       ? makeTensorRef(model.tensors[i].name, model.tensors[i].shape, bf16[i])
                       : makeTensorRef(model.tensors[i].name, model.tensors[i].shape, f32[i]));
  // transformers reads the "format" metadata of a safetensors checkpoint.
  if (Error err = writeSafetensors(dir / kWeightsName, refs, {{"format", "pt"}}); !err.ok())
    return err;
  std::string config =
      makeConfig(model, dtype == DType::BF16 ? "bfloat16" : "float32").serialize(2) + "\n";
  return writeFileAtomically(dir / kConfigName, config);
}

} // namespace mtc::rt::hf
