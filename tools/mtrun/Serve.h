//===- Serve.h - `mtrun serve` ------------------------------------*- C++ -*-===//
//
// A text-generation HTTP server over a plan's `logits` function (docs/user-guide.md,
// "Serving"): Megatron's `PUT /api` and OpenAI's `POST /v1/completions`
// (runtime/generate/CompletionRequest.h), through Debian's cpp-httplib.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTRUN_SERVE_H
#define MTC_TOOLS_MTRUN_SERVE_H

namespace mtc::rt {

/// Runs `mtrun serve` with the arguments after `serve` (`argv[0]` is "serve"); returns the
/// exit status.
int runServe(int argc, char **argv);

} // namespace mtc::rt

#endif // MTC_TOOLS_MTRUN_SERVE_H
