//===- GradientRules.h - Per-op gradient rules for autodiff -----*- C++ -*-===//
//
// The backward of each op, as IR that the autodiff pass appends. A rule gets
// the gradients of the node's results (null where a result has none) and
// returns one gradient per operand (null where the operand needs none or has
// none: integer operands, masks, position tables). GradBuilder creates the
// nodes, types them with the ops' shape functions and copies the forward
// node's `layer` and `stage` annotations onto them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_GRADIENTRULES_H
#define AUTOPAR_PASSES_GRADIENTRULES_H

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace autopar {

class GradBuilder {
public:
  explicit GradBuilder(Graph &G) : G(G) {}

  /// The forward node whose backward is being emitted: new nodes take its
  /// annotations and a name derived from its name.
  void setForwardNode(const Node *N) { Forward = N; }

  /// Creates Op(Operands) {Attrs} with NumResults results typed by the op's
  /// shape function. A shape error is a broken rule: it is returned.
  llvm::Expected<llvm::SmallVector<Value *, 3>>
  emit(OpId Op, llvm::ArrayRef<Value *> Operands, AttrDict Attrs = AttrDict(),
       unsigned NumResults = 1);
  llvm::Expected<Value *> emit1(OpId Op, llvm::ArrayRef<Value *> Operands,
                                AttrDict Attrs = AttrDict());

  /// A 1-D i64 constant.
  Value *ints(llvm::ArrayRef<int64_t> Values);
  /// A rank-0 constant of a float element type.
  Value *scalar(ElementType Ty, double V);
  /// Zeros of a static type.
  llvm::Expected<Value *> zeros(const TensorType &Type);
  llvm::Expected<Value *> reshape(Value *X, llvm::ArrayRef<int64_t> Sizes);
  llvm::Expected<Value *> transpose(Value *X, llvm::ArrayRef<int64_t> Perm);
  /// Sums a broadcast gradient G back to Target's shape (numpy rules).
  llvm::Expected<Value *> sumToShape(Value *G, const TensorType &Target);
  llvm::Expected<Value *> add(Value *A, Value *B);

  Graph &getGraph() { return G; }

private:
  Graph &G;
  const Node *Forward = nullptr;
};

/// Whether N is mixed-precision's read of an fp32 parameter: a Cast of the
/// parameter to bf16 or f16.
bool isNarrowingParamCast(const Node &N);

/// Appends a copy of N to G for one micro-batch: operands through Map (an
/// unmapped operand is shared), results named `<name><Suffix>` and added to
/// Map, the node's own name followed by NodeSuffix. Constants can be shared
/// instead: with Shared, a constant already copied is reused. A copy of a
/// node that draws a dropout mask (`rng_stream`) is annotated with its
/// micro-batch K of the step's M (`micro_batch`, `micro_batches`).
void cloneForMicroBatch(Graph &G, Node *N,
                        llvm::DenseMap<Value *, Value *> &Map,
                        llvm::StringRef Suffix, llvm::StringRef NodeSuffix,
                        llvm::DenseMap<Value *, Value *> &Shared, int64_t K,
                        int64_t M);

/// Makes Sum the running sum with X added: X itself when Sum is null, else
/// Sum + X as a node placed right after X's producer (when X has one), so
/// that a micro-batch's gradient joins the running sum as soon as it exists
/// and is freed there, instead of every gradient of the micro-batch living
/// until the end of its backward. Sum must be defined before X's producer
/// (the earlier micro-batch's sum); the order of the additions, and so the
/// sums, do not change.
llvm::Error addToRunningSum(GradBuilder &B, Value *&Sum, Value *X);

/// Ends a pass that rebuilt a step from copies of its one-micro-batch Body
/// (accumulate-micro-batches, schedule-pipeline): erases Body, last node
/// first, and makes the outputs `loss` (Loss) and, for each old gradient
/// output Grads[I], Sums[I] under its name.
void replaceStepOutputs(Graph &G, llvm::ArrayRef<Node *> Body, Value *Loss,
                        llvm::ArrayRef<Value *> Grads,
                        llvm::ArrayRef<Value *> Sums);

/// Emits the gradients of N's operands into OperandGrads (sized to N's
/// operand count). Needed[I] says whether operand I's gradient is wanted;
/// rules may skip the others. An op without a rule, or a form of it that has
/// none (e.g. Gemm with alpha != 1), is an error naming why.
llvm::Error emitGradient(GradBuilder &B, const Node &N,
                         llvm::ArrayRef<Value *> ResultGrads,
                         llvm::ArrayRef<bool> Needed,
                         llvm::SmallVectorImpl<Value *> &OperandGrads);

/// True when values of this element type carry gradients (float types).
bool isDifferentiableType(ElementType Ty);

/// The forward of a training graph (after autodiff): the nodes that its
/// non-gradient outputs (`loss`, the values sent to the next pipeline
/// stage) need. The rest is the backward.
llvm::SmallPtrSet<const Node *, 32> getForwardNodes(const Graph &G);

} // namespace autopar

#endif // AUTOPAR_PASSES_GRADIENTRULES_H
