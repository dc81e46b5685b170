//===- OpShapesMath.cpp - Shape plans of arithmetic ops -------------------===//
//
// See OpShapes.h: elementwise broadcasts, axis extents, softmax and
// normalisations, GEMMs, reductions, Cast and the loss.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Expected<Shape> autopar::planBinaryBroadcast(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.In[1];
  std::optional<Shape> Out = broadcastShapes({X.getShape(), Y.getShape()});
  if (!Out)
    return A.error("operands " + X.getTypeString() + " and " +
                   Y.getTypeString() + " do not broadcast");
  if (Error E = A.checkShape(0, *Out))
    return E;
  return *Out;
}

Expected<Shape> autopar::planBroadcast(const KernelArgs &A) {
  SmallVector<ArrayRef<int64_t>, 4> Shapes;
  for (const Tensor &X : A.In)
    Shapes.push_back(X.getShape());
  std::optional<Shape> Out = broadcastShapes(Shapes);
  if (!Out)
    return A.error("operands do not broadcast");
  if (Error E = A.checkShape(0, *Out))
    return E;
  return *Out;
}

Error autopar::checkWhereTypes(const KernelArgs &A) {
  const Tensor &X = A.In[1], &Y = A.In[2], &Z = A.Out[0];
  if (X.getElementType() != Y.getElementType() ||
      Z.getElementType() != X.getElementType())
    return A.error("X " + X.getTypeString() + ", Y " + Y.getTypeString() +
                   " and the result " + Z.getTypeString() +
                   " must have one element type");
  return Error::success();
}

Expected<AxisExtents> autopar::planAxis(const KernelArgs &A, unsigned I,
                                        int64_t DefaultAxis) {
  ArrayRef<int64_t> S = A.In[I].getShape();
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", DefaultAxis), S.size());
  if (!Axis)
    return Axis.takeError();
  AxisExtents P;
  P.Axis = *Axis;
  P.Outer = getNumElements(S.take_front(*Axis));
  P.Len = S[*Axis];
  P.Inner = getNumElements(S.drop_front(*Axis + 1));
  return P;
}

//===----------------------------------------------------------------------===//
// Softmax and normalisations
//===----------------------------------------------------------------------===//

Expected<AxisExtents> autopar::planSoftmax(const KernelArgs &A) {
  if (Error E = A.checkShape(0, A.In[0].getShape()))
    return E;
  return planAxis(A, 0, -1);
}

Expected<NormPlan> autopar::planNorm(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  NormPlan P;
  P.Axis = *Axis;
  P.Row = toShape(X.getShape().drop_front(*Axis));
  P.Len = getNumElements(P.Row);
  P.Rows = getNumElements(X.getShape().take_front(*Axis));
  return P;
}

Error autopar::checkBroadcastsToRow(const KernelArgs &A, unsigned I,
                                    ArrayRef<int64_t> Row) {
  const Tensor &T = A.In[I];
  std::optional<Shape> Joint = broadcastShapes({T.getShape(), Row});
  if (T.getRank() > Row.size() || !Joint || ArrayRef<int64_t>(*Joint) != Row)
    return A.error("operand " + Twine(I) + " " + T.getTypeString() +
                   " does not broadcast to the normalised shape");
  return Error::success();
}

Shape autopar::getNormStatShape(ArrayRef<int64_t> X, unsigned Axis) {
  Shape StatShape = toShape(X.take_front(Axis));
  StatShape.resize(X.size(), 1);
  return StatShape;
}

Expected<NormPlan> autopar::planNormGrad(const KernelArgs &A) {
  const Tensor &DY = A.In[0], &X = A.In[1], &Scale = A.In[2];
  if (DY.getShape() != X.getShape() ||
      DY.getElementType() != X.getElementType())
    return A.error("dY " + DY.getTypeString() + " and X " + X.getTypeString() +
                   " differ");
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  NormPlan P;
  P.Axis = *Axis;
  P.Row = toShape(X.getShape().drop_front(*Axis));
  P.Len = getNumElements(P.Row);
  P.Rows = getNumElements(X.getShape().take_front(*Axis));
  if (Scale.getNumElements() != P.Len)
    return A.error("scale " + Scale.getTypeString() +
                   " must have one value per normalised element (" +
                   Twine(P.Len) + ")");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  return P;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

Expected<MatMulPlan> autopar::planMatMul(const KernelArgs &A) {
  const Tensor &X = A.In[0], &W = A.In[1];
  if (X.getRank() == 0 || W.getRank() == 0)
    return A.error("operands must have rank 1 or more");
  Shape XS = toShape(X.getShape()), WS = toShape(W.getShape());
  MatMulPlan P;
  P.VectorX = XS.size() == 1;
  P.VectorW = WS.size() == 1;
  if (P.VectorX)
    XS.insert(XS.begin(), 1);
  if (P.VectorW)
    WS.push_back(1);
  P.M = XS[XS.size() - 2];
  P.K = XS.back();
  P.N = WS.back();
  if (WS[WS.size() - 2] != P.K)
    return A.error("contracting dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " differ");
  P.XBatch = toShape(ArrayRef<int64_t>(XS).drop_back(2));
  P.WBatch = toShape(ArrayRef<int64_t>(WS).drop_back(2));
  std::optional<Shape> Batch = broadcastShapes({P.XBatch, P.WBatch});
  if (!Batch)
    return A.error("batch dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " do not broadcast");
  P.Batch = *Batch;
  P.Out = P.Batch;
  if (!P.VectorX)
    P.Out.push_back(P.M);
  if (!P.VectorW)
    P.Out.push_back(P.N);
  if (Error E = A.checkShape(0, P.Out))
    return E;
  P.Count = getNumElements(P.Batch);
  P.XCount = getNumElements(P.XBatch);
  P.WCount = getNumElements(P.WBatch);
  return P;
}

Expected<LinearPlan> autopar::planLinear(const KernelArgs &A) {
  const Tensor &X = A.In[0], &W = A.In[1];
  if (X.getRank() == 0 || W.getRank() != 2 ||
      W.getDim(0) != X.getShape().back())
    return A.error("X " + X.getTypeString() + " and W " + W.getTypeString() +
                   " must be [..., K] and [K, N]");
  LinearPlan P;
  P.K = W.getDim(0);
  P.N = W.getDim(1);
  if (A.has(2) && A.In[2].getShape() != ArrayRef<int64_t>{P.N})
    return A.error("B " + A.In[2].getTypeString() + " must be [" + Twine(P.N) +
                   "]");
  Shape Out = toShape(X.getShape().drop_back());
  Out.push_back(P.N);
  if (Error E = A.checkShape(0, Out))
    return E;
  P.Rows = getNumElements(X.getShape().drop_back());
  return P;
}

Expected<GemmPlan> autopar::planGemm(const KernelArgs &A) {
  const Tensor &X = A.In[0], &W = A.In[1];
  if (X.getRank() != 2 || W.getRank() != 2)
    return A.error("A and B must have rank 2");
  GemmPlan P;
  P.TransA = A.intAttr("transA", 0);
  P.TransB = A.intAttr("transB", 0);
  P.Alpha = float(A.floatAttr("alpha", 1.0));
  P.Beta = float(A.floatAttr("beta", 1.0));
  P.M = X.getDim(P.TransA ? 1 : 0);
  P.K = X.getDim(P.TransA ? 0 : 1);
  P.N = W.getDim(P.TransB ? 0 : 1);
  if (W.getDim(P.TransB ? 1 : 0) != P.K)
    return A.error("contracting dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " differ");
  if (Error E = A.checkShape(0, {P.M, P.N}))
    return E;
  return P;
}

Error autopar::checkGemmC(const KernelArgs &A, const GemmPlan &P) {
  if (!A.has(2))
    return Error::success();
  const Tensor &C = A.In[2];
  Shape Target{P.M, P.N};
  std::optional<Shape> Joint = broadcastShapes({C.getShape(), Target});
  if (C.getRank() > 2 || !Joint || *Joint != Target)
    return A.error("C " + C.getTypeString() + " does not broadcast to [" +
                   Twine(P.M) + ", " + Twine(P.N) + "]");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Reductions, casts, the loss
//===----------------------------------------------------------------------===//

Expected<ReducePlan> autopar::planReduce(const KernelArgs &A,
                                         IntOperandReader ReadInts) {
  const Tensor &X = A.In[0];
  std::optional<Shape> Axes;
  if (const Attribute *Attr = A.attr("axes")) {
    Axes = toShape(Attr->getIntList());
  } else if (A.has(1)) {
    Expected<Shape> Given = ReadInts(1);
    if (!Given)
      return Given.takeError();
    Axes = std::move(*Given);
  }
  unsigned Rank = X.getRank();
  bool Empty = !Axes || Axes->empty();
  ReducePlan P;
  if (Empty && A.intAttr("noop_with_empty_axes", 0)) {
    if (Error E = A.checkShape(0, X.getShape()))
      return E;
    P.Noop = true;
    P.Reduced.assign(Rank, false);
    P.Kept = toShape(X.getShape());
    P.Red.assign(Rank, 1);
    return P;
  }
  P.Reduced.assign(Rank, Empty);
  if (!Empty)
    for (int64_t Axis : *Axes) {
      Expected<unsigned> D = A.normalizeAxis(Axis, Rank);
      if (!D)
        return D.takeError();
      P.Reduced[*D] = true;
    }
  Shape Out;
  bool KeepDims = A.intAttr("keepdims", 1);
  for (unsigned D = 0; D != Rank; ++D) {
    P.Kept.push_back(P.Reduced[D] ? 1 : X.getDim(D));
    P.Red.push_back(P.Reduced[D] ? X.getDim(D) : 1);
    if (P.Reduced[D])
      P.Count *= X.getDim(D);
    if (!P.Reduced[D] || KeepDims)
      Out.push_back(P.Kept.back());
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  return P;
}

Expected<ElementType> autopar::planCast(const KernelArgs &A) {
  std::optional<ElementType> To = parseElementTypeName(A.stringAttr("to", ""));
  if (!To)
    return A.error("'to' is not an element type");
  if (Error E = A.checkShape(0, A.In[0].getShape()))
    return E;
  return *To;
}

Expected<LossPlan> autopar::planLoss(const KernelArgs &A, unsigned Logits,
                                     unsigned Labels) {
  const Tensor &Z = A.In[Logits], &Y = A.In[Labels];
  if (Z.getRank() == 0 || Y.getShape() != Z.getShape().drop_back())
    return A.error("labels " + Y.getTypeString() +
                   " must have the leading dimensions of logits " +
                   Z.getTypeString());
  LossPlan P;
  P.Classes = Z.getShape().back();
  P.Rows = Y.getNumElements();
  P.Ignore = A.intAttr("ignore_index", -100);
  P.Mean = A.stringAttr("reduction", "mean") == "mean";
  return P;
}
