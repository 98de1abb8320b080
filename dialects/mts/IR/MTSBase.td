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

    `mts-generate-schedule` (and `mtc::pipeline::buildSchedule`) generates five kinds.
    The figures are from the simulation with unit task times (F = B = W = 1, BW = 2):
    a bubble fraction is a stage's idle time over the span; "in flight" counts the
    (chunk, micro-batch) pairs whose F has run and whose B/BW has not, the activations a
    stage holds. In the pictures a column is one time slot, a row one stage; `F3`, `B3`,
    `W3` are micro-batch 3's tasks of the stage's first chunk (a BW takes two slots),
    lower case those of its second chunk, `..` is idle.

    **gpipe** (Huang et al. 2019): every stage runs all forwards, then all backwards.
    Bubble (P-1)/(m+P-1) on every stage; all m micro-batches in flight. P = 4, m = 4:

    ```
    F0 F1 F2 F3 .. .. .. .. .. .. .. .. .. B0 B0 B1 B1 B2 B2 B3 B3
    .. F0 F1 F2 F3 .. .. .. .. .. .. B0 B0 B1 B1 B2 B2 B3 B3 .. ..
    .. .. F0 F1 F2 F3 .. .. .. B0 B0 B1 B1 B2 B2 B3 B3 .. .. .. ..
    .. .. .. F0 F1 F2 F3 B0 B0 B1 B1 B2 B2 B3 B3 .. .. .. .. .. ..
    ```

    **1f1b** (PipeDream-Flush; Megatron's schedule without interleaving): stage s runs
    min(P-s-1, m) warm-up forwards, then one forward and one backward at a time, then the
    remaining backwards. The same bubble as gpipe, (P-1)/(m+P-1), with min(P-s, m)
    micro-batches in flight on stage s. P = 4, m = 4:

    ```
    F0 F1 F2 F3 .. .. .. .. .. .. B0 B0 .. B1 B1 .. B2 B2 .. B3 B3
    .. F0 F1 F2 .. .. .. .. B0 B0 F3 B1 B1 .. B2 B2 .. B3 B3 .. ..
    .. .. F0 F1 .. .. B0 B0 F2 B1 B1 F3 B2 B2 .. B3 B3 .. .. .. ..
    .. .. .. F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .. .. .. .. .. ..
    ```

    **interleaved** (Narayanan et al. 2021; Megatron's virtual pipeline): V >= 2 chunks
    per stage placed round-robin (chunk c on stage c % P). A stage's k-th forward is
    micro-batch (k / (P V)) P + k % P of its local chunk (k % (P V)) / P: P micro-batches
    per chunk, then the next chunk; backwards likewise with the chunks reversed. Stage s
    warms up with (P-s-1) * 2 + (V-1) * P forwards (all of them when m = P), then runs
    1F1B. Like Megatron, it needs m to be a multiple of P. With chunk tasks of unit time
    (a chunk is 1/V of a stage) every stage idles 3(P-1) slots against 3 V m of work:
    bubble (P-1)/(V m + P-1), Megatron's (P-1)/(V m) of the ideal time (exact for
    m > P; more for m = P). P = 2, V = 2, m = 4:

    ```
    F0 F1 f0 f1 F2 .. b0 b0 F3 b1 b1 f2 B0 B0 f3 B1 B1 .. b2 b2 .. b3 b3 B2 B2 B3 B3
    .. F0 F1 f0 b0 b0 f1 b1 b1 F2 B0 B0 F3 B1 B1 f2 b2 b2 f3 b3 b3 B2 B2 B3 B3 .. ..
    ```

    **zb-h1** (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", the handcrafted ZB-H1):
    the backward is split into B, which the previous stage waits for, and W, which only
    the gradient reduction needs. F and B keep 1F1B's order, so the in-flight counts are
    1F1B's; stage s runs the W of micro-batch i-s right after the B of micro-batch i and
    the rest at the end, so the later stages defer their W into the cool-down where 1F1B
    idles. For m >= P the span is 3m + P-1: every stage idles P-1 slots against 1F1B's
    3(P-1), a third. P = 4, m = 4:

    ```
    F0 F1 F2 F3 .. .. .. B0 W0 B1 W1 B2 W2 B3 W3
    .. F0 F1 F2 .. .. B0 F3 B1 W0 B2 W1 B3 W2 W3
    .. .. F0 F1 .. B0 F2 B1 F3 B2 W0 B3 W1 W2 W3
    .. .. .. F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3
    ```

    **zb-v** (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"): V = 2
    chunks per stage placed V-shaped: stage s runs chunks s and 2P-1-s, so the forward
    goes down the stages and back up (chunks P-1 and P hand over locally on the last
    stage) and stage 0 holds both the embedding and the loss. The order is not the
    paper's handcrafted one but a unit-time list schedule in the spirit of the reference
    implementation's greedy variant: each stage runs, at every step, the first that is
    ready of (1) the B of its oldest micro-batch, (2) a forward,
    while it holds fewer than 2P chunk activations (F done, W not: 1F1B's peak on its
    first stage, as a chunk is half a stage), (3) its oldest deferred W; of its two
    chunks the later goes first. For m >= P it idles at most 2(P-1) chunk slots, a third
    of 1F1B's (ZB-H1's bubble); often P-1. P = 2, m = 4:

    ```
    F0 F1 F2 f0 b0 w0 f1 B0 b1 W0 F3 B1 w1 f2 b2 W1 w2 B2 W2 f3 b3 w3 .. B3 W3
    .. F0 f0 F1 f1 b0 B0 w0 F2 b1 B1 W0 f2 w1 F3 b2 B2 W1 f3 w2 W2 b3 B3 w3 W3
    ```

    The generators only order the compute tasks. A send follows the task whose result it
    carries; a task that needs a message receives it right before it runs, after
    receiving every earlier message of the same peer it has not received yet (so the
    receives follow the sender's order; those messages were sent before the one needed,
    so receiving them early never delays the stage).

    The plan's "pipeline" object (`mtc::pipeline::pipelineToJSON`) holds one schedule per
    admissible micro-batch count, with every stage's tasks, bubble fraction, in-flight
    count and the start slot of every compute task from this simulation.
  }];
}

#endif // MTC_DIALECTS_MTS_IR_MTSBASE_TD
