//===- ShapeFunctionsConv.cpp - Convolution and pooling ------------------===//
//
// Shape functions of the NCHW convolution and pooling ops (ONNX Conv,
// ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, LpPool,
// GlobalLpPool). None of these ops
// has a verifier, so the shape functions also check the attribute values
// they depend on.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

namespace {

//===----------------------------------------------------------------------===//
// Convolution and pooling windows
//===----------------------------------------------------------------------===//

enum class AutoPad { NotSet, Valid, SameUpper, SameLower };

Expected<AutoPad> getAutoPad(const ShapeContext &Ctx) {
  const Attribute *A = Ctx.getAttr("auto_pad");
  if (!A)
    return AutoPad::NotSet;
  StringRef S = A->getString();
  if (S == "NOTSET")
    return AutoPad::NotSet;
  if (S == "VALID")
    return AutoPad::Valid;
  if (S == "SAME_UPPER")
    return AutoPad::SameUpper;
  if (S == "SAME_LOWER")
    return AutoPad::SameLower;
  return Ctx.error(
      "'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + S +
      "'");
}

/// The window of a convolution or pooling node along its spatial axes.
struct Window {
  AutoPad Padding = AutoPad::NotSet;
  /// The kernel size per axis; nullopt where it is not known.
  SmallVector<std::optional<int64_t>, 4> Kernel;
  SmallVector<int64_t, 4> Strides;
  SmallVector<int64_t, 4> Dilations;
  /// [x1_begin, ..., xn_begin, x1_end, ..., xn_end].
  SmallVector<int64_t, 8> Pads;

  bool isSame() const {
    return Padding == AutoPad::SameUpper || Padding == AutoPad::SameLower;
  }
};

/// The int list attribute Name with PerAxis entries for each of the
/// NumSpatial spatial axes of X (operand 0), each at least Min; Default
/// fills it when it is absent.
Expected<SmallVector<int64_t, 4>>
getSpatialList(const ShapeContext &Ctx, StringRef Name, unsigned NumSpatial,
               unsigned PerAxis, int64_t Default, int64_t Min) {
  const Attribute *A = Ctx.getAttr(Name);
  if (!A)
    return SmallVector<int64_t, 4>(NumSpatial * PerAxis, Default);
  ArrayRef<int64_t> List = A->getIntList();
  if (List.size() != NumSpatial * PerAxis)
    return Ctx.error("'" + Name + "' has " + Twine(List.size()) +
                     " entries but " + describe(Ctx, 0) + " has " +
                     Twine(NumSpatial) + " spatial dimensions" +
                     (PerAxis == 2 ? " (a begin and an end entry each)" : ""));
  for (int64_t V : List)
    if (V < Min)
      return Ctx.error("'" + Name + "' entries must be " +
                       (Min > 0 ? "positive" : "non-negative") + ", got " +
                       Twine(V));
  return SmallVector<int64_t, 4>(List.begin(), List.end());
}

/// The kernel: 'kernel_shape' when given, which must match the spatial
/// dimensions of the weights (operand Weights) where they are known; else
/// the static spatial dimensions of the weights.
Expected<SmallVector<std::optional<int64_t>, 4>>
getKernel(const ShapeContext &Ctx, unsigned NumSpatial,
          std::optional<unsigned> Weights) {
  SmallVector<std::optional<int64_t>, 4> Kernel;
  if (Ctx.getAttr("kernel_shape")) {
    auto List = getSpatialList(Ctx, "kernel_shape", NumSpatial, 1, 1, 1);
    if (!List)
      return List.takeError();
    for (unsigned I = 0; I != NumSpatial; ++I) {
      if (Weights &&
          !mayEqual(dimOf(Ctx, *Weights, I + 2), Dim::get((*List)[I])))
        return Ctx.error("'kernel_shape' does not match the spatial "
                         "dimensions of " +
                         describe(Ctx, *Weights));
      Kernel.push_back((*List)[I]);
    }
    return Kernel;
  }
  if (!Weights)
    return Ctx.error("'kernel_shape' is required");
  for (unsigned I = 0; I != NumSpatial; ++I) {
    const Dim &K = dimOf(Ctx, *Weights, I + 2);
    if (K.isStatic() && K.getSize() == 0)
      return Ctx.error(describe(Ctx, *Weights) + " has an empty kernel");
    Kernel.push_back(K.isStatic() ? std::optional<int64_t>(K.getSize())
                                  : std::nullopt);
  }
  return Kernel;
}

/// Reads the window attributes of a node whose operand 0 has NumSpatial
/// spatial dimensions. Weights is the operand the kernel comes from when
/// 'kernel_shape' is absent (Conv, ConvTranspose).
Expected<Window> getWindow(const ShapeContext &Ctx, unsigned NumSpatial,
                           std::optional<unsigned> Weights) {
  Window W;
  Expected<AutoPad> Padding = getAutoPad(Ctx);
  if (!Padding)
    return Padding.takeError();
  W.Padding = *Padding;
  auto Kernel = getKernel(Ctx, NumSpatial, Weights);
  if (!Kernel)
    return Kernel.takeError();
  W.Kernel = std::move(*Kernel);
  auto Strides = getSpatialList(Ctx, "strides", NumSpatial, 1, 1, 1);
  if (!Strides)
    return Strides.takeError();
  W.Strides = std::move(*Strides);
  auto Dilations = getSpatialList(Ctx, "dilations", NumSpatial, 1, 1, 1);
  if (!Dilations)
    return Dilations.takeError();
  W.Dilations = std::move(*Dilations);
  // ONNX: pads cannot be used simultaneously with auto_pad.
  if (W.Padding != AutoPad::NotSet && Ctx.getAttr("pads"))
    return Ctx.error("'pads' cannot be used with 'auto_pad' " +
                     Ctx.getAttr("auto_pad")->getString());
  auto Pads = getSpatialList(Ctx, "pads", NumSpatial, 2, 0, 0);
  if (!Pads)
    return Pads.takeError();
  W.Pads.assign(Pads->begin(), Pads->end());
  return W;
}

int64_t floorDiv(int64_t A, int64_t B) { return A / B - (A % B != 0 && A < 0); }

int64_t ceilDiv(int64_t A, int64_t B) { return A / B + (A % B != 0 && A > 0); }

/// (Kernel - 1) * Dilation + 1, or nullopt on overflow.
std::optional<int64_t> effectiveKernel(int64_t Kernel, int64_t Dilation) {
  int64_t Span;
  if (MulOverflow(Kernel - 1, Dilation, Span) ||
      AddOverflow(Span, int64_t(1), Span))
    return std::nullopt;
  return Span;
}

Error overflowError(const ShapeContext &Ctx, unsigned Axis) {
  return Ctx.error("the window arithmetic along spatial axis " + Twine(Axis) +
                   " of " + describe(Ctx, 0) + " overflows");
}

/// The output size of a sliding window along spatial axis Axis (ONNX Conv,
/// MaxPool, AveragePool): ceil(in / stride) for SAME padding, else
/// floor((in + pads - effective_kernel) / stride) + 1, with ceil in
/// ceil_mode, where a last window that would start in the end padding is
/// dropped. A symbolic `in` that the stride divides gives in / stride plus a
/// constant, which stays exact when the constant is 0.
Expected<Dim> slidingOutput(const ShapeContext &Ctx, const Window &W,
                            unsigned Axis, bool CeilMode) {
  const Dim &In = dimOf(Ctx, 0, Axis + 2);
  int64_t Stride = W.Strides[Axis];
  if (W.isSame())
    return ceilDivDim(In, Stride);
  if (!W.Kernel[Axis])
    return Dim();
  int64_t PadBegin = W.Pads[Axis], PadEnd = W.Pads[Axis + W.Strides.size()];
  std::optional<int64_t> Span =
      effectiveKernel(*W.Kernel[Axis], W.Dilations[Axis]);
  int64_t Offset;
  if (!Span || AddOverflow(PadBegin, PadEnd, Offset) ||
      SubOverflow(Offset, *Span, Offset))
    return overflowError(Ctx, Axis);
  // VALID gives floor((in - effective_kernel) / stride) + 1 in either mode.
  bool Ceil = CeilMode && W.Padding != AutoPad::Valid;
  if (In.isStatic()) {
    int64_t Size, Start, LastStart;
    if (AddOverflow(In.getSize(), Offset, Size) ||
        AddOverflow(In.getSize(), PadBegin, Start))
      return overflowError(Ctx, Axis);
    if (Size < 0)
      return Ctx.error(describe(Ctx, 0) +
                       " is smaller than the kernel along spatial axis " +
                       Twine(Axis) + " (padded size " + Twine(Size + *Span) +
                       ", kernel " + Twine(*Span) + ")");
    int64_t Out;
    if (AddOverflow(Ceil ? ceilDiv(Size, Stride) : Size / Stride, int64_t(1),
                    Out))
      return overflowError(Ctx, Axis);
    if (Ceil && (MulOverflow(Out - 1, Stride, LastStart) || LastStart >= Start))
      --Out;
    return Dim::get(Out);
  }
  std::optional<Dim> Quotient = In.divide(Dim::get(Stride));
  if (!Quotient)
    return Dim();
  // in = stride * q: the output is q + Constant.
  int64_t Constant =
      (Ceil ? ceilDiv(Offset, Stride) : floorDiv(Offset, Stride)) + 1;
  int64_t LastStart;
  if (Ceil &&
      (MulOverflow(Constant - 1, Stride, LastStart) || LastStart >= PadBegin))
    --Constant;
  return Constant == 0 ? *Quotient : Dim();
}

/// Checks that X (operand 0) has a batch, a channel and at least one
/// spatial dimension, and returns the number of spatial dimensions.
Expected<unsigned> getNumSpatial(const ShapeContext &Ctx) {
  unsigned Rank = Ctx.getOperandType(0).getRank();
  if (Rank < 3)
    return Ctx.error(describe(Ctx, 0) +
                     " must have a batch, a channel and at least one spatial "
                     "dimension");
  return Rank - 2;
}

Expected<int64_t> getGroup(const ShapeContext &Ctx) {
  int64_t Group = Ctx.getIntAttr("group", 1);
  if (Group < 1)
    return Ctx.error("'group' must be positive, got " + Twine(Group));
  return Group;
}

/// X and W of Conv and ConvTranspose: the same float type and rank.
Error checkConvOperands(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, 1, 0))
    return E;
  if (Ctx.getOperandType(1).getRank() != Ctx.getOperandType(0).getRank())
    return Ctx.error(describe(Ctx, 1) + " must have the rank of " +
                     describe(Ctx, 0));
  return Error::success();
}

/// Channels (operand I's dimension D) must be divisible by 'group'.
Error checkGroupDivides(const ShapeContext &Ctx, unsigned I, unsigned D,
                        int64_t Group) {
  const Dim &Channels = dimOf(Ctx, I, D);
  if (!Channels.isStatic() || Channels.getSize() % Group == 0)
    return Error::success();
  return Ctx.error("dimension " + Twine(D) + " of " + describe(Ctx, I) +
                   " is not divisible by 'group' " + Twine(Group));
}

/// The optional bias B (operand I, 2 by default): [Channels] of X's element
/// type. B may tell the number of channels where the weights do not.
Error checkBias(const ShapeContext &Ctx, Dim &Channels, unsigned I = 2,
                unsigned TypeOf = 0) {
  if (!Ctx.hasOperand(I))
    return Error::success();
  if (Error E = checkSameElementTypeAs(Ctx, I, TypeOf))
    return E;
  const TensorType &B = Ctx.getOperandType(I);
  if (B.getRank() != 1 || !mayEqual(B.getDim(0), Channels))
    return Ctx.error(describe(Ctx, I) + " must have shape [" +
                     dimStr(Channels) + "], one entry per output channel");
  Channels = meetDims(Channels, B.getDim(0));
  return Error::success();
}

/// ConvTranspose's size along spatial axis Axis without output_shape:
/// in * stride for SAME padding, else stride * (in - 1) + output_padding +
/// effective_kernel - pads.
Expected<Dim> transposedOutput(const ShapeContext &Ctx, const Window &W,
                               unsigned Axis, int64_t OutputPadding) {
  const Dim &In = dimOf(Ctx, 0, Axis + 2);
  int64_t Stride = W.Strides[Axis];
  if (W.isSame())
    return In * Dim::get(Stride);
  if (!W.Kernel[Axis])
    return Dim();
  int64_t PadBegin = W.Pads[Axis], PadEnd = W.Pads[Axis + W.Strides.size()];
  std::optional<int64_t> Span =
      effectiveKernel(*W.Kernel[Axis], W.Dilations[Axis]);
  // The output is stride * in + Constant.
  int64_t Constant;
  if (!Span || AddOverflow(OutputPadding, *Span, Constant) ||
      SubOverflow(Constant, PadBegin, Constant) ||
      SubOverflow(Constant, PadEnd, Constant) ||
      SubOverflow(Constant, Stride, Constant))
    return overflowError(Ctx, Axis);
  if (!In.isStatic())
    return Constant == 0 ? In * Dim::get(Stride) : Dim();
  int64_t Out;
  if (MulOverflow(In.getSize(), Stride, Out) || AddOverflow(Out, Constant, Out))
    return overflowError(Ctx, Axis);
  if (Out < 1)
    return Ctx.error(describe(Ctx, 0) +
                     " leaves no output along spatial axis " + Twine(Axis) +
                     " (size " + Twine(Out) + ")");
  return Dim::get(Out);
}

} // namespace

/// Conv and DeformConv: X [N, C, D1..Dn], W [M, C/group, k1..kn], B [M]
/// (operand Bias) -> [N, M, ...].
/// Conv, and ConvInteger (Integer: u8/i8 codes, i32 sums, a per-tensor
/// zero point of x and one per tensor or per output channel of w).
static InferResult inferConvolution(const ShapeContext &Ctx, unsigned Bias,
                                    bool Integer = false) {
  if (Integer) {
    for (unsigned I : {0u, 1u}) {
      ElementType Ty = elementTypeOf(Ctx, I);
      if (Ty != ElementType::U8 && Ty != ElementType::I8)
        return Ctx.error(describe(Ctx, I) + " must be u8 or i8");
    }
    if (Ctx.getOperandType(1).getRank() != Ctx.getOperandType(0).getRank())
      return Ctx.error(describe(Ctx, 1) + " must have the rank of " +
                       describe(Ctx, 0));
    if (Ctx.hasOperand(2)) {
      if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
        return E;
      const TensorType &Z = Ctx.getOperandType(2);
      if (Z.getRank() > 1 || (Z.getRank() == 1 && !isStaticOne(Z.getDim(0))))
        return Ctx.error(describe(Ctx, 2) + " must be a scalar");
    }
  } else if (Error E = checkConvOperands(Ctx)) {
    return E;
  }
  Expected<unsigned> NumSpatial = getNumSpatial(Ctx);
  if (!NumSpatial)
    return NumSpatial.takeError();
  Expected<int64_t> Group = getGroup(Ctx);
  if (!Group)
    return Group.takeError();
  Dim WeightChannels = dimOf(Ctx, 1, 1) * Dim::get(*Group);
  if (!mayEqual(dimOf(Ctx, 0, 1), WeightChannels))
    return Ctx.error(describe(Ctx, 0) + " has " + dimStr(dimOf(Ctx, 0, 1)) +
                     " channels but " + describe(Ctx, 1) + " with 'group' " +
                     Twine(*Group) + " takes " + dimStr(WeightChannels));
  if (Error E = checkGroupDivides(Ctx, 1, 0, *Group))
    return E;
  Dim OutChannels = dimOf(Ctx, 1, 0);
  // ConvInteger's w_zero_point is a scalar or a bias-like [M].
  bool Scalar = Integer && Ctx.hasOperand(Bias) &&
                Ctx.getOperandType(Bias).getNumElements() == Dim::get(1) &&
                Ctx.getOperandType(Bias).getRank() <= 1;
  if (Scalar) {
    if (Error E = checkSameElementTypeAs(Ctx, Bias, 1))
      return E;
  } else if (Error E = checkBias(Ctx, OutChannels, Bias, Integer ? 1 : 0)) {
    return E;
  }
  Expected<Window> W = getWindow(Ctx, *NumSpatial, /*Weights=*/1);
  if (!W)
    return W.takeError();
  SmallVector<Dim, 4> Shape = {dimOf(Ctx, 0, 0), OutChannels};
  for (unsigned I = 0; I != *NumSpatial; ++I) {
    Expected<Dim> Out = slidingOutput(Ctx, *W, I, /*CeilMode=*/false);
    if (!Out)
      return Out.takeError();
    Shape.push_back(*Out);
  }
  return Types{
      TensorType(Integer ? ElementType::I32 : elementTypeOf(Ctx, 0), Shape)};
}

// ONNX Conv: X [N, C, D1..Dn], W [M, C/group, k1..kn], B [M] -> [N, M, ...].
InferResult autopar::inferConv(const ShapeContext &Ctx) {
  return inferConvolution(Ctx, 2);
}

// ONNX ConvInteger: Conv of u8/i8 codes minus their zero points, in i32.
InferResult autopar::inferConvInteger(const ShapeContext &Ctx) {
  return inferConvolution(Ctx, 3, /*Integer=*/true);
}

// ONNX ConvTranspose: X [N, C, D1..Dn], W [C, M/group, k1..kn], B [M].
InferResult autopar::inferConvTranspose(const ShapeContext &Ctx) {
  if (Error E = checkConvOperands(Ctx))
    return E;
  Expected<unsigned> NumSpatial = getNumSpatial(Ctx);
  if (!NumSpatial)
    return NumSpatial.takeError();
  Expected<int64_t> Group = getGroup(Ctx);
  if (!Group)
    return Group.takeError();
  if (!mayEqual(dimOf(Ctx, 0, 1), dimOf(Ctx, 1, 0)))
    return Ctx.error("input channels differ: " + describe(Ctx, 0) + " and " +
                     describe(Ctx, 1));
  if (Error E = checkGroupDivides(Ctx, 1, 0, *Group))
    return E;
  Dim OutChannels = dimOf(Ctx, 1, 1) * Dim::get(*Group);
  if (Error E = checkBias(Ctx, OutChannels))
    return E;
  Expected<Window> W = getWindow(Ctx, *NumSpatial, /*Weights=*/1);
  if (!W)
    return W.takeError();
  auto OutputPadding =
      getSpatialList(Ctx, "output_padding", *NumSpatial, 1, 0, 0);
  if (!OutputPadding)
    return OutputPadding.takeError();
  for (unsigned I = 0; I != *NumSpatial; ++I)
    if ((*OutputPadding)[I] >= std::max(W->Strides[I], W->Dilations[I]))
      return Ctx.error("'output_padding' entries must be smaller than the "
                       "stride or the dilation of their axis, got " +
                       Twine((*OutputPadding)[I]) + " on spatial axis " +
                       Twine(I));
  std::optional<SmallVector<int64_t, 4>> OutputShape;
  if (Ctx.getAttr("output_shape")) {
    auto List = getSpatialList(Ctx, "output_shape", *NumSpatial, 1, 1, 1);
    if (!List)
      return List.takeError();
    OutputShape = std::move(*List);
  }
  SmallVector<Dim, 4> Shape = {dimOf(Ctx, 0, 0), OutChannels};
  for (unsigned I = 0; I != *NumSpatial; ++I) {
    if (OutputShape) {
      Shape.push_back(Dim::get((*OutputShape)[I]));
      continue;
    }
    Expected<Dim> Out = transposedOutput(Ctx, *W, I, (*OutputPadding)[I]);
    if (!Out)
      return Out.takeError();
    Shape.push_back(*Out);
  }
  return Types{TensorType(elementTypeOf(Ctx, 0), Shape)};
}

/// LpPool's and GlobalLpPool's p: a positive integer (2 when absent).
static Error checkLpPoolP(const ShapeContext &Ctx) {
  OpId Op = Ctx.getNode().getOp();
  if (Op != OpId::LpPool && Op != OpId::GlobalLpPool)
    return Error::success();
  int64_t P = Ctx.getIntAttr("p", 2);
  if (P < 1)
    return Ctx.error("'p' must be positive, got " + Twine(P));
  return Error::success();
}

// ONNX MaxPool, AveragePool and LpPool; MaxPool's optional Indices are i64
// of Y's shape.
InferResult autopar::inferPool(const ShapeContext &Ctx) {
  // MaxPool also takes 8-bit integers.
  bool IsMaxPool = Ctx.getNode().getOp() == OpId::MaxPool;
  ElementType Elem = elementTypeOf(Ctx, 0);
  if (!IsMaxPool) {
    if (Error E = checkFloat(Ctx, 0))
      return E;
  } else if (!isFloatType(Elem, /*AllowF64=*/true) && Elem != ElementType::I8 &&
             Elem != ElementType::U8) {
    return Ctx.error(describe(Ctx, 0) +
                     " must be f64, f32, f16, bf16, i8 or u8");
  }
  Expected<unsigned> NumSpatial = getNumSpatial(Ctx);
  if (!NumSpatial)
    return NumSpatial.takeError();
  for (StringRef Flag : {"ceil_mode", "count_include_pad", "storage_order"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  if (Error E = checkLpPoolP(Ctx))
    return E;
  Expected<Window> W = getWindow(Ctx, *NumSpatial, std::nullopt);
  if (!W)
    return W.takeError();
  bool CeilMode = Ctx.getIntAttr("ceil_mode", 0);
  SmallVector<Dim, 4> Shape = {dimOf(Ctx, 0, 0), dimOf(Ctx, 0, 1)};
  for (unsigned I = 0; I != *NumSpatial; ++I) {
    Expected<Dim> Out = slidingOutput(Ctx, *W, I, CeilMode);
    if (!Out)
      return Out.takeError();
    Shape.push_back(*Out);
  }
  Types Results = {TensorType(Elem, Shape)};
  if (Ctx.getNode().getNumResults() > 1)
    Results.push_back(TensorType(ElementType::I64, Shape));
  return Results;
}

// ONNX GlobalAveragePool and GlobalLpPool: [N, C, D1..Dn] -> [N, C, 1, ...,
// 1].
InferResult autopar::inferGlobalPool(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkLpPoolP(Ctx))
    return E;
  Expected<unsigned> NumSpatial = getNumSpatial(Ctx);
  if (!NumSpatial)
    return NumSpatial.takeError();
  SmallVector<Dim, 4> Shape = {dimOf(Ctx, 0, 0), dimOf(Ctx, 0, 1)};
  Shape.append(*NumSpatial, Dim::get(1));
  return Types{TensorType(elementTypeOf(Ctx, 0), Shape)};
}

// ONNX DeformConv (opset 19): X [N, C, D1..Dn], W [M, C/group, k1..kn],
// offset [N, offset_group * n * k1..kn, O1..On], B [M]?, mask?: Y [N, M,
// O1..On], the windows as Conv's (no auto_pad).
InferResult autopar::inferDeformConv(const ShapeContext &Ctx) {
  if (Error E = checkConvOperands(Ctx))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
    return E;
  if (Ctx.getOperandType(2).getRank() != Ctx.getOperandType(0).getRank())
    return Ctx.error(describe(Ctx, 2) + " must have the rank of " +
                     describe(Ctx, 0));
  return inferConvolution(Ctx, 3);
}

// ONNX Col2Im (opset 18): input [N, C * prod(block_shape), L] with constant
// image_shape and block_shape gives [N, C, image_shape...].
InferResult autopar::inferCol2Im(const ShapeContext &Ctx) {
  if (Error E = checkRank(Ctx, 0, 3))
    return E;
  std::optional<SmallVector<Dim, 4>> Image = Ctx.getShapeOperand(1);
  std::optional<SmallVector<Dim, 4>> Block = Ctx.getShapeOperand(2);
  if (Image && Block && Image->size() != Block->size())
    return Ctx.error("image_shape and block_shape differ in length");
  Dim Channels;
  if (Block) {
    Dim BlockSize = Dim::get(1);
    for (const Dim &B : *Block)
      BlockSize = BlockSize * B;
    if (std::optional<Dim> C = dimOf(Ctx, 0, 1).divide(BlockSize))
      Channels = *C;
    else if (dimOf(Ctx, 0, 1).isStatic() && BlockSize.isStatic())
      return Ctx.error(describe(Ctx, 0) + " has " + dimStr(dimOf(Ctx, 0, 1)) +
                       " columns per position, not a multiple of the block "
                       "size " +
                       dimStr(BlockSize));
  }
  SmallVector<Dim, 4> Shape = {dimOf(Ctx, 0, 0), Channels};
  if (Image)
    Shape.append(Image->begin(), Image->end());
  else if (Block)
    Shape.append(Block->size(), Dim());
  else
    return Ctx.error("image_shape must be a constant");
  return Types{TensorType(elementTypeOf(Ctx, 0), Shape)};
}
