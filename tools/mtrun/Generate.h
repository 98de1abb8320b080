//===- Generate.h - `mtrun generate` --------------------------*- C++ -*-===//
//
// The command line of text generation: `mtrun generate PLAN --load CKPT --prompt TEXT`
// (docs/user-guide.md, "Generating text").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTRUN_GENERATE_H
#define MTC_TOOLS_MTRUN_GENERATE_H

namespace mtc::rt {

/// Runs `mtrun generate` with the arguments after `generate` (`argv[0]` is "generate");
/// returns the exit status.
int runGenerate(int argc, char **argv);

} // namespace mtc::rt

#endif // MTC_TOOLS_MTRUN_GENERATE_H
