//===- MTPBase.td - mtp dialect definition ------------------*- tablegen -*-===//
//
// `mtp` is the per-rank (SPMD) dialect: the program one rank runs after sharding, over
// tensors that know how their global value is laid out on a device mesh, with the
// collectives that move data between layouts.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MTP_IR_MTPBASE_TD
#define MTC_DIALECTS_MTP_IR_MTPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def MTP_Dialect : Dialect {
  let name = "mtp";
  let cppNamespace = "::mtc::mtp";
  let summary = "Per-rank programs over sharded named-dimension tensors, and collectives";
  let description = [{
    A device mesh has named axes (`dp`, `tp`, ...) with sizes. A sharded tensor keeps its
    global named dimensions and says which mesh axes split each of them (`heads` over
    `tp`: every rank along `tp` holds `heads / tp` of them) and over which axes its local
    values are partial sums still to be reduced (a contraction over a split dimension).
    Collectives change exactly one of these facts and nothing else, so the verifiers can
    check that a program's communication is what its layouts require:

    | op | before | after |
    |---|---|---|
    | `all_reduce over A` | partial over A | replicated over A |
    | `reduce_scatter over a along d` | partial over a | `d` split over a (appended) |
    | `all_gather over a along d` | `d` split over a (last) | `d` not split over a |
    | `all_to_all over a from d to e` | `d` split over a (last) | `e` split over a (appended) |
    | `shift over a offset k` | this rank's part | the part of the rank k before along a |
    | `send`/`recv over a shift k` | point to point along axis a (pipeline stages) | |

    Two attributes of the dialect annotate ops of others: `mtp.mesh` on a partitioned
    module is the mesh it is partitioned over; `mtp.layout` on an op whose local
    computation depends on where this rank's part lies in the whole is that laid-out type
    (`mt.dropout` of a split tensor numbers its elements as in the whole tensor: the
    operand's layout; `mt.gather` and `mt.embedding_grad` of a table split along the
    indexed dimension read and update only the rows this rank holds: the table's layout).
    Both are checked, and any other `mtp.` attribute is an error.
  }];
  // `mtp.layout` and `mtp.mesh` (see the description): the partitioner sets them, the
  // lowering to linalg reads them, verifyOperationAttribute checks them.
  let discardableAttrs = (ins "::mlir::TypeAttr":$layout, "::mtc::mtp::MeshAttr":$mesh);
  let hasOperationAttrVerify = 1;
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mtc::mt::MTDialect"];
  let extraClassDeclaration = [{
  private:
    void registerTypes();
    void registerAttributes();
  public:
  }];
}

#endif // MTC_DIALECTS_MTP_IR_MTPBASE_TD
