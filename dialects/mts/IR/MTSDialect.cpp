//===- MTSDialect.cpp - mts dialect ---------------------------------------===//

#include "dialects/mts/IR/MTSDialect.h"
#include "dialects/mts/IR/MTSOps.h"

using namespace mlir;
using namespace mtc::mts;

#include "dialects/mts/IR/MTSDialect.cpp.inc"

void MTSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/mts/IR/MTSOps.cpp.inc"
      >();
}
