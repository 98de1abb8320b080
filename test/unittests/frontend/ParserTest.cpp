//===- ParserTest.cpp - Tests of the .mtl parser --------------------------===//

#include "frontend/Parser.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <string>

using namespace mtc::frontend;

namespace {

struct ParseResult {
  std::unique_ptr<Module> module;
  std::string output; // everything Diagnostics printed
  unsigned errors = 0;
};

ParseResult parse(llvm::StringRef source) {
  llvm::SourceMgr sourceMgr;
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "test.mtl"), llvm::SMLoc());
  ParseResult result;
  llvm::raw_string_ostream os(result.output);
  Diagnostics diags(sourceMgr, id, os);
  result.module = parseModule(sourceMgr, id, diags);
  result.errors = diags.numErrors();
  return result;
}

/// Parses `source` as the body of `fn f(x[a]) -> [a] { ... }` and returns its statements.
ParseResult parseBody(llvm::StringRef body) {
  return parse(("model m { fn f(x[a]) -> [a] {\n" + body + "\n} }").str());
}

const Stmt &onlyStmt(const ParseResult &r) { return r.module->models.at(0).fns.at(0).body.at(0); }

/// Prints an expression as a fully parenthesized string, to check tree shape compactly.
std::string show(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number: {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << llvm::format("%g", e.number);
    return s;
  }
  case Expr::Kind::Name:
    return e.name;
  case Expr::Kind::Unary:
    return "(" + e.op + show(*e.lhs) + ")";
  case Expr::Kind::Binary:
    return "(" + show(*e.lhs) + " " + e.op + " " + show(*e.rhs) + ")";
  case Expr::Kind::Call:
  case Expr::Kind::Tuple:
  case Expr::Kind::Repeat: {
    std::string s = e.kind == Expr::Kind::Repeat ? "repeat(" + show(*e.lhs) + ") " : "";
    s += e.kind == Expr::Kind::Tuple ? "" : e.name;
    s += "(";
    bool first = true;
    for (const ExprPtr &arg : e.args) {
      s += (first ? "" : ", ") + show(*arg);
      first = false;
    }
    for (const KeywordArg &kw : e.kwargs) {
      s += (first ? "" : ", ") + kw.name + " = " + show(*kw.value);
      first = false;
    }
    return s + ")";
  }
  }
  return "?";
}

std::string showStmt(llvm::StringRef body) {
  ParseResult r = parseBody(body);
  EXPECT_EQ(r.errors, 0u) << r.output;
  if (r.errors || r.module->models.empty() || r.module->models[0].fns.empty() ||
      r.module->models[0].fns[0].body.empty())
    return "<error>";
  return show(*onlyStmt(r).value);
}

const char *kGpt = R"mtl(
# A complete GPT.
dims { seq = 256, hidden = 256, heads = 4, head_dim = 64, ffn = 1024, vocab = 512 }

model gpt(layers = 4) {
  param wte[vocab, hidden] init normal(0.02)
  param wpe[seq, hidden]   init normal(0.02)
  param lnf.g[hidden] init ones
  param lnf.b[hidden] init zeros

  layer block {                       # repeated; pipeline stages cut between repeats
    param ln1.g[hidden] init ones
    param ln1.b[hidden] init zeros
    param ln2.g[hidden] init ones
    param ln2.b[hidden] init zeros
    param wq[hidden, heads, head_dim] init normal(0.02)
    param wk[hidden, heads, head_dim] init normal(0.02)
    param wv[hidden, heads, head_dim] init normal(0.02)
    param wo[heads, head_dim, hidden] init normal(0.02 / sqrt(2 * layers))
    param w1[hidden, ffn] init normal(0.02)
    param w2[ffn, hidden] init normal(0.02 / sqrt(2 * layers))
    fn (x[batch, seq, hidden]) -> [batch, seq, hidden] {
      h = layer_norm(x, ln1.g, ln1.b)
      q = contract(h, wq, over = hidden)          # [batch, seq, heads, head_dim]
      k = contract(h, wk, over = hidden)
      v = contract(h, wv, over = hidden)
      x = x + dropout(contract(attention(q, k, v, causal), wo, over = (heads, head_dim)), 0.1)
      h = layer_norm(x, ln2.g, ln2.b)
      return x + dropout(contract(gelu(contract(h, w1, over = hidden)), w2, over = ffn), 0.1)
    }
  }

  fn forward(tokens: i32[batch, seq], labels: i32[batch, seq]) -> loss {
    x = gather(wte, tokens) + wpe
    x = repeat(layers) block(x)
    logits = contract(layer_norm(x, lnf.g, lnf.b), wte, over = hidden)   # tied weights
    return cross_entropy(logits, labels, over = vocab)
  }
}

train    { optimizer adamw(lr = 3e-4, betas = (0.9, 0.95), weight_decay = 0.1)
           lr cosine(warmup = 100, min = 3e-5)  global_batch 32  micro_batch 4
           clip_grad 1.0  precision fp32  seed 1234 }
parallel { tp 2  pp 2  sp on  schedule 1f1b }     # optional; omitted or `auto` -> search
)mtl";

//===----------------------------------------------------------------------===//
// Constructs
//===----------------------------------------------------------------------===//

TEST(ParserTest, GptExampleParses) {
  ParseResult r = parse(kGpt);
  ASSERT_EQ(r.errors, 0u) << r.output;
  const Module &m = *r.module;
  ASSERT_EQ(m.dims.size(), 6u);
  EXPECT_EQ(m.dims[3].name, "head_dim");
  EXPECT_EQ(m.dimsBlockRanges.size(), 1u);
  ASSERT_EQ(m.models.size(), 1u);
  const ModelDecl &gpt = m.models[0];
  EXPECT_EQ(gpt.name, "gpt");
  ASSERT_EQ(gpt.args.size(), 1u);
  EXPECT_EQ(gpt.args[0].name, "layers");
  EXPECT_EQ(gpt.params.size(), 4u);
  EXPECT_EQ(gpt.params[2].name, "lnf.g");
  ASSERT_EQ(gpt.layers.size(), 1u);
  const LayerDecl &block = gpt.layers[0];
  EXPECT_EQ(block.name, "block");
  EXPECT_EQ(block.params.size(), 10u);
  ASSERT_EQ(block.fns.size(), 1u);
  EXPECT_EQ(block.fns[0].name, "");
  EXPECT_EQ(block.fns[0].body.size(), 7u);
  EXPECT_EQ(block.fns[0].body.back().kind, Stmt::Kind::Return);
  ASSERT_EQ(gpt.fns.size(), 1u);
  const FnDecl &forward = gpt.fns[0];
  EXPECT_EQ(forward.name, "forward");
  EXPECT_TRUE(forward.returnsLoss);
  EXPECT_TRUE(forward.results.empty());
  ASSERT_EQ(forward.args.size(), 2u);
  EXPECT_EQ(forward.args[1].name, "labels");
  EXPECT_EQ(forward.args[1].sig.elementType, "i32");
  EXPECT_EQ(forward.body.size(), 4u);
  ASSERT_TRUE(m.train.has_value());
  EXPECT_EQ(m.train->entries.size(), 7u);
  ASSERT_TRUE(m.parallel.has_value());
  EXPECT_EQ(m.parallel->entries.size(), 4u);
  EXPECT_FALSE(m.parallel->isAuto);
}

TEST(ParserTest, DimsBlocksAppendAndCommasAreOptional) {
  ParseResult r = parse("dims { a = 2 b = a * 3, }\n"
                        "dims { head_dim = hidden / heads }\n"
                        "model m {}");
  ASSERT_EQ(r.errors, 0u) << r.output;
  ASSERT_EQ(r.module->dims.size(), 3u);
  EXPECT_EQ(r.module->dims[1].name, "b");
  EXPECT_EQ(show(*r.module->dims[1].value), "(a * 3)");
  EXPECT_EQ(show(*r.module->dims[2].value), "(hidden / heads)");
  EXPECT_EQ(r.module->dimsBlockRanges.size(), 2u);
  EXPECT_EQ(r.module->dimsBlockRanges[1].begin.line, 2u);
  EXPECT_TRUE(r.module->dims[0].value->isInteger);
}

TEST(ParserTest, ModelArguments) {
  ParseResult r = parse("model llama(layers = 2, kv = heads / 2) {}");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const ModelDecl &m = r.module->models.at(0);
  EXPECT_EQ(m.name, "llama");
  ASSERT_EQ(m.args.size(), 2u);
  EXPECT_EQ(m.args[1].name, "kv");
  EXPECT_EQ(show(*m.args[1].value), "(heads / 2)");
  EXPECT_EQ(m.range.begin.col, 1u);
  EXPECT_EQ(m.range.end.offset, 42u);
}

TEST(ParserTest, ParamsWithInits) {
  ParseResult r = parse("model m {\n"
                        "  param a[x] \n"
                        "  param ln1.g[hidden] init ones\n"
                        "  param w[x, y] init normal(0.02 / sqrt(2 * layers))\n"
                        "  param u[] init uniform(-1, 1)\n"
                        "  param ids i32[x] init zeros\n"
                        "}");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const auto &params = r.module->models.at(0).params;
  ASSERT_EQ(params.size(), 5u);
  EXPECT_FALSE(params[0].init.has_value());
  EXPECT_EQ(params[1].name, "ln1.g");
  EXPECT_EQ(params[1].init->kind, "ones");
  EXPECT_TRUE(params[1].init->args.empty());
  EXPECT_EQ(params[2].sig.dims, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(params[2].init->args.size(), 1u);
  EXPECT_EQ(show(*params[2].init->args[0]), "(0.02 / sqrt((2 * layers)))");
  EXPECT_TRUE(params[3].sig.dims.empty());
  EXPECT_EQ(params[3].init->args.size(), 2u);
  EXPECT_EQ(params[4].sig.elementType, "i32");
  EXPECT_EQ(params[4].sig.elementTypeRange.begin.col, 13u);
  EXPECT_EQ(params[2].sig.dimRanges[1].begin.col, 14u);
}

TEST(ParserTest, FnArgumentsTypedAndUntyped) {
  ParseResult r = parse("model m { fn f(x[batch, seq, hidden], tokens: i32[batch, seq]) "
                        "-> bf16[batch] { return x } }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const FnDecl &fn = r.module->models.at(0).fns.at(0);
  ASSERT_EQ(fn.args.size(), 2u);
  EXPECT_EQ(fn.args[0].sig.elementType, "");
  EXPECT_EQ(fn.args[0].sig.dims.size(), 3u);
  EXPECT_EQ(fn.args[1].name, "tokens");
  EXPECT_EQ(fn.args[1].sig.elementType, "i32");
  EXPECT_EQ(fn.args[1].sig.dims, (std::vector<std::string>{"batch", "seq"}));
  EXPECT_FALSE(fn.returnsLoss);
  ASSERT_EQ(fn.results.size(), 1u);
  EXPECT_EQ(fn.results[0].elementType, "bf16");
  EXPECT_EQ(fn.results[0].dims, (std::vector<std::string>{"batch"}));
}

TEST(ParserTest, FnWithSeveralResultsReturnsATuple) {
  ParseResult r = parse("model m { layer l { fn (x[batch, hidden], aux[]) -> [batch, hidden], [] "
                        "{ return x, aux + 1 } } }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const FnDecl &fn = r.module->models.at(0).layers.at(0).fns.at(0);
  ASSERT_EQ(fn.results.size(), 2u);
  EXPECT_EQ(fn.results[0].dims, (std::vector<std::string>{"batch", "hidden"}));
  EXPECT_TRUE(fn.results[1].dims.empty());
  const Stmt &ret = fn.body.at(0);
  ASSERT_EQ(ret.kind, Stmt::Kind::Return);
  ASSERT_EQ(ret.value->kind, Expr::Kind::Tuple);
  ASSERT_EQ(ret.value->args.size(), 2u);
  EXPECT_EQ(ret.value->args[1]->kind, Expr::Kind::Binary);
}

TEST(ParserTest, FnWithoutArguments) {
  ParseResult r = parse("model m { fn f() -> [] { return 1 } }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  EXPECT_TRUE(r.module->models.at(0).fns.at(0).args.empty());
}

TEST(ParserTest, LayerWithParamsAndAnonymousFn) {
  ParseResult r = parse("model m { layer mlp { param w[h, f] fn (x[b, h]) -> [b, f] "
                        "{ return contract(x, w, over = h) } } }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const LayerDecl &layer = r.module->models.at(0).layers.at(0);
  EXPECT_EQ(layer.name, "mlp");
  EXPECT_EQ(layer.params.size(), 1u);
  ASSERT_EQ(layer.fns.size(), 1u);
  EXPECT_TRUE(layer.fns[0].name.empty());
}

TEST(ParserTest, AssignmentAndMultipleTargets) {
  ParseResult r = parseBody("w, idx = topk(x, over = experts, k = topk)");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const Stmt &s = onlyStmt(r);
  EXPECT_EQ(s.kind, Stmt::Kind::Assign);
  EXPECT_EQ(s.targets, (std::vector<std::string>{"w", "idx"}));
  EXPECT_EQ(s.targetRanges[1].begin.col, 4u);
  EXPECT_EQ(show(*s.value), "topk(x, over = experts, k = topk)");
}

TEST(ParserTest, StatementsNeedNoSeparators) {
  ParseResult r = parseBody("a = x b = a * 2 return a + b");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const auto &body = r.module->models[0].fns[0].body;
  ASSERT_EQ(body.size(), 3u);
  EXPECT_EQ(show(*body[1].value), "(a * 2)");
  EXPECT_EQ(body[2].kind, Stmt::Kind::Return);
}

TEST(ParserTest, ArithmeticPrecedenceAndAssociativity) {
  EXPECT_EQ(showStmt("y = a + b * c"), "(a + (b * c))");
  EXPECT_EQ(showStmt("y = a - b - c"), "((a - b) - c)");
  EXPECT_EQ(showStmt("y = a / b * c"), "((a / b) * c)");
  EXPECT_EQ(showStmt("y = (a + b) * c"), "((a + b) * c)");
  EXPECT_EQ(showStmt("y = 2 * -3"), "(2 * (-3))");
}

TEST(ParserTest, PowerIsRightAssociativeAndBindsTighterThanUnaryMinus) {
  EXPECT_EQ(showStmt("y = -a ** 2"), "(-(a ** 2))");
  EXPECT_EQ(showStmt("y = a ** b ** c"), "(a ** (b ** c))");
  EXPECT_EQ(showStmt("y = 2 ** -1"), "(2 ** (-1))");
  EXPECT_EQ(showStmt("y = a * b ** 2"), "(a * (b ** 2))");
  EXPECT_EQ(showStmt("y = - - a"), "(-(-a))");
}

TEST(ParserTest, CallsWithPositionalKeywordAndTupleArguments) {
  EXPECT_EQ(showStmt("y = contract(a, w, over = (heads, head_dim))"),
            "contract(a, w, over = (heads, head_dim))");
  EXPECT_EQ(showStmt("y = f()"), "f()");
  EXPECT_EQ(showStmt("y = scale(x, 1 / sqrt(head_dim))"), "scale(x, (1 / sqrt(head_dim)))");
  ParseResult r = parseBody("y = layer_norm(x, g, eps = 1e-5)");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const Expr &call = *onlyStmt(r).value;
  EXPECT_EQ(call.kind, Expr::Kind::Call);
  EXPECT_EQ(call.args.size(), 2u);
  ASSERT_EQ(call.kwargs.size(), 1u);
  EXPECT_EQ(call.kwargs[0].name, "eps");
  EXPECT_FALSE(call.kwargs[0].value->isInteger);
  EXPECT_DOUBLE_EQ(call.kwargs[0].value->number, 1e-5);
}

TEST(ParserTest, RepeatExpression) {
  ParseResult r = parseBody("x = repeat(layers - 1) block(x, mask)");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const Expr &e = *onlyStmt(r).value;
  ASSERT_EQ(e.kind, Expr::Kind::Repeat);
  EXPECT_EQ(e.name, "block");
  EXPECT_EQ(show(*e.lhs), "(layers - 1)");
  EXPECT_EQ(e.args.size(), 2u);
  EXPECT_EQ(e.nameRange.begin.col, 24u);
  // `repeat` without '(' is an ordinary name.
  EXPECT_EQ(showStmt("y = repeat + 1"), "(repeat + 1)");
}

TEST(ParserTest, ContextualKeywordsAreOrdinaryNames) {
  ParseResult r = parseBody("loss = cross_entropy(logits, labels, over = vocab)\n"
                            "auto = loss init = auto layout = init\n"
                            "param = layout  fn = param  model = fn\n"
                            "return loss");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const auto &body = r.module->models[0].fns[0].body;
  ASSERT_EQ(body.size(), 8u);
  EXPECT_EQ(body[0].targets[0], "loss");
  EXPECT_EQ(body[3].targets[0], "layout");
  EXPECT_EQ(body[6].targets[0], "model");
  EXPECT_EQ(body[7].kind, Stmt::Kind::Return);
  EXPECT_EQ(show(*body[7].value), "loss");
}

TEST(ParserTest, ExpressionRanges) {
  ParseResult r = parseBody("y = (a + b) * f(c, over = d)");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const Stmt &s = onlyStmt(r);
  EXPECT_EQ(s.range.begin.line, 2u);
  EXPECT_EQ(s.range.begin.col, 1u);
  EXPECT_EQ(s.range.end.col, 29u);
  const Expr &mul = *s.value;
  EXPECT_EQ(mul.range.begin.col, 5u);
  EXPECT_EQ(mul.lhs->range.begin.col, 5u); // the parentheses are part of the span
  EXPECT_EQ(mul.lhs->range.end.col, 12u);
  EXPECT_EQ(mul.rhs->nameRange.begin.col, 15u);
  EXPECT_EQ(mul.rhs->nameRange.end.col, 16u);
  EXPECT_EQ(mul.rhs->kwargs[0].nameRange.begin.col, 20u);
}

TEST(ParserTest, TrainBlock) {
  ParseResult r = parse("model m {}\n"
                        "train { optimizer adamw(lr = 3e-4, betas = (0.9, 0.95))\n"
                        "        lr cosine(warmup = 100, min = 3e-5)\n"
                        "        micro_batch 4 clip_grad 1.0 precision bf16 dropout off }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  ASSERT_TRUE(r.module->train.has_value());
  const ConfigBlock &train = *r.module->train;
  EXPECT_EQ(train.kind, "train");
  ASSERT_EQ(train.entries.size(), 6u);
  EXPECT_EQ(train.entries[0].key, "optimizer");
  EXPECT_EQ(show(*train.entries[0].value), "adamw(lr = 0.0003, betas = (0.9, 0.95))");
  EXPECT_EQ(train.entries[1].value->name, "cosine");
  EXPECT_EQ(train.entries[2].key, "micro_batch");
  EXPECT_TRUE(train.entries[2].value->isInteger);
  EXPECT_DOUBLE_EQ(train.entries[2].value->number, 4);
  EXPECT_FALSE(train.entries[3].value->isInteger);
  EXPECT_EQ(train.entries[4].value->kind, Expr::Kind::Name);
  EXPECT_EQ(train.entries[4].value->name, "bf16");
  EXPECT_EQ(train.entries[5].value->name, "off");
  EXPECT_EQ(train.entries[5].range.begin.line, 4u);
}

TEST(ParserTest, ParallelBlockWithWordsAndLayout) {
  ParseResult r = parse("model m {}\n"
                        "parallel { tp 2 pp 4 sp on schedule 1f1b\n"
                        "           layout { heads: tp, ffn: tp experts: ep } }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  const ConfigBlock &par = *r.module->parallel;
  EXPECT_EQ(par.kind, "parallel");
  ASSERT_EQ(par.entries.size(), 5u);
  EXPECT_EQ(par.entries[3].key, "schedule");
  EXPECT_EQ(par.entries[3].value->kind, Expr::Kind::Name);
  EXPECT_EQ(par.entries[3].value->name, "1f1b");
  const ConfigEntry &layout = par.entries[4];
  EXPECT_EQ(layout.key, "layout");
  EXPECT_EQ(layout.value, nullptr);
  ASSERT_EQ(layout.layout.size(), 3u);
  EXPECT_EQ(layout.layout[0], (std::pair<std::string, std::string>{"heads", "tp"}));
  EXPECT_EQ(layout.layout[2], (std::pair<std::string, std::string>{"experts", "ep"}));
  EXPECT_EQ(layout.layoutRanges.size(), 3u);
}

TEST(ParserTest, HyphenatedConfigWord) {
  ParseResult r = parse("model m {}\nparallel { schedule zero-bubble pp 2 }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  ASSERT_EQ(r.module->parallel->entries.size(), 2u);
  EXPECT_EQ(r.module->parallel->entries[0].value->name, "zero-bubble");
}

TEST(ParserTest, HyphenatedConfigWordWithDigits) {
  ParseResult r = parse("model m {}\nparallel { schedule zb-h1 pp 2 }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  EXPECT_EQ(r.module->parallel->entries[0].value->name, "zb-h1");
}

TEST(ParserTest, ConfigListValue) {
  ParseResult r = parse("model m {}\nparallel { pipeline_layers [3, 1] pp 2 }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  ASSERT_EQ(r.module->parallel->entries.size(), 2u);
  const Expr &list = *r.module->parallel->entries[0].value;
  EXPECT_EQ(list.kind, Expr::Kind::Tuple);
  ASSERT_EQ(list.args.size(), 2u);
  EXPECT_EQ(list.args[0]->number, 3);
  EXPECT_EQ(list.args[1]->number, 1);
  // The span covers `[3, 1]`: from the bracket to just past the closing one.
  EXPECT_EQ(list.range.begin.col, 28u);
  EXPECT_EQ(list.range.end.col, 34u);
}

TEST(ParserTest, ConfigListNeedsCommas) {
  ParseResult r = parse("model m {}\nparallel { pipeline_layers [3 1] }");
  EXPECT_NE(r.errors, 0u);
  EXPECT_NE(r.output.find("expected ',' or ']' in the list of 'pipeline_layers'"),
            std::string::npos)
      << r.output;
}

TEST(ParserTest, ParallelAuto) {
  ParseResult r = parse("model m {} parallel auto");
  ASSERT_EQ(r.errors, 0u) << r.output;
  ASSERT_TRUE(r.module->parallel.has_value());
  EXPECT_TRUE(r.module->parallel->isAuto);
  EXPECT_TRUE(r.module->parallel->entries.empty());
}

TEST(ParserTest, ItemsInAnyOrder) {
  ParseResult r = parse("train { seed 1 } model m {} dims { a = 1 } parallel { tp 1 }");
  ASSERT_EQ(r.errors, 0u) << r.output;
  EXPECT_EQ(r.module->models.size(), 1u);
  EXPECT_EQ(r.module->dims.size(), 1u);
}

//===----------------------------------------------------------------------===//
// Errors and recovery
//===----------------------------------------------------------------------===//

TEST(ParserErrorTest, EmptyFile) {
  ParseResult r = parse("");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.output, "test.mtl:1:1: error: empty file: expected a 'model' declaration\n\n^\n");
}

TEST(ParserErrorTest, CommentOnlyFile) {
  ParseResult r = parse("# nothing here\n   \n");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("test.mtl:3:1: error: empty file: expected a 'model' declaration"),
            std::string::npos)
      << r.output;
}

TEST(ParserErrorTest, UnexpectedTopLevelTokenThenRecovers) {
  ParseResult r = parse("xyz foo { a } model m { param p[a] }");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("test.mtl:1:1: error: unexpected 'xyz' at top level; expected "
                          "'dims', 'model', 'train' or 'parallel'"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(r.module->models.size(), 1u);
  EXPECT_EQ(r.module->models[0].params.size(), 1u);
}

TEST(ParserErrorTest, MissingBracketInParamRecoversAtNextParam) {
  ParseResult r = parse("model m {\n"
                        "  param a[x, y init ones\n"
                        "  param b[x]\n"
                        "}");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.output, "test.mtl:2:16: error: expected ']' after dimension list\n"
                      "  param a[x, y init ones\n"
                      "               ^~~~\n");
  ASSERT_EQ(r.module->models.size(), 1u);
  ASSERT_EQ(r.module->models[0].params.size(), 1u);
  EXPECT_EQ(r.module->models[0].params[0].name, "b");
}

TEST(ParserErrorTest, MissingEqualInDimsBinding) {
  ParseResult r = parse("dims { seq 256, hidden = 64 }\nmodel m {}");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("test.mtl:1:12: error: expected '=' in binding"), std::string::npos)
      << r.output;
  ASSERT_EQ(r.module->dims.size(), 1u);
  EXPECT_EQ(r.module->dims[0].name, "hidden");
  EXPECT_EQ(r.module->models.size(), 1u);
}

TEST(ParserErrorTest, UnterminatedModelBlockHasNote) {
  ParseResult r = parse("model m {\n  param w[a]\n");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.output,
            "test.mtl:3:1: error: unterminated block: expected '}' to close 'model' opened "
            "here\n"
            "\n"
            "^\n"
            "test.mtl:1:9: note: 'model' block opened here\n"
            "model m {\n"
            "        ^\n");
  // What was parsed is kept.
  ASSERT_EQ(r.module->models.size(), 1u);
  EXPECT_EQ(r.module->models[0].params.size(), 1u);
}

TEST(ParserErrorTest, UnterminatedModelBeforeNextTopLevelItem) {
  ParseResult r = parse("model m {\n  param w[a]\ntrain { seed 3 }");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("test.mtl:3:1: error: unterminated block"), std::string::npos)
      << r.output;
  ASSERT_TRUE(r.module->train.has_value());
  EXPECT_EQ(r.module->train->entries.size(), 1u);
}

TEST(ParserErrorTest, MissingFnBraceBeforeNextFn) {
  ParseResult r = parse("model m {\n"
                        "  fn a(x[d]) -> [d] { return x\n"
                        "  fn b(x[d]) -> [d] { return x }\n"
                        "}");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("expected '}' to close 'fn' opened here"), std::string::npos) << r.output;
  EXPECT_EQ(r.module->models.at(0).fns.size(), 2u);
}

TEST(ParserErrorTest, MissingLayerBraceBeforeNextLayer) {
  ParseResult r = parse("model m {\n"
                        "  layer a { param w[d] fn (x[d]) -> [d] { return x }\n"
                        "  layer b { param w[d] fn (x[d]) -> [d] { return x } }\n"
                        "}");
  EXPECT_EQ(r.errors, 1u) << r.output;
  EXPECT_NE(r.output.find("expected '}' to close 'layer' opened here"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.module->models.at(0).layers.size(), 2u);
}

TEST(ParserErrorTest, SeveralErrorsInOneFile) {
  ParseResult r = parse("dims { a = }\n" // 1: expected expression
                        "model m {\n"
                        "  param p[a,] init ones\n" // 2: dimension name
                        "  fn f(x[a]) -> [a] {\n"
                        "    y = x + *\n"            // 3: expected expression
                        "    z = f(x, , over = a)\n" // 4: expected expression
                        "    w = z\n"
                        "    x + 1\n" // 5: expected '='
                        "    return w\n"
                        "  }\n"
                        "  bogus\n" // 6: unexpected in model
                        "}\n"
                        "train { seed }\n"); // 7: expected a value
  EXPECT_EQ(r.errors, 7u) << r.output;
  EXPECT_NE(r.output.find("test.mtl:1:12: error: expected expression"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:3:13: error: expected a dimension name"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:5:13: error: expected expression"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:6:14: error: expected expression"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:8:7: error: expected '=' after 'x'"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:11:3: error: unexpected 'bogus' in model"), std::string::npos);
  EXPECT_NE(r.output.find("test.mtl:13:14: error: expected a value after 'seed'"),
            std::string::npos)
      << r.output;
  // Recovery kept the good statements: `w = z` and `return w`.
  const FnDecl &f = r.module->models.at(0).fns.at(0);
  ASSERT_EQ(f.body.size(), 2u);
  EXPECT_EQ(f.body[0].targets[0], "w");
  EXPECT_EQ(f.body[1].kind, Stmt::Kind::Return);
}

TEST(ParserErrorTest, RecoveryInsideCallDoesNotStopAtKeywordArguments) {
  ParseResult r = parseBody("y = f(x, $, over = hidden)\nz = y");
  EXPECT_EQ(r.errors, 1u) << r.output;
  EXPECT_NE(r.output.find("invalid character '$'"), std::string::npos);
  const auto &body = r.module->models[0].fns[0].body;
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0].targets[0], "z");
}

TEST(ParserErrorTest, LexerErrorsAreNotReportedTwice) {
  ParseResult r = parse("model m { fn f(x[a]) -> [a] { y = x @ 2 return y } }");
  EXPECT_EQ(r.errors, 1u) << r.output;
  EXPECT_NE(r.output.find("invalid character '@'"), std::string::npos);
}

TEST(ParserErrorTest, CallUsedAsStatement) {
  ParseResult r = parseBody("gelu(x)\nreturn x");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("the result of a call must be assigned ('y = f(...)') or returned"),
            std::string::npos)
      << r.output;
}

TEST(ParserErrorTest, PositionalAfterKeywordAndDuplicateKeyword) {
  ParseResult r = parseBody("y = f(x, over = a, b, over = c)");
  EXPECT_EQ(r.errors, 2u);
  EXPECT_NE(r.output.find("2:20: error: positional argument after keyword argument"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2:23: error: duplicate keyword argument 'over'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2:10: note: previous value is here"), std::string::npos) << r.output;
}

TEST(ParserErrorTest, DuplicateConfigBlock) {
  ParseResult r = parse("model m {}\ntrain { seed 1 }\ntrain { seed 2 }");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("3:1: error: duplicate 'train' block"), std::string::npos);
  EXPECT_NE(r.output.find("2:1: note: previous 'train' block is here"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.module->train->entries[0].value->number, 1);
}

TEST(ParserErrorTest, EqualSignInConfigIsReportedAndTolerated) {
  ParseResult r = parse("model m {}\ntrain { seed = 7 steps 10 }");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("settings are written 'key value', without '='"), std::string::npos)
      << r.output;
  ASSERT_EQ(r.module->train->entries.size(), 2u);
  EXPECT_DOUBLE_EQ(r.module->train->entries[0].value->number, 7);
}

TEST(ParserErrorTest, WordsAreNotExpressions) {
  ParseResult r = parseBody("y = 2x + 1");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("'2x' is neither a name nor a number"), std::string::npos) << r.output;
}

TEST(ParserErrorTest, NumericDimensionIsExplained) {
  ParseResult r = parse("model m { param w[4, hidden] }");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("expected a dimension name; dimensions are named"), std::string::npos)
      << r.output;
}

TEST(ParserErrorTest, BadFnHeaders) {
  ParseResult r = parse("model m {\n"
                        "  fn f(x) -> [a] { return x }\n"
                        "  fn g(x[a]) [a] { return x }\n"
                        "  fn h(x[a]) -> { return x }\n"
                        "  fn ok(x[a]) -> [a] { return x }\n"
                        "}");
  EXPECT_EQ(r.errors, 3u) << r.output;
  EXPECT_NE(r.output.find("2:9: error: expected '[' and the dimensions of argument 'x'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("3:14: error: expected '->'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4:17: error: expected 'loss' or a tensor type"), std::string::npos)
      << r.output;
  ASSERT_EQ(r.module->models.at(0).fns.size(), 1u);
  EXPECT_EQ(r.module->models[0].fns[0].name, "ok");
}

TEST(ParserErrorTest, UnclosedParenthesisHasNote) {
  ParseResult r = parseBody("y = (a + b\n");
  EXPECT_EQ(r.errors, 1u) << r.output;
  EXPECT_NE(r.output.find("error: expected ')'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2:5: note: to match this '('"), std::string::npos) << r.output;
}

TEST(ParserErrorTest, NestingLimitOnParentheses) {
  std::string deep = "y = " + std::string(10000, '(') + "a" + std::string(10000, ')');
  ParseResult r = parseBody(deep + "\nreturn y");
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("error: expression nested too deeply"), std::string::npos);
  // The statement after the bad one is still parsed.
  EXPECT_EQ(r.module->models.at(0).fns.at(0).body.size(), 1u);
}

TEST(ParserErrorTest, NestingLimitOnUnaryMinusCallsAndPowers) {
  for (std::string deep : {std::string(5000, '-') + "a",
                           [] {
                             std::string s;
                             for (int i = 0; i < 5000; ++i)
                               s += "f(";
                             return s + "a" + std::string(5000, ')');
                           }(),
                           [] {
                             std::string s = "a";
                             for (int i = 0; i < 5000; ++i)
                               s += " ** a";
                             return s;
                           }()}) {
    ParseResult r = parseBody("y = " + deep);
    EXPECT_EQ(r.errors, 1u) << deep.substr(0, 20);
    EXPECT_NE(r.output.find("expression nested too deeply"), std::string::npos);
  }
}

TEST(ParserErrorTest, NestingLimitOnLongOperatorChains) {
  // Chains are parsed iteratively but still produce deep trees, which later passes walk
  // recursively: they are bounded too.
  std::string ok = "y = a";
  for (unsigned i = 1; i < kMaxExprNesting; ++i)
    ok += " + a";
  EXPECT_EQ(parseBody(ok).errors, 0u);
  std::string tooLong = "y = a";
  for (int i = 0; i < 100000; ++i)
    tooLong += "+a";
  ParseResult r = parseBody(tooLong);
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.output.find("expression nested too deeply"), std::string::npos);
}

TEST(ParserErrorTest, DeepBracesAndGarbageTerminate) {
  ParseResult r = parse(std::string(100000, '{') + "model m {}");
  EXPECT_GE(r.errors, 1u);
  ParseResult r2 = parse(std::string(50000, '}') + std::string(50000, ')') + "model m {}");
  EXPECT_GE(r2.errors, 1u);
  ParseResult r3 = parse("model m { fn f(x[a]) -> [a] {" + std::string(100000, '(') + "}}");
  EXPECT_GE(r3.errors, 1u);
}

TEST(ParserErrorTest, ErrorLimitStopsOutput) {
  std::string source = "model m { fn f(x[a]) -> [a] {\n";
  for (int i = 0; i < 50; ++i)
    source += "y = ]\n";
  source += "} }";
  ParseResult r = parse(source);
  EXPECT_GT(r.errors, Diagnostics::kErrorLimit);
  size_t printed = 0;
  for (size_t at = r.output.find(": error: "); at != std::string::npos;
       at = r.output.find(": error: ", at + 1))
    ++printed;
  EXPECT_EQ(printed, Diagnostics::kErrorLimit + 1);
  EXPECT_NE(r.output.find("error: too many errors emitted, stopping now"), std::string::npos);
}

TEST(ParserErrorTest, MissingNamesStillParseTheBody) {
  ParseResult r = parse("model { layer { param w[a] } fn f(x[a]) -> [a] { return x +  } }");
  EXPECT_EQ(r.errors, 3u) << r.output;
  EXPECT_NE(r.output.find("1:7: error: expected a model name after 'model'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1:15: error: expected a layer name after 'layer'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1:62: error: expected expression"), std::string::npos) << r.output;
}

} // namespace
