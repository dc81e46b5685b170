//===- WindowSupport.cpp - Sliding windows of Conv and pooling ------------===//

#include "runtime/cpu/WindowSupport.h"

#include "ir/Graph.h"

#include "llvm/Support/MathExtras.h"

using namespace autopar;
using namespace llvm;

int64_t SlidingWindow::getKernelSize() const { return getNumElements(Kernel); }

int64_t SlidingWindow::getOutSize() const { return getNumElements(Out); }

Expected<Shape> autopar::getIntListAttr(const KernelArgs &A, StringRef Name,
                                        unsigned Count, int64_t Default,
                                        int64_t Min) {
  const Attribute *Attr = A.attr(Name);
  if (!Attr)
    return Shape(Count, Default);
  Shape List;
  if (Attr->isa(Attribute::Kind::IntList))
    List = toShape(Attr->getIntList());
  else if (!Attr->isa(Attribute::Kind::List) || !Attr->getList().empty())
    return A.error("'" + Name + "' must be a list of integers");
  if (List.size() != Count)
    return A.error("'" + Name + "' has " + Twine(List.size()) +
                   " entries, expected " + Twine(Count));
  for (int64_t V : List)
    if (V < Min)
      return A.error("'" + Name + "' entries must be at least " + Twine(Min) +
                     ", got " + Twine(V));
  return List;
}

Error autopar::checkF32Operands(const KernelArgs &A) {
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (A.has(I))
      if (Error E = A.checkType(I, {ElementType::F32}))
        return E;
  return A.checkResultType(0, {ElementType::F32});
}

Expected<SlidingWindow> autopar::getSlidingWindow(const KernelArgs &A,
                                                  ArrayRef<int64_t> Kernel,
                                                  bool CeilMode) {
  const Tensor &X = A.In[0];
  if (X.getRank() < 3)
    return A.error("operand 0 " + X.getTypeString() +
                   " must have a batch, a channel and a spatial dimension");
  unsigned NumSpatial = X.getRank() - 2;
  if (Kernel.size() != NumSpatial)
    return A.error("the kernel has " + Twine(Kernel.size()) +
                   " dimensions but operand 0 " + X.getTypeString() + " has " +
                   Twine(NumSpatial) + " spatial dimensions");
  SlidingWindow W;
  W.In = toShape(X.getShape().drop_front(2));
  W.Kernel = toShape(Kernel);
  for (int64_t K : Kernel)
    if (K < 1)
      return A.error("kernel sizes must be positive");
  Expected<Shape> Strides = getIntListAttr(A, "strides", NumSpatial, 1, 1);
  if (!Strides)
    return Strides.takeError();
  W.Strides = std::move(*Strides);
  Expected<Shape> Dilations = getIntListAttr(A, "dilations", NumSpatial, 1, 1);
  if (!Dilations)
    return Dilations.takeError();
  W.Dilations = std::move(*Dilations);
  StringRef AutoPad = A.stringAttr("auto_pad", "NOTSET");
  if (AutoPad != "NOTSET" && AutoPad != "VALID" && AutoPad != "SAME_UPPER" &&
      AutoPad != "SAME_LOWER")
    return A.error("'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or "
                   "VALID, got '" +
                   AutoPad + "'");
  bool Same = AutoPad.startswith("SAME");
  Shape Pads(2 * NumSpatial, 0);
  if (AutoPad == "NOTSET") {
    Expected<Shape> Explicit = getIntListAttr(A, "pads", 2 * NumSpatial, 0, 0);
    if (!Explicit)
      return Explicit.takeError();
    Pads = std::move(*Explicit);
  }
  for (unsigned D = 0; D != NumSpatial; ++D) {
    int64_t In = W.In[D], Stride = W.Strides[D], Span, Out;
    if (MulOverflow(W.Kernel[D] - 1, W.Dilations[D], Span) || ++Span <= 0)
      return A.error("the effective kernel along spatial axis " + Twine(D) +
                     " overflows");
    int64_t Begin = Pads[D], End = Pads[D + NumSpatial];
    if (Same) {
      Out = (In + Stride - 1) / Stride;
      int64_t Total = std::max<int64_t>(0, (Out - 1) * Stride + Span - In);
      Begin = AutoPad == "SAME_UPPER" ? Total / 2 : Total - Total / 2;
      End = Total - Begin;
    } else {
      int64_t Size = In + Begin + End - Span;
      if (Size < 0)
        return A.error("operand 0 " + X.getTypeString() +
                       " is smaller than the kernel along spatial axis " +
                       Twine(D));
      bool Ceil = CeilMode && AutoPad == "NOTSET";
      Out = (Ceil ? (Size + Stride - 1) / Stride : Size / Stride) + 1;
      if (Ceil && (Out - 1) * Stride >= In + Begin)
        --Out;
    }
    W.PadBegin.push_back(Begin);
    W.PadEnd.push_back(End);
    W.Out.push_back(Out);
  }
  return W;
}
