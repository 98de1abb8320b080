//===- Passes.td - sharding: layouts and partitioning --------*- tablegen -*-===//

#ifndef MTC_COMPILER_SHARDING_PASSES_TD
#define MTC_COMPILER_SHARDING_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTPPartitionPass : Pass<"mtp-partition", "::mlir::ModuleOp"> {
  let summary = "Partition the outlined training step into one rank's program with derived collectives";
  let description = [{
    Takes an outlined module (after `mt-outline-parameters`) whose `mt.parallel` asks for
    tensor parallelism (`tp > 1`, optionally `sp on` and an explicit `layout`) or the
    distributed optimizer, and rewrites
    every function the step calls into the program one rank of the tensor-parallel group
    runs: `mt` ops on local (per-rank) tensors, with `mtp` collectives wherever the
    layouts of a producer and a consumer differ. The module gets `mtp.mesh`.

    **Layouts.** A parameter (and its optimizer states and its gradient) is split along
    every dimension the layout maps to an axis: Megatron's default maps `heads`,
    `kv_heads`, `ffn` and `vocab` to `tp`; with `etp = 1` an expert weight (leading with
    `experts`) is not split along its other dimensions, its experts over `[ep, tp]`
    instead (Megatron's parallel folding). Token ids, the loss, the step scalars and
    everything else that enters or leaves the step are replicated, except mt-kv-cache's
    caches (`mt.buffer = "keys" | "values"`): `@prefill` returns them in the layout it
    computes them in (under tp each rank's heads), and `@decode_step` takes and returns
    them in that layout, so they never travel. With `sp on`, `seq` is
    split over `tp` wherever nothing needs it whole (the norm and dropout regions); under
    context parallelism each of its cp parts is (`seq = [cp, tp]`).
    Context parallelism (`cp > 1`) splits the data's `seq` over `cp`: the entry
    functions' data arguments (token ids, labels, a pipeline chunk's activations) arrive
    whole and are sliced at the entry (no communication), and `seq` outranks the other
    dimensions for the axis.

    **Propagation, one op at a time in program order.** Each value gets the layout its
    producer gives it; each op first brings its operands to the layouts it can compute on.
    The rules are the ops' `PartitionOpInterface` (PartitionRules.cpp):
    - a contraction over a split dimension leaves partial sums (`partial [tp]`); so do
      `reduce_sum`/`reduce_mean` over one; partial sums flow through sums of partial
      values, `neg`, transposes, renames, broadcasts, sums over dimensions and
      contractions with one partial operand (products are linear in one factor too, but
      summing at the first one is what puts Megatron's collectives where they belong:
      after the row-parallel contraction, before the bias, the norm and their gradients);
    - a scalar sum with partial and whole terms (squared norms, a loss's terms) stays
      partial: the whole terms become partial (`to_partial`: coordinate 0 keeps them, no
      communication), and one all-reduce sums the total;
    - any other consumer sums them first: `all_reduce`, or `reduce_scatter` along a
      dimension the consumer wants split by the operand's split and the partial axis
      inside it (with `sp on`, along `seq`, tp inside its data split: `[cp, tp]` under cp);
    - operands that disagree on a dimension are sliced to the split (`all_slice`, no
      communication); when one axis would split two dimensions of one tensor (or split
      one and sum another), the dimension of lower priority is gathered from that axis
      inwards (`all_gather`; `seq = [cp, tp]` losing tp keeps cp). Priority is per axis:
      a dimension the spec maps to the axis (the layout's; the data's batch over ep and
      seq over cp) outranks `seq` over `tp` under `sp`, which outranks the rest. Where
      the operands' splits of a dimension extend one another, the longer one is taken
      (`[cp, tp]` over `[cp]`: a slice); an axis that
      leaves a value's dimension for another dimension of it moves there by one
      `all_to_all` (not a gather of the one and a slice of the other);
    - vocabulary parallelism: `reduce_max` over a split dimension leaves partial maxima,
      combined at once by `mtp.all_reduce ... reduction = max`; `gather` of a table split
      along the indexed dimension reads only this rank's rows (partial sums); when the
      layout splits the table of an `embedding_grad` (and the gradient does not use that
      axis) each rank accumulates only its rows; otherwise the table is gathered, or the
      gradient left partial;
    - `rope` carries its operand's splits and partial sums but on the rotated dimension
      (gathered: its pairs need it whole); a split position dimension gets `mtp.layout`,
      so each rank rotates by its global positions;
    - partial sums over `cp` of a tensor with `seq` (the key and value gradients of
      attention, summed over the ranks' query parts) are reduce-scattered along `seq`
      before a contraction or `rope` computes on them: with the rules above this derives
      Megatron's all-gather context parallelism (k and v gathered along `seq_kv`, their
      gradients reduce-scattered, q, the scores and the output split);
    - ring attention (`cp_comm_type = p2p`: mt-decompose leaves attention whole):
      `attention` and `attention_grad` (AttentionPartition.cpp) keep q, k and v split
      along `seq` over the query's axis and become the unrolled steps of the ring: k and
      v move one rank on by `mtp.shift ... offset 1 rotate` before each of the cp - 1
      steps after the first, the blocks' scores merged by online softmax (causal: the
      mesh's cp is `two_chunk`, and the steps after the first compute only the unmasked
      halves of their blocks; within documents, `positions`, the key positions travel
      with the blocks and every step also masks the keys before each query's document);
      the backward takes the log-sum-exp the forward saved
      (`save_lse`; without `saved` operands it recomputes it by the same steps), then
      passes the blocks again with their key and value gradients, which take one more
      step home;
    - expert parallelism's routing (`ep > 1`, the batch split over `ep`): each rank routes
      its own tokens. `topk` keeps the batch's split over `ep` (any other split is
      gathered on its scores), `topk_grad` every row split; `dispatch` turns the tokens'
      split over `ep` into the capacity's (each rank fills its share of every expert's
      slots; a capacity `ep` does not divide is an error), and the expert contraction
      moves the slots to the experts' ranks (`experts` outranks `capacity`); `combine` and
      `combine_grad` bring them back (`combine` keeps partial expert outputs partial);
      `load_balancing_loss` is partial over `ep`, each rank's loss scaled by 1/ep, and its
      gradient scales the loss gradient alike. Other token splits are gathered first;
    - ops without a sharded form (constants, `iota`) run replicated: their operands are
      gathered and summed first.
    - `mt.repeat` partitions its layer function once for the layouts of its operands;
      a carried value keeps the layout the layer gives it (the caller slices the first
      one), so consecutive layers need no resharding.
    - Results are brought to their required layouts: gradients to their parameter's,
      the loss and the optimizer's scalars replicated.

    Ops whose local computation depends on where the rank's part lies get `mtp.layout`, a
    laid-out type: a `dropout` of a split tensor (its operand's: the lowering numbers
    elements globally, so masks do not depend on the layout), a vocabulary-parallel
    `gather` or `embedding_grad` (the table's: rows are offset).

    **Distributed optimizer** (`distributed_optimizer` with `dp > 1`): `dp` is the mesh's
    first axis. An optimizer function (`mt.optimizer`: `@optimizer_step` and the pipeline
    stages' `grad_squares` / `optimizer_step`) takes each gradient (an argument marked
    `mt.grad`) and state sharded over `dp` along the first dimension `tp` does not split
    (Layout.h, `optimizerLayout`) and each parameter (`mt.param`) whole, sliced to that
    layout as the function enters (no communication), so the weight decay and the update
    compute on the rank's shard only; the rules above then sum the squared norms over `dp`
    and all-gather the new parameters into their (whole over `dp`) result layouts.

    **ZeRO-3** (module attribute `mtc.zero_stage` 3): the parameters themselves are laid
    out like their optimizer states (sharded over `dp`, never along `layers`), and the
    entry functions' data arguments split `batch` over `dp`, each rank's part arriving as
    its own (not sliced). The rules above then gather every parameter where it is used
    (inside a layer function, so one layer at a time, forward and backward), leave the
    gradients partial over `dp` and reduce-scatter them into the parameters' layouts at
    the result, sum the loss over `dp`, and the optimizer step updates shards without a
    final gather. A pipeline chunk's activations and their gradients leave it with `batch`
    still split over `dp`: they go to the same data-parallel rank's next stage.

    Not supported, reported as errors: a layout dimension mapped to
    another axis than `tp`, `ep` (the experts) or `cp` (the sequence) (`batch: dp` is the
    runtime's data parallelism), the distributed optimizer without `dp > 1`, `tp > 1` with
    a layout that splits no parameter, an `etp` other than `tp` and 1 (or 1 where ep x tp
    does not divide the experts), a module that is not outlined, an op without a partition
    rule.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mtc::mtp::MTPDialect",
                           "::mlir::func::FuncDialect"];
}

def MTPFilledAllToAllPass : Pass<"mtp-filled-all-to-all", "::mlir::func::FuncOp"> {
  let summary = "Move only the filled slots of dropless expert routing between ranks";
  let description = [{
    On a partitioned function: every `mtp.all_to_all` that moves the split of an axis
    between the expert and the slot (capacity) dimension of the function's dropless
    routing gets the filled counts of its slots, so that it sends only those (an
    all-to-all-v) instead of every slot. Dropless routing sizes every expert for all the
    tokens of a rank, so most slots are empty: the static all-to-all moves `experts / k`
    times the exact-fit rows.

    The routing of the function is its `mt.dispatch`, `mt.combine` and `mt.combine_grad`
    ops with that expert and slot dimension: all of them must route by the same indices,
    and be dropless on the rank (local capacity = local tokens: each expert can take every
    token). The slots each rank fills for an expert are then the prefix of its part of the
    slot dimension that its own tokens take (first come, first served), counted by an
    `mt.expert_load` of its indices. The all-to-all qualifies when the two dimensions lead
    its operand, the slot dimension is split over the moved axis alone on the routing side
    and the expert dimension is whole there; otherwise it stays as it is. Rows past the
    counts arrive as zeros: what dispatch and combine_grad leave there, and what combine
    and dispatch's gradient never read.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mtc::mtp::MTPDialect"];
}

def MTPadVocabularyPass : Pass<"mt-pad-vocabulary", "::mlir::ModuleOp"> {
  let summary = "Pad a vocabulary that tp does not divide, with the padded classes masked";
  let description = [{
    Runs on the model (before `mt-autodiff`) whose `mt.parallel` splits its vocabulary
    over `tp` (Megatron's default layout, or a `layout` mapping it to `tp`) when `tp` does
    not divide the vocabulary's size V. The vocabulary is the dimension `forward`'s
    `mt.cross_entropy` classifies over (the one the plan records).

    Megatron pads the vocabulary to a multiple of tp and lets the padded classes take part
    in the softmax, so its loss changes with tp. Here the padded classes are masked: every
    tensor type's vocabulary dimension becomes the next multiple of tp (parameters,
    arguments, results, every op), and before each `mt.cross_entropy` over it the logits
    get `-max/2` of their element type added at the positions >= V (`mt.iota`,
    `mt.greater`, `mt.mul`, `mt.add`: exactly 0 elsewhere). A padded class then has
    probability exactly 0, so the loss, and the gradient of every real row, is the same
    under every tp; the padded rows of the parameters get gradient 0. No token id reaches
    a padded row of an embedding table (the data are below V).

    The module's `mt.dims` holds the padded size and `mt.vocabulary` the real one
    (`{dim = "vocab", size = V}`): the plan writer records both, the runtime initialises
    the real elements exactly as without padding (Philox keyed on the unpadded index), the
    padded ones 0, and checkpoints and exports hold the real vocabulary only.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect"];
}

#endif // MTC_COMPILER_SHARDING_PASSES_TD
