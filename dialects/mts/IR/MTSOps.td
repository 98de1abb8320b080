//===- MTSOps.td - mts dialect operations -------------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTS_IR_MTSOPS_TD
#define MTC_DIALECTS_MTS_IR_MTSOPS_TD

include "dialects/mts/IR/MTSBase.td"
include "mlir/IR/OpBase.td"

class MTS_Op<string mnemonic, list<Trait> traits = []> : Op<MTS_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Schedule structure
//===----------------------------------------------------------------------===//

def MTS_ScheduleOp : MTS_Op<"schedule", [NoTerminator, SingleBlock, IsolatedFromAbove]> {
  let summary = "one training step's pipeline schedule: one task list per stage";
  let description = [{
    ```mlir
    mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 4 chunk_stages [0, 1] {
      mts.stage 0 { ... }
      mts.stage 1 { ... }
    }
    ```
    `kind` is the generator that made it (`gpipe`, `1f1b`, `interleaved`, `zb-h1`);
    `chunk_stages` has `stages * virtual_stages` entries, the stage of each chunk. The
    body holds `mts.stage 0` to `mts.stage P-1` in order. The verifier checks the whole
    schedule (see the dialect's description), deadlock included.
  }];
  let arguments = (ins StrAttr:$kind, I64Attr:$stages, I64Attr:$virtual_stages,
                       I64Attr:$micro_batches, DenseI64ArrayAttr:$chunk_stages);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `stages` $stages `virtual_stages` $virtual_stages `micro_batches` $micro_batches
    `chunk_stages` $chunk_stages attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$kind, "int64_t":$stages,
                                 "int64_t":$virtualStages, "int64_t":$microBatches,
                                 "::llvm::ArrayRef<int64_t>":$chunkStages)>];
  let extraClassDeclaration = [{
    /// The stages, in order (the verifier checks there is one per index).
    auto getStageOps() { return getBody().front().getOps<::mtc::mts::StageOp>(); }
  }];
}

def MTS_StageOp : MTS_Op<"stage", [HasParent<"ScheduleOp">, NoTerminator, SingleBlock]> {
  let summary = "the ordered task list of one pipeline stage";
  let description = [{
    `mts.stage 1 { mts.recv_activation chunk 1 mb 0 from 0 ... }`: what every rank of
    stage 1 runs, in order.
  }];
  let arguments = (ins I64Attr:$index);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index attr-dict-with-keyword $body";
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "int64_t":$index)>];
}

//===----------------------------------------------------------------------===//
// Compute tasks
//===----------------------------------------------------------------------===//

class MTS_TaskOp<string mnemonic> : MTS_Op<mnemonic, [HasParent<"StageOp">]>;

class MTS_ComputeOp<string mnemonic> : MTS_TaskOp<mnemonic> {
  let arguments = (ins I64Attr:$chunk, I64Attr:$micro_batch);
  let assemblyFormat = "`chunk` $chunk `mb` $micro_batch attr-dict";
}

def MTS_ForwardOp : MTS_ComputeOp<"forward"> {
  let summary = "forward of one chunk on one micro-batch (F)";
  let description = [{
    `mts.forward chunk 1 mb 3`: runs after the chunk's input for the micro-batch is here
    (received, or computed by the previous chunk on this stage; chunk 0 reads the batch).
  }];
}

def MTS_BackwardOp : MTS_ComputeOp<"backward"> {
  let summary = "whole backward of one chunk on one micro-batch (BW)";
  let description = [{
    `mts.backward chunk 1 mb 3`: input and weight gradients together, after the forward
    and the gradient of the chunk's output (the last chunk starts from the loss).
  }];
}

def MTS_BackwardInputOp : MTS_ComputeOp<"backward_input"> {
  let summary = "input gradient of one chunk on one micro-batch (B)";
  let description = [{
    `mts.backward_input chunk 1 mb 3`: the part of the backward the previous chunk waits
    for; the weight gradient is a separate `backward_weight`.
  }];
}

def MTS_BackwardWeightOp : MTS_ComputeOp<"backward_weight"> {
  let summary = "weight gradient of one chunk on one micro-batch (W)";
  let description = [{
    `mts.backward_weight chunk 1 mb 3`: after the chunk's `backward_input` of the same
    micro-batch; nothing else waits for it but the gradient reduction.
  }];
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

class MTS_TransferOp<string mnemonic, string direction> : MTS_TaskOp<mnemonic> {
  let arguments = (ins I64Attr:$chunk, I64Attr:$micro_batch, I64Attr:$peer);
  let assemblyFormat = "`chunk` $chunk `mb` $micro_batch `" # direction # "` $peer attr-dict";
}

def MTS_SendActivationOp : MTS_TransferOp<"send_activation", "to"> {
  let summary = "send a chunk's output to the stage of the next chunk";
  let description = [{
    `mts.send_activation chunk 0 mb 3 to 1`: matches stage 1's `recv_activation chunk 1
    mb 3 from 0`. Does not block.
  }];
}

def MTS_RecvActivationOp : MTS_TransferOp<"recv_activation", "from"> {
  let summary = "receive a chunk's input from the stage of the previous chunk";
  let description = [{
    `mts.recv_activation chunk 1 mb 3 from 0`: waits for stage 0's `send_activation
    chunk 0 mb 3 to 1`.
  }];
}

def MTS_SendGradientOp : MTS_TransferOp<"send_gradient", "to"> {
  let summary = "send the gradient of a chunk's input to the stage of the previous chunk";
  let description = [{
    `mts.send_gradient chunk 1 mb 3 to 0`: matches stage 0's `recv_gradient chunk 0 mb 3
    from 1`. Does not block.
  }];
}

def MTS_RecvGradientOp : MTS_TransferOp<"recv_gradient", "from"> {
  let summary = "receive the gradient of a chunk's output from the stage of the next chunk";
  let description = [{
    `mts.recv_gradient chunk 0 mb 3 from 1`: waits for stage 1's `send_gradient chunk 1
    mb 3 to 0`.
  }];
}

//===----------------------------------------------------------------------===//
// Once per step
//===----------------------------------------------------------------------===//

def MTS_ReduceGradientsOp : MTS_TaskOp<"reduce_gradients"> {
  let summary = "the stage's gradient reduction, after its last W/BW";
  let description = [{
    Sums the stage's gradients over the data-parallel ranks (and, for tied embeddings,
    over the first and last stage: Megatron's embedding group). Once per step.
  }];
  let assemblyFormat = "attr-dict";
}

def MTS_OptimizerStepOp : MTS_TaskOp<"optimizer_step"> {
  let summary = "the optimizer step, the stage's last task";
  let assemblyFormat = "attr-dict";
}

#endif // MTC_DIALECTS_MTS_IR_MTSOPS_TD
