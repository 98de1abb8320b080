//===- MTSBase.td - mts dialect definition ------------------*- tablegen -*-===//
//
// `mts` is the pipeline schedule dialect: what every pipeline stage runs in one training
// step, in order, as data the verifier can check and the runtime's executor runs.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MTS_IR_MTSBASE_TD
#define MTC_DIALECTS_MTS_IR_MTSBASE_TD

include "mlir/IR/OpBase.td"

def MTS_Dialect : Dialect {
  let name = "mts";
  let cppNamespace = "::mtc::mts";
  let summary = "Pipeline-parallel schedules: the ordered task list of every stage";
  let description = [{
    A pipeline cuts the model into `P * V` chunks (`P` stages, `V` virtual stages: chunks
    per stage); chunk 0 also holds the embedding, the last chunk the final norm, head and
    loss, and `chunk_stages[c]` is the stage that runs chunk `c`. One step runs `m`
    micro-batches through every chunk. An `mts.schedule` holds one `mts.stage` per stage,
    whose body is that stage's task list, run in order by every rank of the stage:

    | task | meaning |
    |---|---|
    | `forward chunk c mb i` (F) | forward of chunk `c` on micro-batch `i`; keeps what backward needs |
    | `backward chunk c mb i` (BW) | the whole backward (schedules without the B/W split) |
    | `backward_input chunk c mb i` (B) | the gradient of the chunk's input |
    | `backward_weight chunk c mb i` (W) | the gradient of the chunk's weights |
    | `send_activation chunk c mb i to s` | chunk `c`'s output, to the stage of chunk `c+1` |
    | `recv_activation chunk c mb i from s` | chunk `c`'s input, from the stage of chunk `c-1` |
    | `send_gradient chunk c mb i to s` | the gradient of chunk `c`'s input, to the stage of chunk `c-1` |
    | `recv_gradient chunk c mb i from s` | the gradient of chunk `c`'s output, from the stage of chunk `c+1` |
    | `reduce_gradients` | the stage's data-parallel (and embedding-group) gradient reduction |
    | `optimizer_step` | the optimizer step, last |

    Consecutive chunks on one stage hand over locally, with no send or receive. Sends do
    not block; a receive waits for its data. Like NCCL's send/recv, messages carry no
    tags: the messages from stage `a` to stage `b` are received in the order `a` sends
    them, so `b`'s receives from `a` must be in the order of `a`'s sends to `b`.

    The verifier of `mts.schedule` checks that a schedule is one step of training and can
    run: every task names a chunk of its stage and a micro-batch below `m`; every
    (chunk, micro-batch) has exactly one F and either one BW or one B and one W; every
    send has its receive (same micro-batch, matching kind and chunk, in order between each
    pair of stages) and none is missing; within a stage F follows the arrival of its input,
    B/BW follow F and the arrival of the output's gradient, W follows B, sends follow what
    they send; `reduce_gradients` comes once, after the stage's last W/BW, and
    `optimizer_step` once, last. It then simulates the schedule (sends non-blocking, a
    receive waiting for its send) and, when the stages block each other, reports the task
    every stage is blocked at.

    ## Schedules

    `mts-generate-schedule` (and `mtc::pipeline::buildSchedule`) generates these kinds.
    Bubble fractions are idle / span with unit task times F = B = W = 1, BW = 2; "in
    flight" counts the (chunk, micro-batch) pairs whose F is done and whose B/BW is not,
    i.e. the activations a stage holds. The pictures are P = 4, m = 8 (`.` is idle).

    **gpipe** (Huang et al. 2019): every stage runs all forwards, then all backwards.
    Bubble (P-1)/(m+P-1); stage `s` holds all `m` micro-batches in flight.

    ```
    F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  .  .  .  .  .  BW0   BW1   BW2 ...
    .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  .  BW0   BW1   BW2   BW3 ...
    ```

    **1f1b** (PipeDream-Flush, Megatron's default): stage `s` runs `min(P-s-1, m)`
    warm-up forwards, then alternates one forward and one backward, then drains the
    remaining backwards. Same bubble as gpipe, (P-1)/(m+P-1), with only `min(P-s, m)`
    micro-batches in flight on stage `s`.

    **interleaved** (Narayanan et al. 2021, Megatron's virtual pipeline): `V >= 2` chunks
    per stage placed round-robin (`chunk_stages[c] = c % P`); the `V*m` (chunk,
    micro-batch) forwards of a stage go in groups of `P` micro-batches per chunk, the
    backwards likewise with the chunks reversed; stage `s` warms up with
    `(P-s-1)*2 + (V-1)*P` forwards (all of them when `m = P`), then runs 1F1B. Megatron
    requires `m` to be a multiple of `P`, and so does this generator. Bubble
    (P-1)/(V*m+P-1) in units of a whole-model pass: every stage idles `3(P-1)` chunk
    slots against `3*V*m` of work (measured: exact for `m > P`, slightly more for `m = P`).

    **zb-h1** (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", handcrafted schedule
    ZB-H1): the backward split into B (needed by the previous stage) and W (needed only by
    the optimizer). F and B keep 1F1B's order and in-flight counts; stage `s` runs W of
    micro-batch `i - s` right after B of micro-batch `i` and the rest at the end, so the
    late stages defer their W into the cool-down, where 1F1B idles. For `m >= P` the span
    is `3m + P - 1`: every stage idles `P-1` slots against 1F1B's `3(P-1)`, a third.

    ```
    1f1b, P = 4, m = 4, BW = 2 slots:        zb-h1, P = 4, m = 4:
    F0 F1 F2 F3 .  .  .  .  .  BW0 .  BW1 ...    F0 F1 F2 F3 .  .  .  B0 W0 B1 W1 B2 W2 B3 W3
    ```
  }];
}

#endif // MTC_DIALECTS_MTS_IR_MTSBASE_TD
