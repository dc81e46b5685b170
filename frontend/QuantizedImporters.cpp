//===- QuantizedImporters.cpp - Quantized ONNX ops to IR ops --------------===//
//
// QuantizeLinear and DequantizeLinear take their output element type from
// an ONNX data type attribute; QLinearMatMul and QLinearConv are their
// definitions spelled in IR ops: the integer product of the codes minus
// their zero points (i32), the input scales applied, and the result
// quantized to the output's scale and zero point (ONNX's opsets 10 and 21).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxTypes.h"
#include "frontend/OpImporters.h"

#include "onnx/onnx_pb.h"

using namespace autopar;
using namespace llvm;

/// The element type an ONNX data-type attribute names; nullopt (nothing
/// reported) when the attribute is absent or 0 (unset), and an error when
/// the IR has no such type.
static Expected<std::optional<ElementType>> getDataTypeAttr(NodeImporter &N,
                                                            StringRef Name) {
  std::optional<int64_t> DataType = N.getIntAttr(Name);
  if (!DataType || *DataType == 0)
    return std::nullopt;
  std::optional<ElementType> Ty = getElementTypeFromOnnx(int32_t(*DataType));
  if (!Ty)
    return createStringError(inconvertibleErrorCode(),
                             "'" + Name + "' " +
                                 getOnnxDataTypeName(int32_t(*DataType)) +
                                 " is not supported");
  return Ty;
}

LogicalResult autopar::importQuantizeLinear(NodeImporter &N) {
  Expected<std::optional<ElementType>> Out = getDataTypeAttr(N, "output_dtype");
  if (!Out) {
    N.error(toString(Out.takeError()));
    return failure();
  }
  std::optional<AttrDict> Attrs =
      N.convertAttrs(OpId::QuantizeLinear, {"output_dtype"});
  if (!Attrs)
    return failure();
  if (*Out)
    Attrs->set("output_type", Attribute::getString(getElementTypeName(**Out)));
  return success(N.createNodeForOutputs(OpId::QuantizeLinear, getInputs(N),
                                        std::move(*Attrs)));
}

LogicalResult autopar::importDequantizeLinear(NodeImporter &N) {
  Expected<std::optional<ElementType>> Out = getDataTypeAttr(N, "output_dtype");
  if (!Out) {
    N.error(toString(Out.takeError()));
    return failure();
  }
  Value *Scale = N.getInput(1);
  if (*Out && Scale && Scale->getType().getElementType() != **Out) {
    N.error("'output_dtype' " + getElementTypeName(**Out) +
            " differs from the scale's type " + Scale->getType().str() +
            "; autopar dequantizes to the scale's type");
    return failure();
  }
  std::optional<AttrDict> Attrs =
      N.convertAttrs(OpId::DequantizeLinear, {"output_dtype"});
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(OpId::DequantizeLinear, getInputs(N),
                                        std::move(*Attrs)));
}

/// The eight inputs of QLinearMatMul and QLinearConv: the last (the
/// output's zero point) may be given empty, the others are required.
static bool requireQLinearInputs(NodeImporter &N) {
  if (!requireInputs(N, 7))
    return false;
  if (N.getNumInputs() < 8) {
    N.error("input #7 is required");
    return false;
  }
  return true;
}

/// Sums (i32) as Float, times Scale and then ScaleB; null when reported.
static Value *dequantizeSums(NodeImporter &N, Value *Sums, ElementType Float,
                             Value *Scale, Value *ScaleB) {
  AttrDict CastAttrs;
  CastAttrs.set("to", Attribute::getString(getElementTypeName(Float)));
  Value *F =
      createValue(N, OpId::Cast, {Sums}, "float_sums", std::move(CastAttrs));
  Value *ScaledA =
      F ? createValue(N, OpId::Mul, {F, Scale}, "scaled_a") : nullptr;
  return ScaledA ? createValue(N, OpId::Mul, {ScaledA, ScaleB}, "scaled")
                 : nullptr;
}

/// QuantizeLinear of X to the output's scale and zero point (input 7, when
/// given) with Attrs, bound to the node's output.
static LogicalResult requantize(NodeImporter &N, Value *X, Value *YScale,
                                AttrDict Attrs) {
  SmallVector<Value *, 3> In = {X, YScale};
  if (Value *YZero = N.getInput(7))
    In.push_back(YZero);
  return success(
      N.createNodeForOutputs(OpId::QuantizeLinear, In, std::move(Attrs)));
}

LogicalResult autopar::importQLinearMatMul(NodeImporter &N) {
  if (!requireQLinearInputs(N))
    return failure();
  Value *A = N.getInput(0), *AScale = N.getInput(1), *AZero = N.getInput(2),
        *B = N.getInput(3), *BScale = N.getInput(4), *BZero = N.getInput(5),
        *YScale = N.getInput(6);
  Value *Sums =
      createValue(N, OpId::MatMulInteger, {A, B, AZero, BZero}, "sums");
  if (!Sums)
    return failure();
  unsigned Rank = Sums->getType().getRank();
  // A's scale is per tensor or per row: [M] applies along rows as [M, 1].
  Value *RowScale = AScale;
  if (AScale->getType().getRank() == 1 && Rank >= 2)
    RowScale = createValue(N, OpId::Unsqueeze,
                           {AScale, N.createI64Constant({-1})}, "a_scale_rows");
  Value *Scaled =
      RowScale ? dequantizeSums(N, Sums, AScale->getType().getElementType(),
                                RowScale, BScale)
               : nullptr;
  if (!Scaled)
    return failure();
  // The output's scale is per tensor or per row.
  AttrDict QuantizeAttrs;
  if (YScale->getType().getRank() == 1 && Rank >= 2)
    QuantizeAttrs.set("axis", Attribute::getInt(int64_t(Rank) - 2));
  return requantize(N, Scaled, YScale, std::move(QuantizeAttrs));
}

/// Scale (a scalar or one per channel, [C]) shaped to broadcast over the
/// channels of a [N, C, spatial...] tensor of rank Rank: [C, 1, ...].
static Value *perChannel(NodeImporter &N, Value *Scale, unsigned Rank,
                         StringRef Suffix) {
  if (Scale->getType().getRank() != 1 || Rank < 3)
    return Scale;
  // [C] -> [C, 1, ..., 1]: one trailing axis per spatial dimension.
  std::vector<int64_t> Axes;
  for (unsigned I = 1; I + 1 < Rank; ++I)
    Axes.push_back(I);
  return createValue(N, OpId::Unsqueeze, {Scale, N.createI64Constant(Axes)},
                     Suffix);
}

LogicalResult autopar::importQLinearConv(NodeImporter &N) {
  if (!requireQLinearInputs(N))
    return failure();
  Value *X = N.getInput(0), *XScale = N.getInput(1), *XZero = N.getInput(2),
        *W = N.getInput(3), *WScale = N.getInput(4), *WZero = N.getInput(5),
        *YScale = N.getInput(6), *Bias = N.getInput(8);
  std::optional<AttrDict> ConvAttrs = N.convertAttrs(OpId::ConvInteger);
  if (!ConvAttrs)
    return failure();
  Value *Sums = createValue(N, OpId::ConvInteger, {X, W, XZero, WZero}, "sums",
                            std::move(*ConvAttrs));
  if (!Sums)
    return failure();
  unsigned Rank = Sums->getType().getRank();
  // The i32 bias is quantized with scale x_scale * w_scale and zero point
  // 0: it adds to the sums.
  if (Bias) {
    Value *B = perChannel(N, Bias, Rank, "bias_channels");
    Sums = B ? createValue(N, OpId::Add, {Sums, B}, "biased_sums") : nullptr;
  }
  Value *WChannels =
      Sums ? perChannel(N, WScale, Rank, "w_scale_channels") : nullptr;
  Value *Scaled =
      WChannels ? dequantizeSums(N, Sums, XScale->getType().getElementType(),
                                 XScale, WChannels)
                : nullptr;
  if (!Scaled)
    return failure();
  return requantize(N, Scaled, YScale, AttrDict());
}
