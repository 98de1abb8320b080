//===- KernelABITest.cpp - The runtime defines what the kernel ABI names --===//
//
// The runtime's definitions include runtime/exec/KernelABI.h, so their signatures are
// checked by the compiler. What remains to test is that an executable linking the executor
// exports every function the ABI says a compiled object imports (dlopen resolves the
// object's imports against these), and that the names the compiler emits (the MTC_ABI_*
// strings) are those symbols.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/KernelABI.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <set>
#include <string>

namespace {

/// The identifiers of MTC_ABI_FOR_EACH_IMPORT.
std::set<std::string> importedSymbols() {
  std::set<std::string> names;
#define MTC_ADD_NAME(name) names.insert(#name);
  MTC_ABI_FOR_EACH_IMPORT(MTC_ADD_NAME)
#undef MTC_ADD_NAME
  return names;
}

} // namespace

TEST(KernelABITest, TheExecutorExportsEveryImport) {
  for (const std::string &name : importedSymbols())
    EXPECT_NE(::dlsym(RTLD_DEFAULT, name.c_str()), nullptr) << name << " is not exported";
}

TEST(KernelABITest, TheNamesTheCompilerEmitsAreTheImportedSymbols) {
  std::set<std::string> imports = importedSymbols();
  for (std::string name :
       {MTC_ABI_ALL_REDUCE, MTC_ABI_ALL_GATHER, MTC_ABI_REDUCE_SCATTER, MTC_ABI_ALL_TO_ALL,
        MTC_ABI_SHIFT, MTC_ABI_ALL_TO_ALL_FILLED, MTC_ABI_MESH_COORDINATE, MTC_ABI_DROPOUT_KEY,
        MTC_ABI_DROPOUT_LAYER, MTC_ABI_KERNEL_ALLOC,
        MTC_ABI_KERNEL_CALLOC, MTC_ABI_KERNEL_ALIGNED_ALLOC, MTC_ABI_KERNEL_FREE,
        MTC_ABI_KERNEL_WORKSPACE, MTC_ABI_KERNEL_WORKSPACE_RELEASE, MTC_ABI_LOSS_SCALE,
        MTC_ABI_C_INTERFACE_PREFIX MTC_ABI_BATCH_MATMUL_F32,
        MTC_ABI_C_INTERFACE_PREFIX MTC_ABI_BATCH_MATMUL_BF16})
    EXPECT_EQ(imports.count(name), 1u) << name;
  EXPECT_EQ(imports.size(), 18u);
}

TEST(KernelABITest, CodesKeepTheirValues) {
  // Plans compiled earlier pass these integers: a code never changes meaning.
  EXPECT_EQ(MTC_F32, 0);
  EXPECT_EQ(MTC_F64, 1);
  EXPECT_EQ(MTC_SUM, 0);
  EXPECT_EQ(MTC_MAX, 1);
  EXPECT_EQ(MTC_DROPOUT_KEY_SEED, 0);
  EXPECT_EQ(MTC_DROPOUT_KEY_ACTIVE, 4);
}

TEST(KernelABITest, AContextIsReadOnlyWhenItIsOfThisVersion) {
  int mesh = 0, dropout = 0, workspace = 0;
  MtcKernelContext context = mtc_kernel_context(&mesh, &dropout, &workspace, sizeof workspace);
  EXPECT_EQ(context.size, sizeof(MtcKernelContext));
  EXPECT_EQ(context.version, MTC_KERNEL_CONTEXT_VERSION);
  EXPECT_EQ(context.mesh, &mesh);
  EXPECT_EQ(context.dropout, &dropout);
  EXPECT_EQ(context.workspace, &workspace);
  EXPECT_EQ(context.workspace_bytes, sizeof workspace);
  EXPECT_EQ(mtc_kernel_context_checked(&context), &context);
  EXPECT_EQ(mtc_kernel_context_checked(nullptr), nullptr);
  MtcKernelContext older = context;
  older.version = MTC_KERNEL_CONTEXT_VERSION - 1;
  EXPECT_EQ(mtc_kernel_context_checked(&older), nullptr);
  MtcKernelContext smaller = context;
  smaller.size = sizeof(MtcKernelContext) - sizeof(void *);
  EXPECT_EQ(mtc_kernel_context_checked(&smaller), nullptr);
  // The exported version's name, which KernelLibrary looks up.
  EXPECT_STREQ(MTC_ABI_KERNEL_CONTEXT_VERSION, "mtc_kernel_context_version");
}

TEST(KernelABITest, TheLossScaleIsTheContextsAndOneWithoutOne) {
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(mtc_loss_scale(&context), 1.0f);
  context.loss_scale = 65536.0f;
  EXPECT_EQ(mtc_loss_scale(&context), 65536.0f);
  EXPECT_EQ(mtc_loss_scale(nullptr), 1.0f);
  MtcKernelContext older = context;
  older.version = MTC_KERNEL_CONTEXT_VERSION - 1;
  EXPECT_EQ(mtc_loss_scale(&older), 1.0f);
  context.loss_scale = 0.0f;
  EXPECT_EQ(mtc_loss_scale(&context), 1.0f);
}
