//===- OpShapes.h - What kernels check and compute about shapes -*- C++ -*-===//
//
// The backend-independent half of a kernel: from the operands' shapes, the
// node's attributes and the results the program declares, the numbers a
// kernel needs (GEMM sizes, a slice's base offset and strides, the extents
// around an axis, a reduction's kept and reduced shapes), or an error
// naming the node and the problem. Each plan ends by checking the result
// shape it computes against the declared one (KernelArgs::checkShape), so
// a backend that has the plan only checks element types and moves data.
// The CPU kernels (runtime/cpu) and the CUDA ops (runtime/cuda) both call
// these; the messages are the ones both gave before.
//
// Plans read no element data, except through an IntOperandReader for the
// small integer operands some ops take (Slice's starts, Reduce's axes).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OPSHAPES_H
#define AUTOPAR_RUNTIME_OPSHAPES_H

#include "runtime/KernelArgs.h"

namespace autopar {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The broadcast of a binary op's two operands, checked against result 0;
/// "operands X and Y do not broadcast" when they do not.
llvm::Expected<Shape> planBinaryBroadcast(const KernelArgs &A);
/// The broadcast of all operands (Sum, Where), checked against result 0;
/// "operands do not broadcast" when they do not.
llvm::Expected<Shape> planBroadcast(const KernelArgs &A);
/// An error unless Where's X, Y and result have one element type.
llvm::Error checkWhereTypes(const KernelArgs &A);

/// A shape split around one axis: Outer rows of Len elements Inner apart.
struct AxisExtents {
  unsigned Axis = 0;
  int64_t Outer = 1, Len = 1, Inner = 1;
};
/// The extents of operand I around the `axis` attribute (DefaultAxis when
/// absent).
llvm::Expected<AxisExtents> planAxis(const KernelArgs &A, unsigned I,
                                     int64_t DefaultAxis);

//===----------------------------------------------------------------------===//
// Softmax and normalisations
//===----------------------------------------------------------------------===//

/// Softmax and LogSoftmax: result 0 has X's shape; the extents around
/// `axis` (default -1).
llvm::Expected<AxisExtents> planSoftmax(const KernelArgs &A);

/// LayerNormalization and RMSNormalization: rows of X normalised from
/// `axis` (default -1) on.
struct NormPlan {
  unsigned Axis = 0;
  int64_t Rows = 0, Len = 0;
  /// The normalised shape: X's dimensions from Axis on.
  Shape Row;
};
/// Checks result 0 against X's shape.
llvm::Expected<NormPlan> planNorm(const KernelArgs &A);
/// An error unless operand I (scale or bias) broadcasts to Row without
/// adding dimensions.
llvm::Error checkBroadcastsToRow(const KernelArgs &A, unsigned I,
                                 llvm::ArrayRef<int64_t> Row);
/// The shape of LayerNormalization's Mean and InvStdDev: X's leading
/// dimensions, then 1s.
Shape getNormStatShape(llvm::ArrayRef<int64_t> X, unsigned Axis);

/// LayerNormalizationGrad, RMSNormalizationGrad (dY, X, Scale): dY and X
/// alike, one scale value per normalised element, dX of X's shape (result
/// 0 is checked; the scale gradients are the backend's to check).
llvm::Expected<NormPlan> planNormGrad(const KernelArgs &A);

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// MatMul as numpy: 1-D operands promoted (and the added dimension
/// dropped from the result), batch dimensions broadcast.
struct MatMulPlan {
  int64_t M = 0, N = 0, K = 0;
  bool VectorX = false, VectorW = false;
  /// The batch dimensions of X and W (after promotion) and their
  /// broadcast.
  Shape XBatch, WBatch, Batch;
  /// Elements of Batch, XBatch and WBatch.
  int64_t Count = 1, XCount = 1, WCount = 1;
  Shape Out;
};
llvm::Expected<MatMulPlan> planMatMul(const KernelArgs &A);

/// Linear: X[..., K] W[K, N] (+ B[N]) as Rows x K times K x N.
struct LinearPlan {
  int64_t Rows = 0, N = 0, K = 0;
};
llvm::Expected<LinearPlan> planLinear(const KernelArgs &A);

/// ONNX Gemm: Alpha op(A) op(B) + Beta C with C broadcast to [M, N].
struct GemmPlan {
  bool TransA = false, TransB = false;
  float Alpha = 1, Beta = 1;
  int64_t M = 0, N = 0, K = 0;
};
/// Checks the contracting dimensions and result 0.
llvm::Expected<GemmPlan> planGemm(const KernelArgs &A);
/// An error unless C (operand 2, when given) broadcasts to [M, N] without
/// adding dimensions.
llvm::Error checkGemmC(const KernelArgs &A, const GemmPlan &P);

//===----------------------------------------------------------------------===//
// Layouts, slices, gathers
//===----------------------------------------------------------------------===//

/// A strided view of operand 0: result element i (row-major over Out) is
/// element Base + sum(index[d] * Strides[d]) of X.
struct StridedView {
  Shape Out, Strides;
  int64_t Base = 0;
};
/// Transpose by `perm` (default: reversed dimensions).
llvm::Expected<StridedView> planTranspose(const KernelArgs &A);
/// Slice(X, starts, ends[, axes[, steps]]) with ONNX's clamping of starts
/// and ends and any non-zero steps; ReadInts reads operands 1 to 4.
llvm::Expected<StridedView> planSlice(const KernelArgs &A,
                                      IntOperandReader ReadInts);

/// Concat along `axis` (default 0): every operand of operand 0's rank and
/// element type and equal outside Axis.
struct ConcatPlan {
  unsigned Axis = 0;
  Shape Out;
};
llvm::Expected<ConcatPlan> planConcat(const KernelArgs &A);

/// Gather(X, Indices) along `axis` (default 0): Outer x Count x Inner
/// elements from Outer x Len x Inner.
struct GatherPlan {
  unsigned Axis = 0;
  int64_t Outer = 1, Len = 0, Inner = 1, Count = 0;
};
/// Checks result 0 against X's shape with the axis replaced by Indices'.
llvm::Expected<GatherPlan> planGather(const KernelArgs &A);
/// GatherGrad(data, indices, dY): result 0 of data's shape, and dY of
/// Gather's result's element count.
llvm::Expected<GatherPlan> planGatherGrad(const KernelArgs &A);

//===----------------------------------------------------------------------===//
// Reductions, casts, the loss
//===----------------------------------------------------------------------===//

/// ReduceSum/Mean/Max over `axes` (attribute, else operand 1; none: all,
/// or none with noop_with_empty_axes).
struct ReducePlan {
  /// No reduction (noop_with_empty_axes and no axes): a copy.
  bool Noop = false;
  llvm::SmallVector<bool, 4> Reduced;
  /// X's shape with the reduced dimensions 1 (Kept) or the others 1 (Red).
  Shape Kept, Red;
  /// Elements reduced into each result element.
  int64_t Count = 1;
};
/// Checks result 0 (X's shape when Noop).
llvm::Expected<ReducePlan> planReduce(const KernelArgs &A,
                                      IntOperandReader ReadInts);

/// Cast: the element type `to` names; result 0 has X's shape.
llvm::Expected<ElementType> planCast(const KernelArgs &A);

/// CrossEntropyLoss(logits, labels): Rows labels of Classes logits each.
struct LossPlan {
  int64_t Rows = 0, Classes = 0, Ignore = -100;
  bool Mean = true;
};
/// Labels must have the leading dimensions of the logits.
llvm::Expected<LossPlan> planLoss(const KernelArgs &A, unsigned Logits,
                                  unsigned Labels);

//===----------------------------------------------------------------------===//
// Attention and rotary embedding (OpShapesAttention.cpp)
//===----------------------------------------------------------------------===//

/// ONNX Attention's sizes: Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv,
/// Skv, Dv] (or 3-D [B, S, H * D] with q_num_heads and kv_num_heads), P
/// rows of past_key and past_value before K and V.
struct AttentionPlan {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, D = 0, Dv = 0;
  bool ThreeD = false;
};
/// From operands 0-2 (Q, K, V) and 4-5 (the cache); checks no result.
llvm::Expected<AttentionPlan> planAttention(const KernelArgs &A);

/// attn_mask (operand 3) broadcast to [B, Hq, Sq, Len], Len <= P + Skv (the
/// keys after it are masked): its element strides there.
struct AttentionMaskPlan {
  bool Present = false;
  int64_t Len = 0;
  Shape Strides;
};
llvm::Expected<AttentionMaskPlan> planAttentionMask(const KernelArgs &A,
                                                    const AttentionPlan &S);

/// RotaryEmbedding(X, cos, sin, position_ids?): X [B, H, S, D] or [B, S,
/// H * D] (num_heads); the first R entries of each head rotate; caches
/// [max position, R / 2] with i64 position ids [B, S], or [B, S, R / 2].
/// Checks result 0 against X's shape.
struct RotaryPlan {
  int64_t B = 0, S = 0, H = 0, D = 0, R = 0;
  bool ThreeD = false, Interleaved = false, HasPositions = false;
};
llvm::Expected<RotaryPlan> planRotary(const KernelArgs &A);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_OPSHAPES_H
