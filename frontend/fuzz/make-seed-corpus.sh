#!/usr/bin/env bash
# Builds a seed corpus for mtl-parser-fuzzer (see docs/fuzzing.md).
#
#   frontend/fuzz/make-seed-corpus.sh [OUT_DIR]     # default: fuzz-corpus/seeds
#
# Seeds are every examples/*.mtl and test/frontend/**/*.mtl of the repository, plus a few
# built-in files (a complete model and some broken ones) so the fuzzer has something to
# mutate even in a checkout without examples. libFuzzer takes directories, not globs, which
# is why the files are gathered into one directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/fuzz-corpus/seeds}"
mkdir -p "$out"

count=0
copy() { # copy FILE: names seeds after their path so examples/a.mtl and test/x/a.mtl coexist
  local rel="${1#"$root"/}"
  cp "$1" "$out/${rel//\//__}"
  count=$((count + 1))
}

shopt -s nullglob globstar
for f in "$root"/examples/*.mtl "$root"/test/frontend/**/*.mtl; do
  copy "$f"
done

cat >"$out/builtin-gpt.mtl" <<'MTL'
dims { seq = 64, hidden = 64, heads = 4, head_dim = hidden / heads, ffn = 4 * hidden, vocab = 128 }
model gpt(layers = 2) {
  param wte[vocab, hidden] init normal(0.02)
  param wpe[seq, hidden] init normal(0.02)
  param lnf.g[hidden] init ones
  param lnf.b[hidden] init zeros
  layer block {
    param ln1.g[hidden] init ones
    param ln1.b[hidden] init zeros
    param wq[hidden, heads, head_dim] init normal(0.02)
    param wo[heads, head_dim, hidden] init normal(0.02 / sqrt(2 * layers))
    fn (x[batch, seq, hidden]) -> [batch, seq, hidden] {
      h = layer_norm(x, ln1.g, ln1.b)
      q = contract(h, wq, over = hidden)
      a = attention(q, q, q, causal, scale = 1 / sqrt(head_dim))
      return x + dropout(contract(a, wo, over = (heads, head_dim)), 0.1)
    }
  }
  fn forward(tokens: i32[batch, seq], labels: i32[batch, seq]) -> loss {
    x = gather(wte, tokens) + wpe
    x = repeat(layers) block(x)
    logits = contract(layer_norm(x, lnf.g, lnf.b), wte, over = hidden)
    return cross_entropy(logits, labels, over = vocab)
  }
}
train { optimizer adamw(lr = 3e-4, betas = (0.9, 0.95), weight_decay = 0.1)
        lr cosine(warmup = 100, min = 3e-5) global_batch 32 micro_batch 4
        clip_grad 1.0 precision bf16 seed 1234 steps 100 dropout off }
parallel { tp 2 pp 2 dp 1 sp on schedule zb-h1 pipeline_layers [1, 1]
           layout { heads: tp, ffn: tp } }
MTL

cat >"$out/builtin-moe.mtl" <<'MTL'
dims { tokens = 32, hidden = 16, experts = 4, topk = 2, ffn = 32 }
model moe {
  param router[hidden, experts] init normal(0.02)
  param w1[experts, hidden, ffn] init normal(0.02)
  fn forward(x[tokens, hidden]) -> loss {
    logits = contract(x, router, over = hidden)
    w, idx = topk(softmax(logits, over = experts), over = experts, k = topk)
    d = dispatch(x, idx, capacity_factor = 1.25)
    y = combine(silu(contract(d, w1, over = hidden)), idx, w)
    return mean(y ** 2, over = (tokens, ffn)) + 0.01 * load_balancing_loss(logits, idx)
  }
}
parallel auto
MTL

cat >"$out/builtin-errors.mtl" <<'MTL'
dims { a = , b 3 }
model m(x = 1 {
  param w[a, b init ones
  layer l { fn (x[a]) -> [a] { y = f(x, , over = a) return -y ** 2 }
  fn g(x) -> { x + 1 }
train { seed = 1 precision: fp32 }
parallel { schedule zero-bubble layout { heads tp } }
MTL
count=$((count + 3))

echo "make-seed-corpus: $count seeds in $out"
