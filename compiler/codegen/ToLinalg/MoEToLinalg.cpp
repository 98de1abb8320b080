//===- MoEToLinalg.cpp - expert routing and the load-balancing loss -------===//
//
// Routing. Every routing op shares one slot assignment, the interpreter's (MoEOps.cpp):
// the choices (token, c) are taken token-major (tokens row-major over the indices'
// dimensions without `k_dim`, in the indices' order), then in k order; each expert fills
// its slots 0, 1, ... first come, first served, and a choice whose expert is full is
// dropped (slot -1). That assignment is sequential: an `scf.for` nest over the choices in
// exactly that order carries the per-expert counts and writes the slot of every choice
// (`tensor.extract` / `tensor.insert`, bufferized in place). Expert indices are clamped into
// [0, experts) (the interpreter rejects others).
//
// With the slots known:
//   dispatch      a second choice loop copies each accepted token's features into its
//                 (expert, slot) row of a zero buffer (`extract_slice` / `insert_slice`);
//   combine       a generic over the result's dimensions and k (reduction):
//                 out[t, f] += w[t, c] * input[e, s, f] for accepted choices, reading the
//                 expert buffer with `tensor.extract`;
//   combine_grad  the weights' gradient is a generic over the weights' dimensions and the
//                 features (reduction): the dot product of the token's output gradient and
//                 its expert row; the input's gradient a choice loop writing w * gradient
//                 into each accepted choice's row (each slot holds at most one choice).
//
// Counting: mt.expert_load is a generic counting the choices that name each expert over the
// indices (every choice: the count comes before any capacity).
//
// Load balancing: f_e (the fraction of choices that picked e) is that count over the
// number of choices; the softmax over experts is three reductions (max, sum of exp, then the
// loss or the per-token mean sum_e f_e p_e for the gradient), all in the logits' element
// type. When the op takes the probabilities themselves there is no softmax: the loss is one
// reduction and the gradient E / T * f_e broadcast over the tokens.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// `type` without the dimensions named in `drop`.
NamedTensorType without(NamedTensorType type, ArrayRef<StringRef> drop) {
  SmallVector<mt::NamedDim> dims;
  for (const mt::NamedDim &dim : type.getDims())
    if (!llvm::is_contained(drop, dim.name.getValue()))
      dims.push_back(dim);
  return type.withDims(dims);
}

NamedTensorType withElement(NamedTensorType type, Type element) {
  return type.withElementType(element);
}

/// The names of `type`'s dimensions followed by `extra`.
SmallVector<StringAttr> spaceOf(NamedTensorType type, ArrayRef<StringAttr> extra = {}) {
  SmallVector<StringAttr> space(type.getDimNames());
  space.append(extra.begin(), extra.end());
  return space;
}

SmallVector<utils::IteratorType> iteratorsOf(size_t parallel, size_t reduction) {
  SmallVector<utils::IteratorType> iterators(parallel, utils::IteratorType::parallel);
  iterators.append(reduction, utils::IteratorType::reduction);
  return iterators;
}

Value zeros(OpBuilder &b, Location loc, NamedTensorType type) {
  Type element = type.getElementType();
  return fill(b, loc, type,
              isa<FloatType>(element) ? TypedAttr(b.getFloatAttr(element, 0))
                                      : TypedAttr(b.getIntegerAttr(element, 0)));
}

/// One generic op with the given operands, maps (inputs, then outputs, by name over
/// `space`) and `reductions` trailing reduction loops.
linalg::GenericOp generic(OpBuilder &b, Location loc, ArrayRef<StringAttr> space,
                          unsigned reductions, ArrayRef<std::pair<Value, NamedTensorType>> ins,
                          ArrayRef<std::pair<Value, NamedTensorType>> outs,
                          function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> inputs, outputs;
  SmallVector<Type> resultTypes;
  SmallVector<AffineMap> maps;
  for (auto [value, type] : ins) {
    inputs.push_back(value);
    maps.push_back(mapInto(space, type));
  }
  for (auto [value, type] : outs) {
    outputs.push_back(value);
    resultTypes.push_back(builtinType(type));
    maps.push_back(mapInto(space, type));
  }
  return linalg::GenericOp::create(b, loc, resultTypes, inputs, outputs, maps,
                                   iteratorsOf(space.size() - reductions, reductions), body);
}

/// The loop index of dimension `name` of the enclosing generic whose loops are `space`.
Value loopIndex(OpBuilder &b, Location loc, ArrayRef<StringAttr> space, StringAttr name) {
  return linalg::IndexOp::create(b, loc,
                                 static_cast<uint64_t>(llvm::find(space, name) - space.begin()));
}

/// counts[e] = #{choices of `indices` naming expert e}, in `countsType` (the expert
/// dimension alone; integer or floating-point elements): a generic reducing over the
/// indices. mt.expert_load is this; the load-balancing loss's f_e divides it.
Value countChoices(OpBuilder &b, Location loc, Value indices, NamedTensorType indicesType,
                   NamedTensorType countsType) {
  int64_t experts = countsType.getDimSizes().front();
  Type element = countsType.getElementType();
  SmallVector<StringAttr> space = spaceOf(countsType, indicesType.getDimNames());
  return generic(b, loc, space, /*reductions=*/indicesType.getRank(), {{indices, indicesType}},
                 {{zeros(b, loc, countsType), countsType}},
                 [&](OpBuilder &nb, Location l, ValueRange args) {
                   Value expert = clampedIndex(nb, l, args[0], experts);
                   Value match = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, expert,
                                                       linalg::IndexOp::create(nb, l, 0));
                   Value one = scalarConstant(nb, l, element, 1);
                   Value next = isa<FloatType>(element)
                                    ? arith::AddFOp::create(nb, l, args[1], one).getResult()
                                    : arith::AddIOp::create(nb, l, args[1], one).getResult();
                   linalg::YieldOp::create(
                       nb, l, ValueRange{arith::SelectOp::create(nb, l, match, next, args[1])});
                 })
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// The slot assignment
//===----------------------------------------------------------------------===//

/// Loops over the routing choices in the order of the slot assignment: the indices'
/// dimensions without `kDim` (in their order), then `kDim`. The body receives the
/// coordinates of the choice in the indices' dimension order.
using ChoiceBody =
    function_ref<scf::ValueVector(OpBuilder &, Location, ArrayRef<Value>, ValueRange)>;
scf::ValueVector forEachChoice(OpBuilder &b, Location loc, NamedTensorType indicesType,
                               StringRef kDim, ValueRange inits, ChoiceBody body) {
  unsigned kPosition = *indicesType.getDimIndex(kDim);
  SmallVector<unsigned> order;
  for (unsigned d = 0; d < indicesType.getRank(); ++d)
    if (d != kPosition)
      order.push_back(d);
  order.push_back(kPosition);
  SmallVector<Value> lbs, ubs, steps;
  for (unsigned d : order) {
    lbs.push_back(indexConstant(b, loc, 0));
    ubs.push_back(indexConstant(b, loc, indicesType.getDimSizes()[d]));
    steps.push_back(indexConstant(b, loc, 1));
  }
  return scf::buildLoopNest(
             b, loc, lbs, ubs, steps, inits,
             [&](OpBuilder &nested, Location l, ValueRange ivs, ValueRange iterArgs) {
               SmallVector<Value> coords(order.size());
               for (auto [d, iv] : llvm::zip_equal(order, ivs))
                 coords[d] = iv;
               return body(nested, l, coords, iterArgs);
             })
      .results;
}

/// The slot of every choice (an i64 tensor of the indices' shape; -1 for a dropped
/// choice), assigned as the file comment describes.
Value assignSlots(OpBuilder &b, Location loc, Value indices, NamedTensorType indicesType,
                  StringRef kDim, int64_t experts, int64_t capacity) {
  Type i64 = b.getI64Type();
  auto countsType = NamedTensorType::get(b.getContext(), {b.getStringAttr("experts")},
                                         {experts}, i64);
  NamedTensorType slotsType = withElement(indicesType, i64);
  scf::ValueVector results = forEachChoice(
      b, loc, indicesType, kDim,
      ValueRange{zeros(b, loc, countsType), emptyTensor(b, loc, slotsType)},
      [&](OpBuilder &nb, Location l, ArrayRef<Value> coords, ValueRange iter) {
        Value expert = clampedIndex(nb, l, tensor::ExtractOp::create(nb, l, indices, coords),
                                    experts);
        Value taken = tensor::ExtractOp::create(nb, l, iter[0], ValueRange{expert});
        Value free = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, taken,
                                           scalarConstant(nb, l, i64, capacity));
        Value next = arith::AddIOp::create(nb, l, taken, scalarConstant(nb, l, i64, 1));
        Value slot = arith::SelectOp::create(nb, l, free, taken, scalarConstant(nb, l, i64, -1));
        Value count = arith::SelectOp::create(nb, l, free, next, taken);
        Value counts = tensor::InsertOp::create(nb, l, count, iter[0], ValueRange{expert});
        Value slots = tensor::InsertOp::create(nb, l, slot, iter[1], coords);
        return scf::ValueVector{counts, slots};
      });
  return results[1];
}

/// Offsets, sizes and strides of the features row of `type` at the given coordinates of
/// its other dimensions (`at(name)`, null for a feature dimension).
struct Row {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  RankedTensorType type;
};
Row rowOf(OpBuilder &b, NamedTensorType type, function_ref<Value(StringAttr)> at) {
  Row row;
  SmallVector<int64_t> features;
  for (auto [name, size] : llvm::zip_equal(type.getDimNames(), type.getDimSizes())) {
    if (Value index = at(name)) {
      row.offsets.push_back(index);
      row.sizes.push_back(b.getIndexAttr(1));
    } else {
      row.offsets.push_back(b.getIndexAttr(0));
      row.sizes.push_back(b.getIndexAttr(size));
      features.push_back(size);
    }
  }
  row.strides.assign(row.sizes.size(), b.getIndexAttr(1));
  row.type = RankedTensorType::get(features, type.getElementType());
  return row;
}

/// The coordinate along `name` of a token-side tensor, from the choice coordinates.
Value tokenCoordinate(NamedTensorType indicesType, ArrayRef<Value> coords, StringAttr name) {
  std::optional<unsigned> d = indicesType.getDimIndex(name.getValue());
  return d ? coords[*d] : Value();
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// Folds `body` over the accepted (token, k) choices in slot-assignment order: `body` gets
/// the choice's token coordinates, the row of `bufferType` (an expert buffer's type) at the
/// choice's (expert, slot), and the value so far; a dropped choice leaves the value as it is.
Value foldAcceptedChoices(
    OpBuilder &b, Location loc, NamedTensorType indicesType, StringRef kDim, Value indices,
    Value slots, int64_t experts, NamedTensorType bufferType, StringRef expertDim,
    StringRef capacityDim, Value init,
    function_ref<Value(OpBuilder &, Location, ArrayRef<Value>, const Row &, Value)> body) {
  scf::ValueVector results = forEachChoice(
      b, loc, indicesType, kDim, ValueRange{init},
      [&](OpBuilder &cb, Location l, ArrayRef<Value> coords, ValueRange iter) {
        Value slot = tensor::ExtractOp::create(cb, l, slots, coords);
        Value accepted = arith::CmpIOp::create(cb, l, arith::CmpIPredicate::sge, slot,
                                               scalarConstant(cb, l, cb.getI64Type(), 0));
        auto ifOp = scf::IfOp::create(
            cb, l, accepted,
            [&](OpBuilder &tb, Location tl) {
              Value expert = clampedIndex(
                  tb, tl, tensor::ExtractOp::create(tb, tl, indices, coords), experts);
              Value slotIndex = arith::IndexCastOp::create(tb, tl, tb.getIndexType(), slot);
              Row row = rowOf(tb, bufferType, [&](StringAttr name) -> Value {
                if (name.getValue() == expertDim)
                  return expert;
                if (name.getValue() == capacityDim)
                  return slotIndex;
                return nullptr;
              });
              scf::YieldOp::create(tb, tl, body(tb, tl, coords, row, iter[0]));
            },
            [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, iter[0]); });
        return scf::ValueVector{ifOp.getResult(0)};
      });
  return results[0];
}

struct DispatchLowering : OpConversionPattern<mt::DispatchOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::DispatchOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType indicesType = namedType(op.getIndices());
    NamedTensorType inputType = namedType(op.getInput());
    NamedTensorType resultType = namedType(op.getResult());
    int64_t experts = resultType.getDimSize(op.getExpertDim());
    int64_t capacity = resultType.getDimSize(op.getCapacityDim());
    Value indices = adaptor.getIndices(), input = adaptor.getInput();
    Value slots =
        assignSlots(rewriter, loc, indices, indicesType, op.getKDim(), experts, capacity);
    Value result = foldAcceptedChoices(
        rewriter, loc, indicesType, op.getKDim(), indices, slots, experts, resultType,
        op.getExpertDim(), op.getCapacityDim(), zeros(rewriter, loc, resultType),
        [&](OpBuilder &tb, Location tl, ArrayRef<Value> coords, const Row &to, Value acc) {
          Row from = rowOf(tb, inputType, [&](StringAttr name) {
            return tokenCoordinate(indicesType, coords, name);
          });
          Value row = tensor::ExtractSliceOp::create(tb, tl, from.type, input, from.offsets,
                                                     from.sizes, from.strides);
          return tensor::InsertSliceOp::create(tb, tl, row, acc, to.offsets, to.sizes,
                                               to.strides)
              .getResult();
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Reads the expert buffer `input` at the slot of a choice inside a generic over `space`:
/// expert and capacity coordinates from the choice, the others from the loops.
Value readSlot(OpBuilder &b, Location loc, Value input, NamedTensorType inputType,
               ArrayRef<StringAttr> space, StringRef expertDim, StringRef capacityDim,
               Value expert, Value slot) {
  SmallVector<Value> coords;
  for (StringAttr name : inputType.getDimNames()) {
    if (name.getValue() == expertDim)
      coords.push_back(expert);
    else if (name.getValue() == capacityDim)
      coords.push_back(slot);
    else
      coords.push_back(loopIndex(b, loc, space, name));
  }
  return tensor::ExtractOp::create(b, loc, input, coords);
}

/// Whether a choice was accepted, and its expert and (non-negative) slot as indices.
struct Choice {
  Value accepted, expert, slot;
  static Choice of(OpBuilder &b, Location loc, Value index, Value slot, int64_t experts) {
    Value zero = scalarConstant(b, loc, b.getI64Type(), 0);
    Value accepted = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, slot, zero);
    Value clamped = arith::MaxSIOp::create(b, loc, slot, zero);
    return {accepted, clampedIndex(b, loc, index, experts),
            arith::IndexCastOp::create(b, loc, b.getIndexType(), clamped)};
  }
};

struct CombineLowering : OpConversionPattern<mt::CombineOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::CombineOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType indicesType = namedType(op.getIndices());
    NamedTensorType inputType = namedType(op.getInput());
    NamedTensorType resultType = namedType(op.getResult());
    int64_t experts = inputType.getDimSize(op.getExpertDim());
    int64_t capacity = inputType.getDimSize(op.getCapacityDim());
    Value input = adaptor.getInput();
    Value slots = assignSlots(rewriter, loc, adaptor.getIndices(), indicesType, op.getKDim(),
                              experts, capacity);
    SmallVector<StringAttr> space = spaceOf(resultType, {op.getKDimAttr()});
    auto combined = generic(
        rewriter, loc, space, /*reductions=*/1,
        {{adaptor.getIndices(), indicesType},
         {slots, withElement(indicesType, rewriter.getI64Type())},
         {adaptor.getWeights(), namedType(op.getWeights())}},
        {{zeros(rewriter, loc, resultType), resultType}},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Choice choice = Choice::of(b, l, args[0], args[1], experts);
          Value x = readSlot(b, l, input, inputType, space, op.getExpertDim(),
                             op.getCapacityDim(), choice.expert, choice.slot);
          Value sum =
              arith::AddFOp::create(b, l, args[3], arith::MulFOp::create(b, l, args[2], x));
          linalg::YieldOp::create(b, l,
                                  ValueRange{arith::SelectOp::create(b, l, choice.accepted, sum,
                                                                     args[3])});
        });
    rewriter.replaceOp(op, combined.getResult(0));
    return success();
  }
};

struct CombineGradLowering : OpConversionPattern<mt::CombineGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::CombineGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType indicesType = namedType(op.getIndices());
    NamedTensorType inputType = namedType(op.getInput());
    NamedTensorType weightsType = namedType(op.getWeights());
    NamedTensorType gradType = namedType(op.getResultGrad());
    int64_t experts = inputType.getDimSize(op.getExpertDim());
    int64_t capacity = inputType.getDimSize(op.getCapacityDim());
    Value input = adaptor.getInput(), indices = adaptor.getIndices();
    Value weights = adaptor.getWeights(), grad = adaptor.getResultGrad();
    Value slots = assignSlots(rewriter, loc, indices, indicesType, op.getKDim(), experts,
                              capacity);
    NamedTensorType slotsType = withElement(indicesType, rewriter.getI64Type());

    // d weights[t, c] = sum_f d out[t, f] * input[e, s, f] (0 for a dropped choice).
    NamedTensorType features = without(inputType, {op.getExpertDim(), op.getCapacityDim()});
    SmallVector<StringAttr> space = spaceOf(weightsType, features.getDimNames());
    auto weightsGrad = generic(
        rewriter, loc, space, /*reductions=*/features.getRank(),
        {{indices, indicesType}, {slots, slotsType}, {grad, gradType}},
        {{zeros(rewriter, loc, weightsType), weightsType}},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Choice choice = Choice::of(b, l, args[0], args[1], experts);
          Value x = readSlot(b, l, input, inputType, space, op.getExpertDim(),
                             op.getCapacityDim(), choice.expert, choice.slot);
          Value sum =
              arith::AddFOp::create(b, l, args[3], arith::MulFOp::create(b, l, args[2], x));
          linalg::YieldOp::create(b, l,
                                  ValueRange{arith::SelectOp::create(b, l, choice.accepted, sum,
                                                                     args[3])});
        });

    // d input[e, s, :] = w[t, c] * d out[t, :] for the choice in slot (e, s).
    Value inputGrad = foldAcceptedChoices(
        rewriter, loc, indicesType, op.getKDim(), indices, slots, experts, inputType,
        op.getExpertDim(), op.getCapacityDim(), zeros(rewriter, loc, inputType),
        [&](OpBuilder &tb, Location tl, ArrayRef<Value> coords, const Row &to, Value acc) {
          SmallVector<Value> weightCoords;
          for (StringAttr name : weightsType.getDimNames())
            weightCoords.push_back(tokenCoordinate(indicesType, coords, name));
          Value weight = tensor::ExtractOp::create(tb, tl, weights, weightCoords);
          Row from = rowOf(tb, gradType, [&](StringAttr name) {
            return tokenCoordinate(indicesType, coords, name);
          });
          Value gradRow = tensor::ExtractSliceOp::create(tb, tl, from.type, grad, from.offsets,
                                                         from.sizes, from.strides);
          unsigned rank = to.type.getRank();
          SmallVector<AffineMap> maps(2, tb.getMultiDimIdentityMap(rank));
          Value scaled =
              linalg::GenericOp::create(
                  tb, tl, TypeRange{to.type}, ValueRange{gradRow},
                  ValueRange{tensor::EmptyOp::create(tb, tl, to.type.getShape(),
                                                     to.type.getElementType())},
                  maps, iteratorsOf(rank, 0),
                  [&](OpBuilder &gb, Location gl, ValueRange args) {
                    linalg::YieldOp::create(
                        gb, gl, ValueRange{arith::MulFOp::create(gb, gl, weight, args[0])});
                  })
                  .getResult(0);
          return tensor::InsertSliceOp::create(tb, tl, scaled, acc, to.offsets, to.sizes,
                                               to.strides)
              .getResult();
        });
    rewriter.replaceOp(op, {inputGrad, weightsGrad.getResult(0)});
    return success();
  }
};

/// The counts of every choice, before any capacity (no slot assignment).
struct ExpertLoadLowering : OpConversionPattern<mt::ExpertLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::ExpertLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, countChoices(rewriter, op.getLoc(), adaptor.getIndices(),
                                        namedType(op.getIndices()), namedType(op.getResult())));
    return success();
  }
};

/// The router statistics of load_balancing_loss(_grad) as tensors: f[e] (fraction of the
/// choices that picked e), and, unless the operand holds the probabilities, per token the
/// max and the sum of exp(logit - max) over the experts.
struct RouterStats {
  NamedTensorType logitsType, tokensType, expertType;
  Value f, max, sum;
  int64_t tokens, experts;
  bool probabilities;

  static RouterStats compute(OpBuilder &b, Location loc, Value logits,
                             NamedTensorType logitsType, Value indices,
                             NamedTensorType indicesType, StringAttr expertDim,
                             bool probabilities) {
    RouterStats stats;
    stats.probabilities = probabilities;
    Type element = logitsType.getElementType();
    stats.logitsType = logitsType;
    stats.tokensType = without(logitsType, {expertDim.getValue()});
    SmallVector<mt::NamedDim> expertOnly{{expertDim, logitsType.getDimSize(expertDim)}};
    stats.expertType = logitsType.withDims(expertOnly);
    stats.tokens = stats.tokensType.getNumElements();
    stats.experts = logitsType.getDimSize(expertDim);

    // f = counts / choices.
    Value counts = countChoices(b, loc, indices, indicesType, stats.expertType);
    double choices = static_cast<double>(indicesType.getNumElements());
    stats.f = generic(b, loc, stats.expertType.getDimNames(), 0, {{counts, stats.expertType}},
                      {{emptyTensor(b, loc, stats.expertType), stats.expertType}},
                      [&](OpBuilder &nb, Location l, ValueRange args) {
                        linalg::YieldOp::create(
                            nb, l,
                            ValueRange{arith::DivFOp::create(
                                nb, l, args[0], scalarConstant(nb, l, element, choices))});
                      })
                  .getResult(0);
    if (probabilities)
      return stats;

    // Per token: the max over experts, then the sum of exp(x - max).
    SmallVector<StringAttr> space = spaceOf(stats.tokensType, {expertDim});
    auto floatType = cast<FloatType>(element);
    Value lowest = fill(b, loc, stats.tokensType,
                        FloatAttr::get(floatType, APFloat::getInf(floatType.getFloatSemantics(),
                                                                  /*Negative=*/true)));
    stats.max = generic(b, loc, space, 1, {{logits, logitsType}},
                        {{lowest, stats.tokensType}},
                        [&](OpBuilder &nb, Location l, ValueRange args) {
                          Value max = arith::MaximumFOp::create(nb, l, args[0], args[1]);
                          linalg::YieldOp::create(nb, l, ValueRange{max});
                        })
                    .getResult(0);
    stats.sum = generic(b, loc, space, 1, {{logits, logitsType}, {stats.max, stats.tokensType}},
                        {{zeros(b, loc, stats.tokensType), stats.tokensType}},
                        [&](OpBuilder &nb, Location l, ValueRange args) {
                          Value e = math::ExpOp::create(
                              nb, l, arith::SubFOp::create(nb, l, args[0], args[1]));
                          Value sum = arith::AddFOp::create(nb, l, args[2], e);
                          linalg::YieldOp::create(nb, l, ValueRange{sum});
                        })
                    .getResult(0);
    return stats;
  }

  /// Inputs of a generic over (tokens, expert): logits, max, sum, f; or the probabilities
  /// and f.
  SmallVector<std::pair<Value, NamedTensorType>> inputs(Value logits) const {
    if (probabilities)
      return {{logits, logitsType}, {f, expertType}};
    return {{logits, logitsType}, {max, tokensType}, {sum, tokensType}, {f, expertType}};
  }

  /// The position of f among the block arguments of inputs() (the last input).
  unsigned fArgument() const { return probabilities ? 1 : 3; }

  /// p from the block arguments of inputs(): the operand, or exp(x - max) / sum.
  Value probability(OpBuilder &b, Location loc, ValueRange args) const {
    if (probabilities)
      return args[0];
    Value e = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, args[0], args[1]));
    return arith::DivFOp::create(b, loc, e, args[2]);
  }
};

/// E / T * sum over tokens and experts of f[e] * p[t, e].
struct LoadBalancingLossLowering : OpConversionPattern<mt::LoadBalancingLossOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::LoadBalancingLossOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType resultType = namedType(op.getResult());
    Type element = resultType.getElementType();
    RouterStats stats = RouterStats::compute(
        rewriter, loc, adaptor.getLogits(), namedType(op.getLogits()), adaptor.getIndices(),
        namedType(op.getIndices()), op.getExpertDimAttr(), op.getProbabilities());
    SmallVector<StringAttr> space = spaceOf(stats.tokensType, {op.getExpertDimAttr()});
    unsigned f = stats.fArgument();
    Value total = generic(rewriter, loc, space, space.size(), stats.inputs(adaptor.getLogits()),
                          {{zeros(rewriter, loc, resultType), resultType}},
                          [&](OpBuilder &b, Location l, ValueRange args) {
                            Value term = arith::MulFOp::create(b, l, args[f],
                                                               stats.probability(b, l, args));
                            linalg::YieldOp::create(
                                b, l, ValueRange{arith::AddFOp::create(b, l, args[f + 1], term)});
                          })
                      .getResult(0);
    double scale = static_cast<double>(stats.experts) / static_cast<double>(stats.tokens);
    Value loss = generic(rewriter, loc, {}, 0, {{total, resultType}},
                         {{emptyTensor(rewriter, loc, resultType), resultType}},
                         [&](OpBuilder &b, Location l, ValueRange args) {
                           linalg::YieldOp::create(
                               b, l,
                               ValueRange{arith::MulFOp::create(
                                   b, l, args[0], scalarConstant(b, l, element, scale))});
                         })
                     .getResult(0);
    rewriter.replaceOp(op, loss);
    return success();
  }
};

/// loss_grad * E / T * p[t, e] * (f[e] - sum_e' f[e'] p[t, e']), or loss_grad * E / T * f[e]
/// for the probabilities.
struct LoadBalancingLossGradLowering : OpConversionPattern<mt::LoadBalancingLossGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::LoadBalancingLossGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType logitsType = namedType(op.getLogits());
    NamedTensorType resultType = namedType(op.getResult());
    Type element = resultType.getElementType();
    Value logits = adaptor.getLogits();
    RouterStats stats = RouterStats::compute(rewriter, loc, logits, logitsType,
                                             adaptor.getIndices(), namedType(op.getIndices()),
                                             op.getExpertDimAttr(), op.getProbabilities());
    double scale = static_cast<double>(stats.experts) / static_cast<double>(stats.tokens);
    SmallVector<StringAttr> resultSpace(resultType.getDimNames());
    if (op.getProbabilities()) {
      Value grad =
          generic(rewriter, loc, resultSpace, 0,
                  {{stats.f, stats.expertType},
                   {adaptor.getLossGrad(), namedType(op.getLossGrad())}},
                  {{emptyTensor(rewriter, loc, resultType), resultType}},
                  [&](OpBuilder &b, Location l, ValueRange args) {
                    Value factor = arith::MulFOp::create(b, l, args[1],
                                                         scalarConstant(b, l, element, scale));
                    linalg::YieldOp::create(
                        b, l, ValueRange{arith::MulFOp::create(b, l, factor, args[0])});
                  })
              .getResult(0);
      rewriter.replaceOp(op, grad);
      return success();
    }
    SmallVector<StringAttr> space = spaceOf(stats.tokensType, {op.getExpertDimAttr()});
    Value mean = generic(rewriter, loc, space, 1, stats.inputs(logits),
                         {{zeros(rewriter, loc, stats.tokensType), stats.tokensType}},
                         [&](OpBuilder &b, Location l, ValueRange args) {
                           Value term =
                               arith::MulFOp::create(b, l, args[3], stats.probability(b, l, args));
                           linalg::YieldOp::create(
                               b, l, ValueRange{arith::AddFOp::create(b, l, args[4], term)});
                         })
                     .getResult(0);
    SmallVector<std::pair<Value, NamedTensorType>> inputs = stats.inputs(logits);
    inputs.push_back({mean, stats.tokensType});
    inputs.push_back({adaptor.getLossGrad(), namedType(op.getLossGrad())});
    Value grad = generic(rewriter, loc, resultSpace, 0, inputs,
                         {{emptyTensor(rewriter, loc, resultType), resultType}},
                         [&](OpBuilder &b, Location l, ValueRange args) {
                           Value factor = arith::MulFOp::create(
                               b, l, args[5], scalarConstant(b, l, element, scale));
                           Value p = stats.probability(b, l, args);
                           Value difference = arith::SubFOp::create(b, l, args[3], args[4]);
                           Value value = arith::MulFOp::create(
                               b, l, arith::MulFOp::create(b, l, factor, p), difference);
                           linalg::YieldOp::create(b, l, ValueRange{value});
                         })
                     .getResult(0);
    rewriter.replaceOp(op, grad);
    return success();
  }
};

} // namespace

void codegen::lowering::populateMoEPatterns(const TypeConverter &types,
                                            RewritePatternSet &patterns) {
  patterns.add<DispatchLowering, ExpertLoadLowering, CombineLowering, CombineGradLowering,
               LoadBalancingLossLowering, LoadBalancingLossGradLowering>(types,
                                                                         patterns.getContext());
}
