//===- MeshAttrTest.cpp - The mesh attribute built from C++ ---------------===//
//
// The textual form lists a mesh's two_chunk axes with their axes, so only C++ builders can
// list them twice or out of order; the verifier refuses both, so that equal meshes are one
// attribute (reshard compares meshes by identity).
//
//===----------------------------------------------------------------------===//

#include "dialects/mtp/IR/MTPDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc::mtp;

namespace {

class MeshAttrTest : public ::testing::Test {
protected:
  MeshAttrTest() { context.loadDialect<MTPDialect>(); }

  MeshAttr parse(StringRef text) {
    return dyn_cast_or_null<MeshAttr>(parseAttribute(text, &context));
  }

  /// Verifies the mesh <[cp = 2, tp = 4]> with `twoChunk` as its two_chunk axes; the
  /// verifier's message goes to `error`.
  LogicalResult verify(ArrayRef<StringRef> twoChunk) {
    SmallVector<StringAttr> names = {StringAttr::get(&context, "cp"),
                                     StringAttr::get(&context, "tp")};
    SmallVector<StringAttr> chunked;
    for (StringRef axis : twoChunk)
      chunked.push_back(StringAttr::get(&context, axis));
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
      error = diagnostic.str();
      return success();
    });
    return MeshAttr::verify([&] { return emitError(UnknownLoc::get(&context)); }, names,
                            ArrayRef<int64_t>{2, 4}, chunked);
  }

  MLIRContext context;
  std::string error;
};

TEST_F(MeshAttrTest, PiecesCountTwoChunksPerCoordinate) {
  MeshAttr mesh = parse("#mtp.mesh<[cp = 2 two_chunk, tp = 4]>");
  ASSERT_TRUE(mesh);
  EXPECT_TRUE(mesh.isTwoChunk("cp"));
  EXPECT_FALSE(mesh.isTwoChunk("tp"));
  EXPECT_EQ(mesh.getPieces("cp"), 4);
  EXPECT_EQ(mesh.getPieces("tp"), 4);
  EXPECT_EQ(parse("#mtp.mesh<[cp = 2 two_chunk, tp = 4 two_chunk]>").getPieces("tp"), 8);
}

TEST_F(MeshAttrTest, RefusesTwoChunkAxesRepeatedOrOutOfOrder) {
  EXPECT_TRUE(succeeded(verify({"cp", "tp"}))) << error;
  EXPECT_TRUE(failed(verify({"cp", "cp"})));
  EXPECT_NE(error.find("two_chunk axes must be listed once each in mesh order, found 'cp'"),
            std::string::npos)
      << error;
  error.clear();
  EXPECT_TRUE(failed(verify({"tp", "cp"})));
  EXPECT_NE(error.find("found 'cp' again or out of order"), std::string::npos) << error;
  error.clear();
  EXPECT_TRUE(failed(verify({"ep"})));
  EXPECT_NE(error.find("two_chunk axis 'ep' is not a mesh axis"), std::string::npos) << error;
}

} // namespace
