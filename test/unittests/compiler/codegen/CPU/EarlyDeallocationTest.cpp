//===- EarlyDeallocationTest.cpp - frees after the last use ---------------===//
//
// moveDeallocationsToLastUse on hand-written memref functions: where each free lands.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPUCodegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;

namespace {

class EarlyDeallocationTest : public ::testing::Test {
protected:
  EarlyDeallocationTest() {
    context.loadDialect<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect,
                        scf::SCFDialect>();
  }

  /// `source` with its frees moved, printed.
  std::string moved(const std::string &source) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    if (!module)
      return "";
    mtc::codegen::moveDeallocationsToLastUse(*module);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return text;
  }

  /// Whether `first` occurs in `text` before `second` (both must occur).
  static bool before(const std::string &text, const std::string &first,
                     const std::string &second) {
    size_t a = text.find(first), b = text.find(second);
    EXPECT_NE(a, std::string::npos) << first << " in\n" << text;
    EXPECT_NE(b, std::string::npos) << second << " in\n" << text;
    return a < b;
  }

  MLIRContext context;
};

// A temporary used by one op is freed right after it, before the next allocation.
TEST_F(EarlyDeallocationTest, FreedAfterLastUse) {
  std::string text = moved(R"mlir(
    func.func @f(%out: memref<4xf32>) {
      %c0 = arith.constant 0 : index
      %a = memref.alloc() : memref<4xf32>
      %x = memref.load %a[%c0] : memref<4xf32>
      %b = memref.alloc() : memref<4xf32>
      memref.store %x, %b[%c0] : memref<4xf32>
      memref.copy %b, %out : memref<4xf32> to memref<4xf32>
      memref.dealloc %a : memref<4xf32>
      memref.dealloc %b : memref<4xf32>
      return
    })mlir");
  EXPECT_TRUE(before(text, "memref.dealloc %alloc ", "memref.alloc() : memref<4xf32>\n    memref.store"))
      << text;
  EXPECT_TRUE(before(text, "memref.copy", "memref.dealloc %alloc_0")) << text;
}

// Uses through a view, inside a loop, and through an address passed to a call keep the
// buffer until the last of them.
TEST_F(EarlyDeallocationTest, ViewsLoopsAndAddressesAreUses) {
  std::string text = moved(R"mlir(
    func.func private @consume(i64)
    func.func @f() {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %a = memref.alloc() : memref<2x2xf32>
      %v = memref.collapse_shape %a [[0, 1]] : memref<2x2xf32> into memref<4xf32>
      scf.for %i = %c0 to %c4 step %c1 {
        %x = memref.load %v[%i] : memref<4xf32>
      }
      %p = memref.extract_aligned_pointer_as_index %a : memref<2x2xf32> -> index
      %q = arith.index_cast %p : index to i64
      %marker = memref.alloc() : memref<8xf32>
      func.call @consume(%q) : (i64) -> ()
      memref.dealloc %marker : memref<8xf32>
      memref.dealloc %a : memref<2x2xf32>
      return
    })mlir");
  EXPECT_TRUE(before(text, "call @consume", "memref.dealloc %alloc ")) << text;
  EXPECT_TRUE(before(text, "memref.dealloc %alloc ", "memref.dealloc %alloc_0")) << text;
}

// A buffer the block's terminator passes on keeps its free where it is; so does a free in
// another block than its allocation.
TEST_F(EarlyDeallocationTest, EscapingBuffersStay) {
  std::string text = moved(R"mlir(
    func.func @f(%c: i1) -> memref<4xf32> {
      %c0 = arith.constant 0 : index
      %r = scf.if %c -> memref<4xf32> {
        %a = memref.alloc() : memref<4xf32>
        %x = memref.load %a[%c0] : memref<4xf32>
        %b = memref.alloc() : memref<8xf32>
        memref.dealloc %b : memref<8xf32>
        memref.dealloc %a : memref<4xf32>
        scf.yield %a : memref<4xf32>
      } else {
        %e = memref.alloc() : memref<4xf32>
        scf.yield %e : memref<4xf32>
      }
      %d = memref.alloc() : memref<2xf32>
      %y = memref.load %d[%c0] : memref<2xf32>
      %z = memref.alloc() : memref<16xf32>
      scf.if %c {
        memref.dealloc %d : memref<2xf32>
      }
      return %r : memref<4xf32>
    })mlir");
  // Named by their types: the printer numbers values per region.
  EXPECT_TRUE(before(text, "memref.dealloc %alloc_2 : memref<8xf32>",
                     "memref.dealloc %alloc_1 : memref<4xf32>"))
      << text;
  EXPECT_TRUE(before(text, "memref.alloc() : memref<16xf32>", "memref.dealloc %alloc : memref<2xf32>"))
      << text;
}

} // namespace
