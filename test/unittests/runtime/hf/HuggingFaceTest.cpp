//===- HuggingFaceTest.cpp - The Hugging Face maps ------------------------===//

#include "runtime/hf/HuggingFace.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace mtc::rt;
using namespace mtc::rt::hf;

namespace {

// transformers' convert_llama_weights_to_hf.py permute() on row indices: Meta's rows of one
// head viewed as [hd/2, 2], transposed to [2, hd/2]: HF row r holds Meta row perm[r].
std::vector<int64_t> hfPermute(int64_t hd) {
  std::vector<int64_t> perm;
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < hd / 2; ++i)
      perm.push_back(2 * i + j);
  return perm;
}

TEST(HuggingFaceTest, RopePermutationIsTransformersPermute) {
  for (int64_t hd : {2, 8, 16, 128}) {
    std::vector<int64_t> perm = hfPermute(hd);
    std::vector<bool> seen(size_t(hd), false);
    for (int64_t r = 0; r < hd; ++r) {
      EXPECT_EQ(ropePlanRow(r, hd), perm[size_t(r)]) << "hd " << hd << " row " << r;
      seen[size_t(ropePlanRow(r, hd))] = true;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), hd); // a permutation
  }
  // hd = 8: HF rows 0..3 are the plan's even rows, 4..7 its odd ones.
  EXPECT_EQ(ropePlanRow(0, 8), 0);
  EXPECT_EQ(ropePlanRow(3, 8), 6);
  EXPECT_EQ(ropePlanRow(4, 8), 1);
  EXPECT_EQ(ropePlanRow(7, 8), 7);
}

TEST(HuggingFaceTest, ScansOpAttributes) {
  Expected<PlanOps> ops = scanPlanOps(
      "    %9 = mt.rms_norm %arg0, %0 over hidden {epsilon = 1.000000e-05 : f64} : <[h=4]>\n"
      "    %10 = mt.rms_norm %arg0, %0 over hidden : <[h=4]>\n"
      "    %11 = mt.rope %10 over head_dim position seq {theta = 5.000000e+05 : f64} : <>\n"
      "    %12 = mt.rope %10 over head_dim position seq : <>\n"
      "    %13 = mt.layer_norm %a, %b, %c over hidden {epsilon = 0x3EB0C6F7A0B5ED8D : f64} : <>\n"
      "    %14 = mt.gelu %30 approximate : <[ffn=256], f32>\n"
      "    %15 = mt.gelu %30 : <[ffn=256], f32>\n"
      "    %16 = mt.attention %1, %2, %3 dims(seq, heads, heads, head_dim) causal scale "
      "2.500000e-01 : <>\n"
      "    %17 = mt.attention_grad %1 : <>\n",
      "p");
  ASSERT_TRUE(ops.ok()) << ops.error().message();
  EXPECT_EQ(ops->rmsNormEps, (std::vector<double>{1e-5, 1e-6}));
  EXPECT_EQ(ops->ropeTheta, (std::vector<double>{5e5, 1e4}));
  EXPECT_EQ(ops->layerNormEps, (std::vector<double>{1e-6}));
  EXPECT_EQ(ops->geluTanh, 1);
  EXPECT_EQ(ops->geluExact, 1);
  EXPECT_EQ(ops->attentionScale, (std::vector<double>{0.25}));
  EXPECT_EQ(ops->causalAttention, 1);
  EXPECT_EQ(ops->bidirectionalAttention, 0);

  Expected<PlanOps> bad =
      scanPlanOps("  %1 = mt.attention %1, %2, %3 causal scale oops : <>\n", "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "p:1: cannot read the scale of this mt.attention");
}

ParamInfo param(std::string name, std::vector<Dim> dims, bool layer) {
  ParamInfo p;
  p.name = layer ? "block." + name : name;
  if (layer) {
    p.layer = "block";
    p.instances = 2;
    dims.insert(dims.begin(), Dim{"layers", 2});
  }
  p.dims = std::move(dims);
  return p;
}

/// A small Llama plan's parameter table (vocab 16, hidden 8, 2 heads of 4, 1 kv head, ffn 12).
Plan llamaPlan() {
  Plan plan;
  plan.model = "llama";
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = 16;
  Dim V{"vocab", 16}, D{"hidden", 8}, H{"heads", 2}, K{"kv_heads", 1}, d{"head_dim", 4},
      F{"ffn", 12};
  plan.dims = {V, D, H, K, d, F, Dim{"seq", 8}};
  plan.params = {
      param("embed", {V, D}, false), param("norm", {D}, false),    param("lm_head", {D, V}, false),
      param("attn_norm", {D}, true), param("wq", {D, H, d}, true), param("wk", {D, K, d}, true),
      param("wv", {D, K, d}, true),  param("wo", {H, d, D}, true), param("ffn_norm", {D}, true),
      param("w1", {D, F}, true),     param("w3", {D, F}, true),    param("w2", {F, D}, true)};
  return plan;
}

PlanOps llamaOps() {
  PlanOps ops;
  ops.rmsNormEps = {1e-6, 1e-6};
  ops.ropeTheta = {1e4};
  ops.attentionScale = {0.5};
  ops.causalAttention = 1;
  return ops;
}

TEST(HuggingFaceTest, MapsLlamaAndRoundTrips) {
  Plan plan = llamaPlan();
  Expected<ModelMap> model = mapModel(plan, llamaOps());
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_EQ(model->arch, Architecture::Llama);
  EXPECT_EQ(model->dims.kvHeads, 1);
  EXPECT_FALSE(model->tiedEmbeddings);
  EXPECT_EQ(model->tensors.size(), 1u + 2 * 9 + 2);
  // Distinct values everywhere; gather then scatter gives them back, and q_proj's row
  // h*4 + j*2 + i is the plan's column (h, 2i + j).
  std::vector<std::vector<float>> params;
  float next = 0;
  for (const ParamInfo &p : plan.params) {
    params.emplace_back(size_t(p.numElements()));
    for (float &v : params.back())
      v = next++;
  }
  std::vector<std::vector<float>> back;
  for (const std::vector<float> &p : params)
    back.emplace_back(p.size(), -1.0f);
  for (const TensorMap &t : model->tensors)
    scatterTensor(t, gatherTensor(t, params), back);
  EXPECT_EQ(back, params);
  const TensorMap &q = model->tensors[1];
  ASSERT_EQ(q.name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{8, 8}));
  std::vector<float> hf = gatherTensor(q, params);
  const std::vector<float> &wq = params[4]; // [layers, hidden, heads, head_dim]
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t c = 0; c < 8; ++c)
          EXPECT_EQ(hf[size_t((h * 4 + j * 2 + i) * 8 + c)], wq[size_t(c * 8 + h * 4 + 2 * i + j)]);
}

TEST(HuggingFaceTest, RefusesWhatDoesNotMap) {
  Plan plan = llamaPlan();
  plan.params.push_back(param("gate_bias", {Dim{"hidden", 8}}, true));
  Expected<ModelMap> extra = mapModel(plan, llamaOps());
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.error().message(),
            "parameter 'block.gate_bias' [layers=2, hidden=8] of the plan's model maps "
            "to no tensor of a Hugging Face Llama (LlamaForCausalLM) model");

  plan = llamaPlan();
  plan.params[7].dims[2].size = 5; // wo[layers, heads, head_dim = 5, hidden]
  Expected<ModelMap> shape = mapModel(plan, llamaOps());
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.error().message(),
            "parameter 'block.wo' is [2, 2, 5, 8] [layers=2, heads=2, head_dim=5, hidden=8] but "
            "a Llama (LlamaForCausalLM) model of the plan's sizes has [2, 2, 4, 8]");

  PlanOps ops = llamaOps();
  ops.rmsNormEps = {1e-6, 1e-5};
  Expected<ModelMap> eps = mapModel(llamaPlan(), ops);
  ASSERT_FALSE(eps.ok());
  EXPECT_EQ(eps.error().message(), "the plan's rms_norm epsilons differ (1e-06 and 1e-05): a "
                                   "Llama (LlamaForCausalLM) config states one value for all");

  ops = llamaOps();
  ops.attentionScale = {0.125};
  Expected<ModelMap> scale = mapModel(llamaPlan(), ops);
  ASSERT_FALSE(scale.ok());
  EXPECT_EQ(scale.error().message(), "the plan's attention scale is 0.125; a Llama "
                                     "(LlamaForCausalLM) model's is 1/sqrt(head_dim) = 0.5");

  Plan other;
  other.model = "m";
  other.params = {param("w", {Dim{"hidden", 8}}, false)};
  Expected<ModelMap> unknown = mapModel(other, llamaOps());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message(),
            "the plan's model 'm' is neither GPT-2 nor Llama to mtc-hf: its parameter 'w' "
            "[hidden=8] maps to no Hugging Face tensor (a GPT-2 model has 'wte', a Llama model "
            "'embed')");
}

TEST(HuggingFaceTest, ChecksConfig) {
  Expected<ModelMap> model = mapModel(llamaPlan(), llamaOps());
  ASSERT_TRUE(model.ok());
  JsonValue config = makeConfig(*model, "float32");
  EXPECT_TRUE(checkConfig(config, *model, "c").ok());
  config.getObject()->set("rms_norm_eps", 1e-5);
  Error eps = checkConfig(config, *model, "c");
  ASSERT_FALSE(eps.ok());
  EXPECT_EQ(eps.message(), "c: \"rms_norm_eps\" is 1e-05 but the plan's norms use eps = 1e-06 "
                           "(set eps in the .mtl to match)");
  // transformers 5 puts rope_theta in rope_parameters.
  config = makeConfig(*model, "float32");
  config.getObject()->erase("rope_theta");
  config.getObject()->set("rope_parameters",
                          JsonObject{{"rope_type", "default"}, {"rope_theta", 20000.0}});
  Error theta = checkConfig(config, *model, "c");
  ASSERT_FALSE(theta.ok());
  EXPECT_EQ(theta.message(), "c: \"rope_theta\" is 20000 but the plan's rope has theta = 10000");
}

/// A small Mixtral plan (vocab 16, hidden 8, 2 heads of 4, 1 kv head, 4 experts of ffn 6,
/// top 2), 2 layers.
Plan mixtralPlan() {
  Plan plan;
  plan.model = "mixtral";
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = 16;
  Dim V{"vocab", 16}, D{"hidden", 8}, H{"heads", 2}, K{"kv_heads", 1}, d{"head_dim", 4},
      F{"ffn", 6}, E{"experts", 4};
  plan.dims = {V, D, H, K, d, F, E, Dim{"topk", 2}, Dim{"seq", 8}};
  plan.params = {
      param("embed", {V, D}, false),   param("norm", {D}, false),
      param("lm_head", {D, V}, false), param("attn_norm", {D}, true),
      param("wq", {D, H, d}, true),    param("wk", {D, K, d}, true),
      param("wv", {D, K, d}, true),    param("wo", {H, d, D}, true),
      param("ffn_norm", {D}, true),    param("router", {D, E}, true),
      param("w1", {E, D, F}, true),    param("w3", {E, D, F}, true),
      param("w2", {E, F, D}, true)};
  return plan;
}

PlanOps mixtralOps() {
  PlanOps ops;
  ops.rmsNormEps = {1e-5, 1e-5};
  ops.ropeTheta = {1e6};
  ops.attentionScale = {0.5};
  ops.causalAttention = 1;
  ops.topKDims = {"topk"};
  ops.droplessDispatch = 1;
  return ops;
}

TEST(HuggingFaceTest, ScansRouting) {
  Expected<PlanOps> ops = scanPlanOps(
      "  %w, %i = mt.topk %l over expert k topk : <>\n"
      "  %d = mt.dispatch %x, %i k topk to expert capacity cap dropless : <>\n"
      "  %e = mt.dispatch %x, %i k topk to expert capacity cap factor 1.250000e+00 : <>\n",
      "p");
  ASSERT_TRUE(ops.ok()) << ops.error().message();
  EXPECT_EQ(ops->topKDims, (std::vector<std::string>{"topk"}));
  EXPECT_EQ(ops->droplessDispatch, 1);
  EXPECT_EQ(ops->cappedDispatch, 1);
}

TEST(HuggingFaceTest, MapsMixtralAndRoundTrips) {
  Plan plan = mixtralPlan();
  Expected<ModelMap> model = mapModel(plan, mixtralOps());
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_EQ(model->arch, Architecture::Mixtral);
  EXPECT_EQ(model->dims.experts, 4);
  EXPECT_EQ(model->dims.expertsPerToken, 2);
  EXPECT_EQ(model->dims.ffn, 6);
  // embed, per layer 4 attention + gate + 3 x 4 experts + 2 norms, norm, lm_head.
  EXPECT_EQ(model->tensors.size(), 1u + 2 * (4 + 1 + 12 + 2) + 2);
  std::vector<std::vector<float>> params;
  float next = 0;
  for (const ParamInfo &p : plan.params) {
    params.emplace_back(size_t(p.numElements()));
    for (float &v : params.back())
      v = next++;
  }
  std::vector<std::vector<float>> back;
  for (const std::vector<float> &p : params)
    back.emplace_back(p.size(), -1.0f);
  for (const TensorMap &t : model->tensors)
    scatterTensor(t, gatherTensor(t, params), back);
  EXPECT_EQ(back, params);
  // Layer 1: gate is router[1] transposed ([experts, hidden]); expert 2's w1 is w1[1][2]
  // ([hidden, ffn]) transposed to [ffn, hidden], its w2 w2[1][2] transposed to [hidden, ffn].
  auto find = [&](std::string_view name) -> const TensorMap * {
    for (const TensorMap &t : model->tensors)
      if (t.name == name)
        return &t;
    return nullptr;
  };
  const TensorMap *gate = find("model.layers.1.block_sparse_moe.gate.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{4, 8}));
  std::vector<float> g = gatherTensor(*gate, params);
  for (int64_t e = 0; e < 4; ++e)
    for (int64_t h = 0; h < 8; ++h)
      EXPECT_EQ(g[size_t(e * 8 + h)], params[9][size_t(1 * 32 + h * 4 + e)]);
  const TensorMap *w1 = find("model.layers.1.block_sparse_moe.experts.2.w1.weight");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->shape, (std::vector<int64_t>{6, 8}));
  std::vector<float> a = gatherTensor(*w1, params);
  for (int64_t f = 0; f < 6; ++f)
    for (int64_t h = 0; h < 8; ++h)
      EXPECT_EQ(a[size_t(f * 8 + h)], params[10][size_t((1 * 4 + 2) * 48 + h * 6 + f)]);
  const TensorMap *w2 = find("model.layers.1.block_sparse_moe.experts.2.w2.weight");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->shape, (std::vector<int64_t>{8, 6}));
  std::vector<float> b = gatherTensor(*w2, params);
  for (int64_t h = 0; h < 8; ++h)
    for (int64_t f = 0; f < 6; ++f)
      EXPECT_EQ(b[size_t(h * 6 + f)], params[12][size_t((1 * 4 + 2) * 48 + f * 8 + h)]);
  ASSERT_NE(find("model.layers.0.block_sparse_moe.experts.3.w3.weight"), nullptr);
  EXPECT_EQ(find("model.layers.0.mlp.gate_proj.weight"), nullptr);
}

TEST(HuggingFaceTest, RefusesCappedMixtral) {
  PlanOps ops = mixtralOps();
  ops.droplessDispatch = 0;
  ops.cappedDispatch = 1;
  Expected<ModelMap> model = mapModel(mixtralPlan(), ops);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().message(),
            "the plan's dispatch has a capacity factor, which drops tokens; a Mixtral "
            "(MixtralForCausalLM) model routes every token (use dispatch(..., dropless) in the "
            ".mtl)");
}

TEST(HuggingFaceTest, ChecksMixtralConfig) {
  Expected<ModelMap> model = mapModel(mixtralPlan(), mixtralOps());
  ASSERT_TRUE(model.ok()) << model.error().message();
  JsonValue config = makeConfig(*model, "float32");
  EXPECT_TRUE(checkConfig(config, *model, "c").ok());
  // MixtralConfig's defaults (eps 1e-5, theta 1e6) are the plan's here.
  config.getObject()->erase("rms_norm_eps");
  config.getObject()->erase("rope_theta");
  EXPECT_TRUE(checkConfig(config, *model, "c").ok());
  auto refused = [&](std::string_view key, JsonValue value) {
    JsonValue c = makeConfig(*model, "float32");
    c.getObject()->set(std::string(key), std::move(value));
    Error err = checkConfig(c, *model, "c");
    return err.ok() ? std::string("accepted") : err.message();
  };
  EXPECT_EQ(refused("num_local_experts", int64_t(8)),
            "c: \"num_local_experts\" is 8 but the plan's model has experts = 4");
  EXPECT_EQ(refused("num_experts_per_tok", int64_t(1)),
            "c: \"num_experts_per_tok\" is 1 but the plan's model has topk = 2");
  EXPECT_EQ(refused("rope_theta", 1e4),
            "c: \"rope_theta\" is 10000 but the plan's rope has theta = 1e+06");
  EXPECT_EQ(refused("rms_norm_eps", 1e-6), "c: \"rms_norm_eps\" is 1e-06 but the plan's norms "
                                            "use eps = 1e-05 (set eps in the .mtl to match)");
  EXPECT_EQ(refused("router_jitter_noise", 0.1),
            "c: \"router_jitter_noise\" is 0.1; the plan's router has no noise");
  EXPECT_EQ(refused("sliding_window", int64_t(4)),
            "c: \"sliding_window\" is 4, below the plan's sequence length seq = 8; the plan's "
            "attention sees the whole sequence");
  EXPECT_EQ(refused("sliding_window", int64_t(4096)), "accepted");
  EXPECT_EQ(refused("model_type", "llama"),
            "c: a config of model_type 'llama', but the plan's model is Mixtral "
            "(MixtralForCausalLM), model_type 'mixtral'");
}

} // namespace
