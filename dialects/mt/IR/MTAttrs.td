//===- MTAttrs.td - mt dialect attributes -------------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MT_IR_MTATTRS_TD
#define MTC_DIALECTS_MT_IR_MTATTRS_TD

include "dialects/mt/IR/MTBase.td"
include "mlir/IR/EnumAttr.td"

def MT_InitKind : I32EnumAttr<"InitKind", "parameter initialiser", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"Uniform", 3, "uniform">,
    I32EnumAttrCase<"Constant", 4, "constant">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_InitAttr : AttrDef<MT_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "how a parameter is initialised";
  let description = [{
    `zeros`, `ones`, `normal(std)` (mean 0), `normal(std, mean)`, `uniform(low, high)` or
    `constant(value)`. Values come from the counter-based RNG keyed on the parameter, so
    every shard of a parameter can produce its own slice.
  }];
  let parameters = (ins EnumParameter<MT_InitKind>:$kind,
                        "::mlir::DenseF64ArrayAttr":$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

include "dialects/mt/IR/MTConfigAttrs.td"

#endif // MTC_DIALECTS_MT_IR_MTATTRS_TD
