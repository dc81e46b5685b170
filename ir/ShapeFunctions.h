//===- ShapeFunctions.h - Verifiers and shape functions of ops --*- C++ -*-===//
//
// The Verify and Infer columns of Ops.def. Shape functions assume operand
// types are already verified (defined, well-formed) and attributes match the
// op's schema; they check what depends on the op's semantics.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_SHAPEFUNCTIONS_H
#define AUTOPAR_IR_SHAPEFUNCTIONS_H

#include "ir/OpRegistry.h"

#include <utility>

namespace autopar {

using InferResult = llvm::Expected<llvm::SmallVector<TensorType, 1>>;

llvm::Error verifyReduce(const ShapeContext &Ctx);
llvm::Error verifyCollective(const ShapeContext &Ctx);
/// Gather and cross-entropy ops split over a mesh axis (`mesh`, `mesh_axis`).
llvm::Error verifyShardedGather(const ShapeContext &Ctx);
llvm::Error verifyTranspose(const ShapeContext &Ctx);

InferResult inferBroadcast(const ShapeContext &Ctx);
InferResult inferSameAsOperand(const ShapeContext &Ctx);
InferResult inferMatMul(const ShapeContext &Ctx);
/// numpy.matmul's result shape of operands 0 and 1 (any element types).
llvm::Expected<llvm::SmallVector<Dim, 4>>
getMatMulResultShape(const ShapeContext &Ctx);
InferResult inferLinear(const ShapeContext &Ctx);
InferResult inferReduce(const ShapeContext &Ctx);
InferResult inferConstant(const ShapeContext &Ctx);
InferResult inferShape(const ShapeContext &Ctx);
InferResult inferReshape(const ShapeContext &Ctx);
InferResult inferTranspose(const ShapeContext &Ctx);
InferResult inferConcat(const ShapeContext &Ctx);
InferResult inferGather(const ShapeContext &Ctx);
InferResult inferUnsqueeze(const ShapeContext &Ctx);
/// The node's declared result types (for ops autopar does not know).
InferResult inferDeclared(const ShapeContext &Ctx);
/// Collectives: logical types, or per-rank ones with `local = 1`.
InferResult inferCollective(const ShapeContext &Ctx);

// ShapeFunctionsMath.cpp: elementwise, contractions, normalizations.
llvm::Error verifyCast(const ShapeContext &Ctx);
llvm::Error verifyGelu(const ShapeContext &Ctx);
InferResult inferPow(const ShapeContext &Ctx);
InferResult inferCompare(const ShapeContext &Ctx);
InferResult inferLogical(const ShapeContext &Ctx);
InferResult inferWhere(const ShapeContext &Ctx);
InferResult inferFloatUnary(const ShapeContext &Ctx);
InferResult inferSwiGLU(const ShapeContext &Ctx);
InferResult inferLogicalNot(const ShapeContext &Ctx);
InferResult inferCast(const ShapeContext &Ctx);
InferResult inferDropout(const ShapeContext &Ctx);
InferResult inferDropoutGrad(const ShapeContext &Ctx);
InferResult inferAxisPreserving(const ShapeContext &Ctx);
InferResult inferCumSum(const ShapeContext &Ctx);
InferResult inferTrilu(const ShapeContext &Ctx);
InferResult inferGemm(const ShapeContext &Ctx);
InferResult inferEinsum(const ShapeContext &Ctx);
InferResult inferLayerNorm(const ShapeContext &Ctx);
InferResult inferRMSNorm(const ShapeContext &Ctx);
InferResult inferBatchNorm(const ShapeContext &Ctx);
InferResult inferInstanceNorm(const ShapeContext &Ctx);

// ShapeFunctionsElementwise.cpp: ONNX's other elementwise ops and
// reductions (variadic Min, Max, Mean; Mod, BitShift, bitwise ops, PRelu;
// Clip, IsNaN, IsInf; ArgMax, ArgMin).
llvm::Error verifyMod(const ShapeContext &Ctx);
llvm::Error verifyBitShift(const ShapeContext &Ctx);
llvm::Error verifyIsInf(const ShapeContext &Ctx);
llvm::Error verifyArgReduce(const ShapeContext &Ctx);
InferResult inferNumericBroadcast(const ShapeContext &Ctx);
InferResult inferFloatBroadcast(const ShapeContext &Ctx);
InferResult inferBitShift(const ShapeContext &Ctx);
InferResult inferBitwise(const ShapeContext &Ctx);
InferResult inferPRelu(const ShapeContext &Ctx);
InferResult inferNumericUnary(const ShapeContext &Ctx);
InferResult inferFloatClass(const ShapeContext &Ctx);
InferResult inferClip(const ShapeContext &Ctx);
InferResult inferArgReduce(const ShapeContext &Ctx);

// ShapeFunctionsConv.cpp and ShapeFunctionsAttention.cpp: convolution,
// pooling, attention.
InferResult inferConv(const ShapeContext &Ctx);
InferResult inferConvTranspose(const ShapeContext &Ctx);
InferResult inferDeformConv(const ShapeContext &Ctx);
InferResult inferCol2Im(const ShapeContext &Ctx);
// ShapeFunctionsImage.cpp: ops ONNX added after opset 17, and Resize.
InferResult inferCenterCropPad(const ShapeContext &Ctx);
InferResult inferGroupNorm(const ShapeContext &Ctx);
InferResult inferAffineGrid(const ShapeContext &Ctx);
InferResult inferTensorScatter(const ShapeContext &Ctx);
InferResult inferResize(const ShapeContext &Ctx);
// ShapeFunctionsRecurrent.cpp: LSTM, GRU, RNN.
InferResult inferRecurrent(const ShapeContext &Ctx);

// Quantization (ShapeFunctionsQuantized.cpp).
InferResult inferQuantizeLinear(const ShapeContext &Ctx);
InferResult inferDequantizeLinear(const ShapeContext &Ctx);
InferResult inferDynamicQuantizeLinear(const ShapeContext &Ctx);
InferResult inferMatMulInteger(const ShapeContext &Ctx);
InferResult inferConvInteger(const ShapeContext &Ctx);
InferResult inferMatMulNBits(const ShapeContext &Ctx);
InferResult inferGatherBlockQuantized(const ShapeContext &Ctx);
/// The gates of a recurrent op: 4 (LSTM), 3 (GRU), 1 (RNN).
unsigned getRecurrentGates(OpId Op);
InferResult inferPool(const ShapeContext &Ctx);
InferResult inferGlobalPool(const ShapeContext &Ctx);
InferResult inferAttention(const ShapeContext &Ctx);
InferResult inferAttentionWithProbs(const ShapeContext &Ctx);
InferResult inferRotaryEmbedding(const ShapeContext &Ctx);
InferResult inferMsAttention(const ShapeContext &Ctx);
InferResult inferMsGroupQueryAttention(const ShapeContext &Ctx);
InferResult inferMsEmbedLayerNorm(const ShapeContext &Ctx);

// ShapeFunctionsGrad.cpp: the loss and the backward ops.
InferResult inferCrossEntropyLoss(const ShapeContext &Ctx);
InferResult inferCrossEntropyLossGrad(const ShapeContext &Ctx);
InferResult inferNllLoss(const ShapeContext &Ctx);
InferResult inferNllLossGrad(const ShapeContext &Ctx);
InferResult inferLayerNormGrad(const ShapeContext &Ctx);
InferResult inferRMSNormGrad(const ShapeContext &Ctx);
InferResult inferAttentionGrad(const ShapeContext &Ctx);
InferResult inferUnaryGrad(const ShapeContext &Ctx);
InferResult inferSwiGLUGrad(const ShapeContext &Ctx);
InferResult inferGatherGrad(const ShapeContext &Ctx);
InferResult inferAdamW(const ShapeContext &Ctx);
InferResult inferSgd(const ShapeContext &Ctx);

// ShapeFunctionsLayout.cpp: shapes, layouts, data movement.
InferResult inferConstantOfShape(const ShapeContext &Ctx);
InferResult inferRange(const ShapeContext &Ctx);
InferResult inferSize(const ShapeContext &Ctx);
InferResult inferFlatten(const ShapeContext &Ctx);
InferResult inferSplit(const ShapeContext &Ctx);
InferResult inferSlice(const ShapeContext &Ctx);
InferResult inferGatherElements(const ShapeContext &Ctx);
InferResult inferScatterElements(const ShapeContext &Ctx);
InferResult inferSqueeze(const ShapeContext &Ctx);
InferResult inferExpand(const ShapeContext &Ctx);
InferResult inferTile(const ShapeContext &Ctx);
InferResult inferTopK(const ShapeContext &Ctx);

// ShapeFunctionsIndexing.cpp: Pad, GatherND, ScatterND, SpaceToDepth,
// DepthToSpace, EyeLike, OneHot, ReverseSequence.
InferResult inferPad(const ShapeContext &Ctx);
InferResult inferGatherND(const ShapeContext &Ctx);
InferResult inferScatterND(const ShapeContext &Ctx);
InferResult inferSpaceToDepth(const ShapeContext &Ctx);
InferResult inferDepthToSpace(const ShapeContext &Ctx);
InferResult inferEyeLike(const ShapeContext &Ctx);
InferResult inferOneHot(const ShapeContext &Ctx);
InferResult inferReverseSequence(const ShapeContext &Ctx);

/// The [start, end) range of dimensions a Shape node returns for an operand
/// of rank Rank, after ONNX's clamping of negative and out-of-range bounds.
std::pair<unsigned, unsigned> getShapeRange(const ShapeContext &Ctx,
                                            unsigned Rank);

//===----------------------------------------------------------------------===//
// Helpers for shape functions.
//===----------------------------------------------------------------------===//

/// Dimensions as text, `[2, batch, ?]`, for messages.
std::string dimsStr(llvm::ArrayRef<Dim> Dims);
/// Operand I's type as text, for messages.
std::string typeStr(const ShapeContext &Ctx, unsigned I);
/// Maps an ONNX axis in [-Rank, Rank) to [0, Rank); an error otherwise.
llvm::Expected<unsigned> normalizeAxis(const ShapeContext &Ctx, int64_t Axis,
                                       unsigned Rank);
/// The sum of two dimensions when it is a monomial, else unknown.
Dim addDims(const Dim &A, const Dim &B);
/// The more precise of two compatible dimensions.
Dim meetDims(const Dim &A, const Dim &B);
/// An error unless every given operand has operand 0's element type.
llvm::Error checkSameElementType(const ShapeContext &Ctx);
/// The `axes` attribute, else the constant operand 1 (empty when absent);
/// nullopt when operand 1 is given but not constant.
std::optional<std::vector<int64_t>> getAxes(const ShapeContext &Ctx);
bool isIntegerElementType(ElementType Ty);

/// Broadcasts two shapes as numpy does; nullopt when they do not broadcast.
std::optional<llvm::SmallVector<Dim, 4>> broadcastShapes(llvm::ArrayRef<Dim> A,
                                                         llvm::ArrayRef<Dim> B);
/// The same for the node of Ctx, under its graph's dimension equalities
/// (ir/DimEqualities.h): two dimensions assumed equal broadcast to their
/// representative, and while the graph records assumptions (the importer),
/// two that differ (symbols, or a symbol and a size) become one.
std::optional<llvm::SmallVector<Dim, 4>>
broadcastShapes(llvm::ArrayRef<Dim> A, llvm::ArrayRef<Dim> B,
                const ShapeContext &Ctx);

} // namespace autopar

#endif // AUTOPAR_IR_SHAPEFUNCTIONS_H
