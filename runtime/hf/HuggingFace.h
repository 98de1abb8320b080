//===- HuggingFace.h - Hugging Face checkpoints in and out ------*- C++ -*-===//
//
// `mtc-hf import` and `mtc-hf export` (docs/user-guide.md, "Hugging Face checkpoints"):
// a Hugging Face model directory (config.json, model.safetensors or the sharded
// model.safetensors.index.json and its shards) read into a plan's parameter table, and a
// checkpoint's parameters written back as such a directory that `transformers` loads with
// `from_pretrained`.
//
// The model is recognised from the plan's parameter table (names and shapes): GPT-2
// (`GPT2LMHeadModel`: wte, wpe, lnf.*, one layer of ln1.*, wq/wk/wv, bq/bk/bv, wo, bo, ln2.*,
// w1, b1, w2, b2) or Llama (`LlamaForCausalLM`: embed, norm, lm_head (absent: tied to
// embed), one layer of attn_norm, wq, wk, wv, wo, ffn_norm, w1 (gate), w3 (up), w2 (down))
// or Mixtral (`MixtralForCausalLM`: Llama's parameters plus a layer `router` [hidden, experts],
// with w1, w3, w2 stacked per expert [experts, ...]; its dispatch must be dropless, as HF's is).
// The op attributes a Hugging Face config also fixes (norm epsilon, rotary theta, the GELU
// form, the attention scale) are read from the plan's program.mlir (readPlanOps) and checked
// against config.json, never assumed.
//
// Every Hugging Face tensor is a block of the plan's parameters (TensorMap): the parameter's
// layer slice as it is, transposed (nn.Linear stores [out, in], mtc [in, out]), transposed
// with the rotary permutation (Llama's q_proj and k_proj, see RopePermutation below), or
// several slices side by side along the last dim (GPT-2's c_attn: q | k | v). The maps copy
// values and never compute with them, so import then export gives back every f32 tensor
// bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_HF_HUGGINGFACE_H
#define MTC_RUNTIME_HF_HUGGINGFACE_H

#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"
#include "runtime/support/Safetensors.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt::hf {

//===----------------------------------------------------------------------===//
// What the plan's program records
//===----------------------------------------------------------------------===//

/// The attributes of the ops of program.mlir that a Hugging Face config fixes too, each
/// value as often as it occurs (defaults filled in where the printer elides them:
/// layer_norm eps 1e-5, rms_norm eps 1e-6, rope theta 10000; docs/dsl.md).
struct PlanOps {
  std::vector<double> layerNormEps, rmsNormEps, ropeTheta, attentionScale;
  /// The dim name of every topk op's k (its size is the plan's); dispatches without a
  /// capacity factor (dropless) and with one.
  std::vector<std::string> topKDims;
  int64_t droplessDispatch = 0, cappedDispatch = 0;
  int64_t geluTanh = 0, geluExact = 0;
  int64_t causalAttention = 0, bidirectionalAttention = 0;
};

/// Scans the text of a program.mlir (the `mt` ops printed by mtc). `where` names it in errors.
Expected<PlanOps> scanPlanOps(std::string_view program, std::string_view where);
/// scanPlanOps of the plan's program.mlir (listed and verified in its MANIFEST).
Expected<PlanOps> readPlanOps(const Plan &plan);

//===----------------------------------------------------------------------===//
// The model and its tensors
//===----------------------------------------------------------------------===//

enum class Architecture { Gpt2, Llama, Mixtral };

/// "GPT2LMHeadModel", "LlamaForCausalLM", "MixtralForCausalLM".
std::string_view architectureName(Architecture arch);
/// config.json's model_type: "gpt2", "llama", "mixtral".
std::string_view modelType(Architecture arch);

/// The sizes a Hugging Face config states, as the plan has them (the vocabulary real).
struct ModelDims {
  int64_t vocab = 0, hidden = 0, heads = 0, kvHeads = 0, headDim = 0, ffn = 0, layers = 0;
  /// Mixtral: the experts per layer (the router's columns) and the experts per token (top-k).
  int64_t experts = 0, expertsPerToken = 0;
  /// GPT-2: the rows of wpe (n_positions). Llama: the plan's sequence length, at most
  /// max_position_embeddings (rotary embeddings have no table).
  int64_t positions = 0;
};

/// How one block of an HF tensor is laid out in a plan parameter.
enum class PartLayout {
  /// The slice viewed as [rows, cols] is the HF block as it is.
  Same,
  /// The HF tensor is the slice's [rows, cols] transposed: [cols, rows] (nn.Linear).
  Transposed,
  /// Transposed, and the HF rows of each head in Hugging Face's rotary order (below).
  TransposedRope,
};

/// One block of an HF tensor: layer `layer` (or the whole parameter, -1) of plan parameter
/// `param`, viewed as a row-major [rows, cols] matrix.
struct TensorPart {
  size_t param = 0;
  int64_t layer = -1;
  PartLayout layout = PartLayout::Same;
  int64_t rows = 0, cols = 0;
  int64_t headDim = 0; // TransposedRope: the head size (cols = heads x headDim)
};

/// An HF tensor: Transposed and TransposedRope tensors have one part; Same parts sit side by
/// side along the last dim (every part has the same rows).
struct TensorMap {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<TensorPart> parts;

  int64_t numElements() const;
};

/// A plan recognised as a Hugging Face architecture, with its tensors.
struct ModelMap {
  Architecture arch = Architecture::Gpt2;
  ModelDims dims;
  /// The plan's norm epsilon (layer_norm for GPT-2, rms_norm for Llama), rope theta (Llama),
  /// whether its GELU is the tanh form (GPT-2), and whether the output head is the embedding.
  double normEps = 0, ropeTheta = 0;
  bool geluTanh = true;
  bool tiedEmbeddings = false;
  /// Every HF tensor, in the order of the HF model's state dict.
  std::vector<TensorMap> tensors;
};

/// Recognises the plan's model and checks `ops` against it. Errors name the first parameter
/// that maps to no HF tensor, a parameter the architecture needs that the plan lacks, a
/// parameter of the wrong shape, or an op attribute HF cannot express.
Expected<ModelMap> mapModel(const Plan &plan, const PlanOps &ops);

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

/// The rotary permutation within one head of `headDim` rows (even): the plan row that HF
/// row `hfRow` holds. See the derivation in HuggingFace.cpp.
int64_t ropePlanRow(int64_t hfRow, int64_t headDim);

/// The HF tensor `t` gathered from `params` (real shapes, plan order).
std::vector<float> gatherTensor(const TensorMap &t, const std::vector<std::vector<float>> &params);
/// The inverse: scatters `values` (t.numElements()) into `params`.
void scatterTensor(const TensorMap &t, std::span<const float> values,
                   std::vector<std::vector<float>> &params);

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

/// Checks config.json (parsed) against the plan's model; `where` names the file in errors.
Error checkConfig(const JsonValue &config, const ModelMap &model, std::string_view where);
/// The config.json of the model, its weights stored as `dtype` ("float32", "bfloat16").
JsonValue makeConfig(const ModelMap &model, std::string_view dtype);

//===----------------------------------------------------------------------===//
// Directories
//===----------------------------------------------------------------------===//

/// What import read, for the summary line.
struct ImportSummary {
  int64_t tensors = 0, files = 0, ignored = 0;
  std::vector<std::string> dtypes; // distinct, as read ("F32", "BF16")
};

/// Reads the HF model directory `dir` for the plan: config.json checked, every tensor of
/// `model` read (F32, F16 or BF16; converted to f32), none missing, none left over except
/// buffers HF itself does not load and a tied lm_head equal to the embedding. Returns the
/// step-0 state: the parameters (padded as the plan computes them), zero optimizer states.
Expected<TrainingState> importDirectory(const std::filesystem::path &dir, const Plan &plan,
                                        const ModelMap &model, ImportSummary *summary = nullptr);

/// Writes `state` (whole tensors, as loadCheckpoint returns them) as the HF model directory
/// `dir` (refused if it exists and is not an empty directory): config.json and
/// model.safetensors with the tensors stored as `dtype` (F32 or BF16).
Error exportDirectory(const std::filesystem::path &dir, const Plan &plan, const ModelMap &model,
                      const TrainingState &state, DType dtype);

} // namespace mtc::rt::hf

#endif // MTC_RUNTIME_HF_HUGGINGFACE_H
