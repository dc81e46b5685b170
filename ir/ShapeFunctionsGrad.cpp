//===- ShapeFunctionsGrad.cpp - Shapes of the training ops ----------------===//
//
// The loss and the fused backward ops that the autodiff pass emits
// (Ops.def, "Training"). A gradient has the type of what it is the gradient
// of, so most results copy an operand's type; the checks are those a
// hand-written program can get wrong.
//
//===----------------------------------------------------------------------===//

#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

/// Types of the operands in Indices, in order.
static InferResult likeOperands(const ShapeContext &Ctx,
                                std::initializer_list<unsigned> Indices) {
  Types Result;
  for (unsigned I : Indices)
    Result.push_back(Ctx.getOperandType(I));
  return Result;
}

static Error checkSameShape(const ShapeContext &Ctx, unsigned I, unsigned J) {
  ArrayRef<Dim> A = Ctx.getOperandType(I).getShape(),
                B = Ctx.getOperandType(J).getShape();
  bool Same = A.size() == B.size();
  for (unsigned D = 0; Same && D != A.size(); ++D)
    Same = mayEqual(A[D], B[D]);
  if (!Same)
    return Ctx.error(describe(Ctx, I) + " and " + describe(Ctx, J) +
                     " must have the same shape");
  return Error::success();
}

/// Float logits [..., classes] and integer labels [...] with the logits'
/// leading dimensions.
static Error checkLogitsAndLabels(const ShapeContext &Ctx, unsigned Logits,
                                  unsigned Labels) {
  if (Error E = checkFloat(Ctx, Logits))
    return E;
  if (Error E = checkIndexType(Ctx, Labels))
    return E;
  ArrayRef<Dim> L = Ctx.getOperandType(Logits).getShape(),
                Y = Ctx.getOperandType(Labels).getShape();
  bool Ok = !L.empty() && Y.size() + 1 == L.size();
  for (unsigned D = 0; Ok && D != Y.size(); ++D)
    Ok = mayEqual(L[D], Y[D]);
  if (!Ok)
    return Ctx.error(describe(Ctx, Labels) +
                     " must have the leading dimensions of " +
                     describe(Ctx, Logits) + " (classes are the last)");
  if (const Attribute *R = Ctx.getAttr("reduction"))
    if (R->getString() != "sum" && R->getString() != "mean")
      return Ctx.error("reduction must be \"sum\" or \"mean\", got \"" +
                       R->getString() + "\"");
  return Error::success();
}

InferResult autopar::inferCrossEntropyLoss(const ShapeContext &Ctx) {
  if (Error E = checkLogitsAndLabels(Ctx, 0, 1))
    return E;
  return Types{TensorType(elementTypeOf(Ctx, 0), {})};
}

InferResult autopar::inferCrossEntropyLossGrad(const ShapeContext &Ctx) {
  if (Error E = checkLogitsAndLabels(Ctx, 1, 2))
    return E;
  if (Ctx.getOperandType(0).getRank() != 0)
    return Ctx.error(describe(Ctx, 0) + " must be a scalar");
  return likeOperands(Ctx, {1});
}

/// The loss type of NegativeLogLikelihoodLoss, whose input, target and
/// weight are operands First, First + 1 and First + 2 (the gradient's come
/// after dloss): input [N, C, d...], target [N, d...], weight [C]?; the loss
/// has target's shape (reduction none) or is a scalar.
static Expected<TensorType> checkNllLoss(const ShapeContext &Ctx,
                                         unsigned First) {
  unsigned In = First, Target = First + 1, Weight = First + 2;
  if (Error E = checkFloat(Ctx, In))
    return E;
  if (Error E = checkIndexType(Ctx, Target))
    return E;
  ArrayRef<Dim> X = Ctx.getOperandType(In).getShape(),
                T = Ctx.getOperandType(Target).getShape();
  bool Ok = X.size() >= 2 && T.size() + 1 == X.size() && mayEqual(X[0], T[0]);
  for (unsigned D = 2; Ok && D != X.size(); ++D)
    Ok = mayEqual(X[D], T[D - 1]);
  if (!Ok)
    return Ctx.error(describe(Ctx, Target) + " must have the dimensions of " +
                     describe(Ctx, In) + " but the classes (axis 1)");
  if (Ctx.hasOperand(Weight)) {
    if (Error E = checkSameElementTypeAs(Ctx, Weight, In))
      return E;
    const TensorType &W = Ctx.getOperandType(Weight);
    if (W.getRank() != 1 || !mayEqual(W.getDim(0), X[1]))
      return Ctx.error(describe(Ctx, Weight) + " must have shape [" +
                       dimStr(X[1]) + "], one weight per class");
  }
  StringRef Reduction = "mean";
  if (const Attribute *R = Ctx.getAttr("reduction"))
    Reduction = R->getString();
  if (Reduction != "none" && Reduction != "sum" && Reduction != "mean")
    return Ctx.error("'reduction' must be none, sum or mean, got '" +
                     Reduction + "'");
  if (Reduction == "none")
    return TensorType(elementTypeOf(Ctx, In), T);
  return TensorType(elementTypeOf(Ctx, In), {});
}

InferResult autopar::inferNllLoss(const ShapeContext &Ctx) {
  Expected<TensorType> Loss = checkNllLoss(Ctx, 0);
  if (!Loss)
    return Loss.takeError();
  return Types{*Loss};
}

// dloss has the loss's type; the result, the input's.
InferResult autopar::inferNllLossGrad(const ShapeContext &Ctx) {
  Expected<TensorType> Loss = checkNllLoss(Ctx, 1);
  if (!Loss)
    return Loss.takeError();
  const TensorType &DLoss = Ctx.getOperandType(0);
  bool Ok = DLoss.getElementType() == Loss->getElementType() &&
            DLoss.getRank() == Loss->getRank();
  for (unsigned D = 0; Ok && D != DLoss.getRank(); ++D)
    Ok = mayEqual(DLoss.getDim(D), Loss->getDim(D));
  if (!Ok)
    return Ctx.error(describe(Ctx, 0) + " must have the loss's type " +
                     Loss->str());
  return likeOperands(Ctx, {1});
}

/// dY and X of one type (the forward op's input and output agree).
static Error checkGradOf(const ShapeContext &Ctx, unsigned DY, unsigned X) {
  if (Error E = checkFloat(Ctx, DY))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, DY, X))
    return E;
  return checkSameShape(Ctx, DY, X);
}

// Results: dX, dScale, dB.
InferResult autopar::inferLayerNormGrad(const ShapeContext &Ctx) {
  if (Error E = checkGradOf(Ctx, 0, 1))
    return E;
  return likeOperands(Ctx, {1, 2, 2});
}

// Results: dX, dScale.
InferResult autopar::inferRMSNormGrad(const ShapeContext &Ctx) {
  if (Error E = checkGradOf(Ctx, 0, 1))
    return E;
  return likeOperands(Ctx, {1, 2});
}

// dY is the attention's output [batch, q_heads, q_seq, v_head] (4-D form);
// results dQ, dK, dV.
InferResult autopar::inferAttentionGrad(const ShapeContext &Ctx) {
  for (unsigned I = 0; I != 4; ++I) {
    if (Error E = checkFloat(Ctx, I))
      return E;
    if (Error E = checkRank(Ctx, I, 4))
      return E;
  }
  // The forward's probabilities [B, Hq, Sq, Skv] when it kept them.
  constexpr unsigned Probs = 5;
  if (Ctx.hasOperand(Probs)) {
    if (Error E = checkSameElementTypeAs(Ctx, Probs, 1))
      return E;
    if (Error E = checkRank(Ctx, Probs, 4))
      return E;
    const Dim Want[] = {dimOf(Ctx, 1, 0), dimOf(Ctx, 1, 1), dimOf(Ctx, 1, 2),
                        dimOf(Ctx, 2, 2)};
    for (unsigned D = 0; D != 4; ++D)
      if (!mayEqual(dimOf(Ctx, Probs, D), Want[D]))
        return Ctx.error(describe(Ctx, Probs) +
                         " must be [batch, q heads, q sequence, kv sequence] "
                         "of Q and K");
  }
  // With dropout and probs: the forward's mask and dropped probabilities,
  // of the probabilities' shape.
  for (unsigned I : {6u, 7u}) {
    if (!Ctx.hasOperand(I))
      continue;
    if (!Ctx.hasOperand(Probs))
      return Ctx.error(describe(Ctx, I) + " needs probs");
    if (I == 6) {
      if (Error E = checkElementType(Ctx, I, ElementType::Bool))
        return E;
    } else if (Error E = checkSameElementTypeAs(Ctx, I, 1)) {
      return E;
    }
    if (Error E = checkRank(Ctx, I, 4))
      return E;
    for (unsigned D = 0; D != 4; ++D)
      if (!mayEqual(dimOf(Ctx, I, D), dimOf(Ctx, Probs, D)))
        return Ctx.error(describe(Ctx, I) + " must have the shape of probs");
  }
  return likeOperands(Ctx, {1, 2, 3});
}

// DropoutGrad(dY, mask) -> dX: the mask (bool) has dY's shape.
InferResult autopar::inferDropoutGrad(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkElementType(Ctx, 1, ElementType::Bool))
    return E;
  const TensorType &DY = Ctx.getOperandType(0), &Mask = Ctx.getOperandType(1);
  if (DY.getRank() != Mask.getRank())
    return Ctx.error(describe(Ctx, 1) + " must have the shape of " +
                     describe(Ctx, 0));
  for (unsigned D = 0; D != DY.getRank(); ++D)
    if (!mayEqual(DY.getDim(D), Mask.getDim(D)))
      return Ctx.error(describe(Ctx, 1) + " must have the shape of " +
                       describe(Ctx, 0));
  const Attribute *RatioAttr = Ctx.getAttr("ratio");
  double Ratio = RatioAttr ? RatioAttr->getFloat() : 0;
  if (!(Ratio >= 0 && Ratio < 1))
    return Ctx.error("'ratio' must be in [0, 1), got " + std::to_string(Ratio));
  return likeOperands(Ctx, {0});
}

// GeluGrad, SiluGrad, SoftmaxGrad: (dY, X or Y) -> dX.
InferResult autopar::inferUnaryGrad(const ShapeContext &Ctx) {
  if (Error E = checkGradOf(Ctx, 0, 1))
    return E;
  return likeOperands(Ctx, {1});
}

// (dY, A, B) -> dA, dB.
InferResult autopar::inferSwiGLUGrad(const ShapeContext &Ctx) {
  if (Error E = checkGradOf(Ctx, 0, 1))
    return E;
  if (Error E = checkGradOf(Ctx, 0, 2))
    return E;
  return likeOperands(Ctx, {1, 2});
}

// (data, indices, dY) -> dData: dY has Gather(data, indices)'s shape.
InferResult autopar::inferGatherGrad(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkIndexType(Ctx, 1))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
    return E;
  const TensorType &Data = Ctx.getOperandType(0);
  int64_t Axis = Ctx.getIntAttr("axis", 0);
  if (Axis < 0)
    Axis += Data.getRank();
  if (Axis < 0 || Axis >= (int64_t)Data.getRank())
    return Ctx.error("axis is out of range for " + describe(Ctx, 0));
  unsigned Expected = Data.getRank() - 1 + Ctx.getOperandType(1).getRank();
  if (Ctx.getOperandType(2).getRank() != Expected)
    return Ctx.error(describe(Ctx, 2) + " must have rank " + Twine(Expected) +
                     ", the rank of Gather(data, indices)");
  return likeOperands(Ctx, {0});
}

/// Operands [First, Last) are f32 scalars (hyperparameters).
static Error checkHyperparameters(const ShapeContext &Ctx, unsigned First,
                                  unsigned Last) {
  for (unsigned I = First; I != Last; ++I)
    if (Ctx.hasOperand(I) && // an optional `skip` may be absent
        (Ctx.getOperandType(I).getRank() != 0 ||
         Ctx.getOperandType(I).getElementType() != ElementType::F32))
      return Ctx.error(describe(Ctx, I) + " must be an f32 scalar");
  return Error::success();
}

// (param, grad, exp_avg, exp_avg_sq, 6 scalars, skip?) -> new param and
// moments.
InferResult autopar::inferAdamW(const ShapeContext &Ctx) {
  for (unsigned I : {1u, 2u, 3u}) {
    if (Error E = checkFloat(Ctx, I))
      return E;
    if (Error E = checkSameShape(Ctx, 0, I))
      return E;
  }
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkHyperparameters(Ctx, 4, Ctx.getNumOperands()))
    return E;
  return likeOperands(Ctx, {0, 2, 3});
}

InferResult autopar::inferSgd(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkSameShape(Ctx, 0, 1))
    return E;
  if (Error E = checkHyperparameters(Ctx, 2, Ctx.getNumOperands()))
    return E;
  return likeOperands(Ctx, {0});
}
