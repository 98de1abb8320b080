// RUN: mt-opt %s -split-input-file -verify-diagnostics

// Tests that a schedule kind the generators do not know is an error.
// expected-error @+1 {{'mts.schedule' op has unknown kind 'zb-h3' (expected gpipe, 1f1b, interleaved or zb-h1)}}
mts.schedule "zb-h3" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
  }
}

// -----

// Tests that the counts must be positive.
// expected-error @+1 {{needs positive stages, virtual_stages and micro_batches, not 1, 1 and 0}}
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 0 chunk_stages [0] {
  mts.stage 0 {
  }
}

// -----

// Tests that every chunk has a stage.
// expected-error @+1 {{has 1 chunk_stages; stages * virtual_stages is 2}}
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
  }
  mts.stage 1 {
  }
}

// -----

// Tests that a chunk's stage exists.
// expected-error @+1 {{places chunk 1 on stage 2, which does not exist (stages 0 to 1)}}
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 2] {
  mts.stage 0 {
  }
  mts.stage 1 {
  }
}

// -----

// Tests that every stage runs virtual_stages chunks.
// expected-error @+1 {{places 2 chunk(s) on stage 0; every stage runs virtual_stages = 1}}
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 0] {
  mts.stage 0 {
  }
  mts.stage 1 {
  }
}

// -----

// Tests that a schedule holds only stages.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  // expected-error @+1 {{'mts.schedule' op is not an mts.stage: a schedule holds only its stages}}
  mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
    mts.stage 0 {
      mts.forward chunk 0 mb 0
      mts.backward chunk 0 mb 0
      mts.reduce_gradients
      mts.optimizer_step
    }
  }
}

// -----

// Tests that the stages come in order.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  // expected-error @+1 {{'mts.stage' op has index 1; the schedule's stage 0 must come here}}
  mts.stage 1 {
  }
  mts.stage 0 {
  }
}

// -----

// Tests that there is one stage per pipeline stage.
// expected-error @+1 {{has 1 stage(s), not stages = 2}}
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
  }
}

// -----

// Tests that a stage holds only tasks.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.schedule' op is not a task: a stage holds only mts tasks}}
    mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
      mts.stage 0 {
        mts.forward chunk 0 mb 0
        mts.backward chunk 0 mb 0
        mts.reduce_gradients
        mts.optimizer_step
      }
    }
  }
}

// -----

// Tests that a task names a chunk that exists.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.forward' op names chunk 1, which does not exist (chunks 0 to 0)}}
    mts.forward chunk 1 mb 0
  }
}

// -----

// Tests that a task names a chunk of its own stage.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.forward' op names chunk 1, which runs on stage 1, not on stage 0}}
    mts.forward chunk 1 mb 0
  }
  mts.stage 1 {
  }
}

// -----

// Tests that a task names a micro-batch of the step.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 2 chunk_stages [0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.backward' op names micro-batch 2; the step has 2 (0 to 1)}}
    mts.backward chunk 0 mb 2
  }
}

// -----

// Tests that chunk 0 sends no gradient.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.send_gradient' op has no previous chunk to exchange with: chunk 0 reads the batch and sends no gradient}}
    mts.send_gradient chunk 0 mb 0 to 1
  }
  mts.stage 1 {
  }
}

// -----

// Tests that the last chunk sends no activation (stage 0 runs it here).
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [1, 0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.send_activation' op has no next chunk to exchange with: the last chunk's output is the loss}}
    mts.send_activation chunk 1 mb 0 to 1
  }
  mts.stage 1 {
  }
}

// -----

// Tests that consecutive chunks on one stage do not send to each other.
mts.schedule "interleaved" stages 1 virtual_stages 2 micro_batches 1 chunk_stages [0, 0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-error @+1 {{'mts.send_activation' op exchanges with chunk 1 on the same stage: consecutive chunks on one stage hand over locally, without send or receive}}
    mts.send_activation chunk 0 mb 0 to 0
  }
}

// -----

// Tests that the peer is the stage of the neighbouring chunk.
mts.schedule "1f1b" stages 3 virtual_stages 1 micro_batches 1 chunk_stages [1, 0, 2] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.recv_gradient' op names peer 1, but chunk 2 runs on stage 2}}
    mts.recv_gradient chunk 1 mb 0 from 1
  }
  mts.stage 1 {
  }
  mts.stage 2 {
  }
}

// -----

// Tests that optimizer_step is the stage's last task.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
    // expected-error @+1 {{'mts.optimizer_step' op must be the stage's last task}}
    mts.optimizer_step
    mts.forward chunk 0 mb 0
  }
}

// -----

// Tests that a task runs once.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    // expected-note @+1 {{the first one}}
    mts.forward chunk 0 mb 0
    // expected-error @+1 {{'mts.forward' op repeats forward chunk 0 mb 0: every task runs once per step}}
    mts.forward chunk 0 mb 0
  }
}

// -----

// Tests that a forward waits for its input from the previous stage.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [1, 0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.forward' op runs before its input is here: recv_activation chunk 1 mb 0 must come first}}
    mts.forward chunk 1 mb 0
  }
  mts.stage 1 {
  }
}

// -----

// Tests that a forward waits for the previous chunk on its own stage.
mts.schedule "interleaved" stages 1 virtual_stages 2 micro_batches 1 chunk_stages [0, 0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.forward' op runs before its input is here: the forward of chunk 0 mb 0 must come first}}
    mts.forward chunk 1 mb 0
  }
}

// -----

// Tests that a micro-batch's backward is either whole or split.
mts.schedule "zb-h1" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-note @+1 {{the other one}}
    mts.backward chunk 0 mb 0
    // expected-error @+1 {{'mts.backward_input' op mixes backward with backward_input/backward_weight for chunk 0 mb 0: a micro-batch's backward is one or the other}}
    mts.backward_input chunk 0 mb 0
  }
}

// -----

// Tests that a backward follows its forward.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.backward' op runs before the forward of chunk 0 mb 0}}
    mts.backward chunk 0 mb 0
  }
}

// -----

// Tests that a backward waits for the gradient of its output.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.send_activation chunk 0 mb 0 to 1
    // expected-error @+1 {{'mts.backward_input' op runs before the gradient of its output is here: recv_gradient chunk 0 mb 0 must come first}}
    mts.backward_input chunk 0 mb 0
  }
  mts.stage 1 {
  }
}

// -----

// Tests that a backward of a chunk waits for the next chunk's backward on its own stage.
mts.schedule "interleaved" stages 1 virtual_stages 2 micro_batches 1 chunk_stages [0, 0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.forward chunk 1 mb 0
    // expected-error @+1 {{'mts.backward' op runs before the gradient of its output is here: the backward of chunk 1 mb 0 must come first}}
    mts.backward chunk 0 mb 0
  }
}

// -----

// Tests that the gradient reduction follows the stage's last backward.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-note @+1 {{the reduction}}
    mts.reduce_gradients
    // expected-error @+1 {{'mts.backward' op comes after the stage's reduce_gradients, which must follow its last backward and backward_weight}}
    mts.backward chunk 0 mb 0
  }
}

// -----

// Tests that the gradient reduction follows the stage's last backward_weight.
mts.schedule "zb-h1" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward_input chunk 0 mb 0
    // expected-note @+1 {{the reduction}}
    mts.reduce_gradients
    // expected-error @+1 {{'mts.backward_weight' op comes after the stage's reduce_gradients}}
    mts.backward_weight chunk 0 mb 0
  }
}

// -----

// Tests that W follows B.
mts.schedule "zb-h1" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-error @+1 {{'mts.backward_weight' op runs before backward_input chunk 0 mb 0}}
    mts.backward_weight chunk 0 mb 0
  }
}

// -----

// Tests that a send follows the task whose result it sends.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    // expected-error @+1 {{'mts.send_activation' op sends before the forward of chunk 0 mb 0}}
    mts.send_activation chunk 0 mb 0 to 1
  }
  mts.stage 1 {
  }
}

// -----

// Tests that the optimizer step follows the gradient reduction.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward chunk 0 mb 0
    // expected-error @+1 {{'mts.optimizer_step' op comes before the stage's reduce_gradients}}
    mts.optimizer_step
  }
}

// -----

// Tests that every stage ends with the optimizer step.
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  // expected-error @+1 {{'mts.stage' op has no optimizer_step: every stage ends with one}}
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
  }
}

// -----

// Tests that every micro-batch runs through every chunk.
// expected-error @+1 {{'mts.schedule' op has no forward of chunk 0 mb 1 (on stage 0)}}
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 2 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// -----

// Tests that every forward has its backward.
// expected-error @+1 {{'mts.schedule' op has no backward (or backward_input and backward_weight) of chunk 0 mb 0 (on stage 0)}}
mts.schedule "1f1b" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// -----

// Tests that a split backward has its W.
// expected-error @+1 {{'mts.schedule' op has no backward_weight of chunk 0 mb 0 (on stage 0)}}
mts.schedule "zb-h1" stages 1 virtual_stages 1 micro_batches 1 chunk_stages [0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.backward_input chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// -----

// Tests that a receive has its send.
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.recv_gradient chunk 0 mb 0 from 1
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
  mts.stage 1 {
    // expected-error @+1 {{'mts.recv_activation' op has no matching send: stage 0 sends 0 message(s) to stage 1 and this is receive 1}}
    mts.recv_activation chunk 1 mb 0 from 0
    mts.forward chunk 1 mb 0
    mts.backward chunk 1 mb 0
    mts.send_gradient chunk 1 mb 0 to 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// -----

// Tests that the receives from a stage are in the order it sends (messages carry no tags).
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 2 chunk_stages [0, 1] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-note @+1 {{the send}}
    mts.send_activation chunk 0 mb 0 to 1
    mts.forward chunk 0 mb 1
    mts.send_activation chunk 0 mb 1 to 1
    mts.recv_gradient chunk 0 mb 0 from 1
    mts.backward chunk 0 mb 0
    mts.recv_gradient chunk 0 mb 1 from 1
    mts.backward chunk 0 mb 1
    mts.reduce_gradients
    mts.optimizer_step
  }
  mts.stage 1 {
    // expected-error @+1 {{'mts.recv_activation' op is receive 1 from stage 0, whose send 1 to stage 1 is send_activation chunk 0 mb 0 to 1: receives from a stage must be in the order it sends}}
    mts.recv_activation chunk 1 mb 1 from 0
    mts.recv_activation chunk 1 mb 0 from 0
    mts.forward chunk 1 mb 0
    mts.backward chunk 1 mb 0
    mts.send_gradient chunk 1 mb 0 to 0
    mts.forward chunk 1 mb 1
    mts.backward chunk 1 mb 1
    mts.send_gradient chunk 1 mb 1 to 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// -----

// Tests that a schedule whose stages wait on each other is reported with the task every
// stage is blocked at: stage 0 waits for the gradient before it sends the activation
// stage 1 waits for.
// expected-error @+1 {{'mts.schedule' op deadlocks: its stages wait on each other}}
mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    // expected-note @+1 {{stage 0 is blocked at recv_gradient chunk 0 mb 0 from 1}}
    mts.recv_gradient chunk 0 mb 0 from 1
    mts.send_activation chunk 0 mb 0 to 1
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
  mts.stage 1 {
    // expected-note @+1 {{stage 1 is blocked at recv_activation chunk 1 mb 0 from 0}}
    mts.recv_activation chunk 1 mb 0 from 0
    mts.forward chunk 1 mb 0
    mts.backward chunk 1 mb 0
    mts.send_gradient chunk 1 mb 0 to 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}
