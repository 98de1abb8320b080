//===- ModulePartitionTest.cpp - cutting the step's LLVM module into parts -===//
//
// partitionModule on a module shaped like the x86 step: exported functions, OpenMP-style
// internal functions and strings they share, a linkonce function, an exported global. Each
// part must verify; every external definition must be in exactly one part, every local one in
// the parts that use it and nowhere else; the cut must not depend on anything but the module.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/ModulePartition.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace llvm;

namespace {

// big > medium > small in instructions; @outlined and @shared are what OpenMP's translation
// leaves (a region and its location string); @tiny_helper is merged by the linker.
constexpr const char *kStep = R"(
@shared = private constant [4 x i8] c"loc\00"
@unused_local = internal global i32 0
@version = constant i32 2

define internal void @outlined(ptr %p) {
  store i8 0, ptr %p
  ret void
}

define linkonce_odr void @tiny_helper(ptr %p) {
  ret void
}

define void @big(ptr %p) {
  call void @outlined(ptr @shared)
  call void @tiny_helper(ptr %p)
  %a = load i32, ptr %p
  %b = add i32 %a, 1
  %c = add i32 %b, 1
  %d = add i32 %c, 1
  %e = add i32 %d, 1
  %f = add i32 %e, 1
  store i32 %f, ptr %p
  ret void
}

define void @medium(ptr %p) {
  call void @outlined(ptr @shared)
  %a = load i32, ptr %p
  %b = add i32 %a, 1
  %c = add i32 %b, 1
  store i32 %c, ptr %p
  ret void
}

define void @small(ptr %p) {
  call void @big(ptr %p)
  ret void
}
)";

std::unique_ptr<Module> parseStep(LLVMContext &context) {
  SMDiagnostic error;
  std::unique_ptr<Module> module = parseAssemblyString(kStep, error, context);
  if (!module)
    ADD_FAILURE() << error.getMessage().str();
  return module;
}

/// The names of the functions and globals each part defines.
std::vector<std::vector<std::string>>
definitions(const SmallVector<std::unique_ptr<Module>> &parts) {
  std::vector<std::vector<std::string>> result;
  for (const std::unique_ptr<Module> &part : parts) {
    std::vector<std::string> names;
    for (const GlobalValue &value : part->global_values())
      if (!value.isDeclaration())
        names.push_back(value.getName().str());
    result.push_back(names);
  }
  return result;
}

TEST(ModulePartitionTest, EveryExternalDefinitionOnceAndLocalsWhereUsed) {
  LLVMContext context;
  std::unique_ptr<Module> module = parseStep(context);
  ASSERT_TRUE(module);
  SmallVector<std::unique_ptr<Module>> parts = mtc::codegen::partitionModule(*module, 2);
  ASSERT_EQ(parts.size(), 2u);
  std::map<std::string, int> defined;
  for (const std::unique_ptr<Module> &part : parts) {
    std::string errors;
    raw_string_ostream os(errors);
    EXPECT_FALSE(verifyModule(*part, &os)) << errors;
    for (const GlobalValue &value : part->global_values())
      if (!value.isDeclaration())
        ++defined[value.getName().str()];
  }
  // External: once each; the exported global in part 0.
  EXPECT_EQ(defined["big"], 1);
  EXPECT_EQ(defined["medium"], 1);
  EXPECT_EQ(defined["small"], 1);
  EXPECT_EQ(defined["version"], 1);
  EXPECT_TRUE(parts[0]->getGlobalVariable("version") &&
              !parts[0]->getGlobalVariable("version")->isDeclaration());
  // Largest first to the least loaded part: big alone, medium and small together.
  EXPECT_FALSE(parts[0]->getFunction("big")->isDeclaration());
  EXPECT_FALSE(parts[1]->getFunction("medium")->isDeclaration());
  EXPECT_FALSE(parts[1]->getFunction("small")->isDeclaration());
  // small calls big in the other part: a declaration there.
  EXPECT_TRUE(parts[1]->getFunction("big")->isDeclaration());
  // Locals: in both parts (both use @outlined and @shared); the unused global in none.
  EXPECT_EQ(defined["outlined"], 2);
  EXPECT_EQ(defined.count("unused_local"), 0u);
  for (const std::unique_ptr<Module> &part : parts)
    EXPECT_TRUE(part->getNamedGlobal("shared") &&
                part->getNamedGlobal("shared")->hasPrivateLinkage());
  // The linkonce helper goes wherever it is used (the linker keeps one).
  EXPECT_EQ(defined["tiny_helper"], 1);
  EXPECT_FALSE(parts[0]->getFunction("tiny_helper")->isDeclaration());
  // The input is unchanged.
  EXPECT_TRUE(module->getNamedGlobal("unused_local"));
}

TEST(ModulePartitionTest, TheCutDependsOnTheModuleOnly) {
  LLVMContext first, second;
  std::unique_ptr<Module> a = parseStep(first), b = parseStep(second);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(definitions(mtc::codegen::partitionModule(*a, 2)),
            definitions(mtc::codegen::partitionModule(*b, 2)));
}

TEST(ModulePartitionTest, NoMorePartsThanExternalFunctions) {
  LLVMContext context;
  std::unique_ptr<Module> module = parseStep(context);
  ASSERT_TRUE(module);
  EXPECT_EQ(mtc::codegen::partitionModule(*module, 8).size(), 3u);
  // One part (also for 0) is the module: every definition but the unused local.
  for (unsigned maxParts : {0u, 1u}) {
    SmallVector<std::unique_ptr<Module>> parts = mtc::codegen::partitionModule(*module, maxParts);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(definitions(parts)[0],
              (std::vector<std::string>{"outlined", "tiny_helper", "big", "medium", "small",
                                        "shared", "version"}));
  }
}

} // namespace
