//===- Interpreter.h - float64 reference interpreter of mt ------*- C++ -*-===//
//
// The numerical oracle of the project: a plain C++ evaluator of the `mt` dialect that runs a
// `func.func` op by op, every op computed in float64 whatever its declared element type
// (bf16, f16 and f32 values are held and computed as double, with no rounding to the
// declared type). Gradient checks compare autodiff against central differences of this
// interpreter, and every generated kernel is compared against it. It is written for
// clarity, not speed: no MLIR execution engine, one C++ function per op.
//
// Layout. A `Tensor` holds its `!mt.tensor` type and its elements row-major in the type's
// physical dimension order (the last dimension varies fastest); integer element types hold
// exact integral doubles. Named broadcasting, contraction, transposes etc. read the types
// to find each dimension, so operands may list their dimensions in any order.
//
// Parameters. A model parameter's value is a Tensor of its declared type. A layer parameter
// (`mt.param @p layer @block`) holds every instance at once: its type is the declared one
// with a leading dimension `layers` of size `getLayerInstances("block")`, slice i being
// instance i. `mt.param_ref` inside the layer's function (or one derived from it, marked
// `mt.layer_of = @block`) run by `mt.repeat` reads the current call's instance (call i of
// a repeat reads instance i); elsewhere it reads all instances, stacked. Optimizer state
// (`mt.state`) is set and read the same way, with its declared type, and reads as zeros
// until set. `mt.assign` overwrites a parameter or state; `getParam` reads it back.
//
// Dropout. `DropoutMode::Identity` (the default, used by gradient checks) returns the input
// unchanged. `DropoutMode::DeterministicMasks` keeps the element of counter e (its `batch`
// coordinate times MTC_DROPOUT_SAMPLE_STRIDE plus its row-major offset over the op type's
// other dimensions, Philox.h) of the op's site when `keep(id, e)` is true, scaling kept elements by
// 1/(1-rate), where id = mtc_dropout_tensor_id(site stream, layer instance) (Philox.h; the
// instance of the innermost `mt.repeat` call in progress, -1 outside): the masks of one
// step, supplied by the caller (e.g. from the runtime's Philox generator) so that the
// interpreter needs no RNG of its own. Compiled kernels key their masks the same way.
//
// Choices where the op descriptions leave room: integer `mt.div` truncates toward zero
// (division by zero is an error); `mt.cast` to an integer type truncates toward zero and
// rejects values the type cannot hold (i1 holds 0 and 1); `mt.max`/`mt.reduce_max`
// propagate NaN; `mt.topk` sorts descending, ties to the lower index, NaN above every
// number; dispatch/combine assign expert slots to the (token, k) choices in token-major
// then k order (tokens row-major over the indices' dimensions without k), dropping a
// choice once its expert is full; the load-balancing f_e is the fraction of all
// (token, k) choices that picked e.
//
// Errors (an unknown op, arguments of the wrong type, a parameter without a value, an
// integer index out of range, ...) are returned as llvm::Error naming the op and its
// location; the interpreter never asserts on its input.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_INTERPRETER_INTERPRETER_H
#define MTC_COMPILER_INTERPRETER_INTERPRETER_H

#include "dialects/mt/IR/MTOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <vector>

namespace mtc::interp {

/// One coordinate of an element: the index along the dimension called `dim`.
struct NamedIndex {
  llvm::StringRef dim;
  int64_t index;
};

/// A host tensor: a named-dimension type and its elements, row-major in the type's
/// physical dimension order.
struct Tensor {
  mt::NamedTensorType type;
  std::vector<double> data;

  Tensor() = default;
  /// A zero tensor of `type`.
  explicit Tensor(mt::NamedTensorType type);
  /// `data` should have `type.getNumElements()` values; Interpreter::call and setParam
  /// reject a tensor that does not.
  Tensor(mt::NamedTensorType type, std::vector<double> data);
  /// A rank-0 tensor.
  static Tensor scalar(mlir::Type elementType, double value);

  int64_t getNumElements() const { return static_cast<int64_t>(data.size()); }
  /// Row-major strides of the physical order.
  llvm::SmallVector<int64_t> getStrides() const;
  /// The flat offset of the element at `coords`, which name every dimension exactly once
  /// (in any order) with an index in range; std::nullopt otherwise.
  std::optional<int64_t> offsetOf(llvm::ArrayRef<NamedIndex> coords) const;
  /// The element at `coords`; the coordinates must be valid (see offsetOf).
  double &at(llvm::ArrayRef<NamedIndex> coords);
  double at(llvm::ArrayRef<NamedIndex> coords) const;
  /// The index along each dimension (physical order) of the element at flat `offset`.
  llvm::SmallVector<int64_t> coordsOf(int64_t offset) const;
};

/// The values of `tensor` laid out as `target`, which must have the same dimension names
/// and sizes in any order and the same element type.
llvm::Expected<Tensor> reorder(const Tensor &tensor, mt::NamedTensorType target);

/// What `mt.dropout` does (see the file comment).
enum class DropoutMode { Identity, DeterministicMasks };

/// Whether the element of counter `element` (its sample in the high bits, its offset in the
/// sample below; see the file comment) of the dropout site with tensor id `tensorId` (its
/// stream and layer instance) is kept.
using DropoutKeepFn = std::function<bool(int64_t tensorId, int64_t element)>;

class Interpreter {
public:
  /// `module` must be verified and must outlive the interpreter.
  explicit Interpreter(mlir::ModuleOp module);

  /// The type a value of parameter or state `name` must have: its declared type, with the
  /// leading `layers` dimension for a layer parameter.
  llvm::Expected<mt::NamedTensorType> getParamValueType(llvm::StringRef name) const;
  /// Sets the value of parameter or state `name`; `value` must have getParamValueType(name).
  llvm::Error setParam(llvm::StringRef name, Tensor value);
  /// The value of parameter or state `name`, if set (by setParam or by `mt.assign`).
  const Tensor *getParam(llvm::StringRef name) const;

  /// Instances of the layer function `layer`'s parameters: the largest count of the
  /// `mt.repeat` ops calling it or a function derived from it (`mt.layer_of`); every such
  /// repeat's call i reads instance i. 0 when no repeat calls it.
  int64_t getLayerInstances(llvm::StringRef layer) const;

  /// Selects what `mt.dropout` does; DeterministicMasks needs `keep`.
  void setDropoutMode(DropoutMode mode, DropoutKeepFn keep = nullptr);

  /// Runs `func.func @func` on `args`, which must have its argument types.
  llvm::Expected<std::vector<Tensor>> call(llvm::StringRef func, llvm::ArrayRef<Tensor> args);
  /// Runs a layer function (or one derived from it) once, reading parameter instance
  /// `instance` of its layer, as call `instance` of an `mt.repeat` would.
  llvm::Expected<std::vector<Tensor>> callLayer(llvm::StringRef func, int64_t instance,
                                                llvm::ArrayRef<Tensor> args);

private:
  using ValueMap = llvm::DenseMap<mlir::Value, Tensor>;

  llvm::Expected<std::vector<Tensor>> run(mlir::func::FuncOp func, llvm::ArrayRef<Tensor> args);
  llvm::Expected<std::vector<Tensor>> callWithInstance(mlir::func::FuncOp func, int64_t instance,
                                                       llvm::ArrayRef<Tensor> args);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalOp(mlir::Operation *op,
                                                      llvm::ArrayRef<const Tensor *> operands);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalParamRef(mlir::Operation *op);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalAssign(mlir::Operation *op, const Tensor &value);
  /// The instance of layer parameter `param` (whose value is `value`) that `op` reads or
  /// writes: the current call's.
  llvm::Expected<int64_t> instanceFor(mlir::Operation *op, mt::ParamOp param, const Tensor &value);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalDropout(mlir::Operation *op,
                                                           const Tensor &input);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalRepeat(mlir::Operation *op,
                                                          llvm::ArrayRef<const Tensor *> operands);
  llvm::Expected<llvm::SmallVector<Tensor, 1>> evalCall(mlir::Operation *op,
                                                        llvm::ArrayRef<const Tensor *> operands);

  mlir::ModuleOp module;
  mlir::SymbolTable symbols;
  llvm::StringMap<Tensor> params;
  /// Instances of each layer's parameters (see getLayerInstances).
  llvm::StringMap<int64_t> layerInstances;
  /// The instance each layer's parameters are read at, while its function runs.
  llvm::StringMap<int64_t> currentInstance;
  DropoutMode dropoutMode = DropoutMode::Identity;
  DropoutKeepFn dropoutKeep;
  /// The instance of the innermost repeat call in progress (-1 outside), for dropout keys.
  int64_t dropoutLayerInstance = -1;
  /// Depth of nested calls, bounded so that a recursive program is an error, not a crash.
  unsigned callDepth = 0;
};

} // namespace mtc::interp

#endif // MTC_COMPILER_INTERPRETER_INTERPRETER_H
