//===- QuantizedImporters.cpp - Quantized ONNX ops to IR ops --------------===//
//
// QuantizeLinear and DequantizeLinear take their output element type from
// an ONNX data type attribute; QLinearMatMul is its definition spelled in IR
// ops: the integer product of the codes minus their zero points (i32), the
// input scales applied, and the result quantized to the output's scale and
// zero point (ONNX's QLinearMatMul, opsets 10 and 21).
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

static SmallVector<Value *, 4> getInputs(NodeImporter &N) {
  SmallVector<Value *, 4> Inputs;
  for (unsigned I = 0, E = N.getNumInputs(); I != E; ++I)
    Inputs.push_back(N.getInput(I));
  return Inputs;
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

LogicalResult autopar::importQLinearMatMul(NodeImporter &N) {
  SmallVector<Value *, 8> In = getInputs(N);
  for (unsigned I = 0; I != 8; ++I)
    if (I >= In.size() || (!In[I] && I != 7)) {
      N.error("input #" + Twine(I) + " is required");
      return failure();
    }
  Value *A = In[0], *AScale = In[1], *AZero = In[2], *B = In[3],
        *BScale = In[4], *BZero = In[5], *YScale = In[6], *YZero = In[7];
  Node *Product = N.createNode(OpId::MatMulInteger, {A, B, AZero, BZero},
                               AttrDict(), {N.makeName("sums")});
  if (!Product)
    return failure();
  unsigned Rank = Product->getResult(0)->getType().getRank();
  ElementType Float = AScale->getType().getElementType();
  AttrDict CastAttrs;
  CastAttrs.set("to", Attribute::getString(getElementTypeName(Float)));
  Node *Sums = N.createNode(OpId::Cast, {Product->getResult(0)},
                            std::move(CastAttrs), {N.makeName("float_sums")});
  if (!Sums)
    return failure();
  // A's scale is per tensor or per row: [M] applies along rows as [M, 1].
  Value *RowScale = AScale;
  if (AScale->getType().getRank() == 1 && Rank >= 2) {
    Node *Column =
        N.createNode(OpId::Unsqueeze, {AScale, N.createI64Constant({-1})},
                     AttrDict(), {N.makeName("a_scale_rows")});
    if (!Column)
      return failure();
    RowScale = Column->getResult(0);
  }
  Node *ScaledA = N.createNode(OpId::Mul, {Sums->getResult(0), RowScale},
                               AttrDict(), {N.makeName("scaled_a")});
  if (!ScaledA)
    return failure();
  Node *Scaled = N.createNode(OpId::Mul, {ScaledA->getResult(0), BScale},
                              AttrDict(), {N.makeName("scaled")});
  if (!Scaled)
    return failure();
  // The output's scale is per tensor or per row.
  AttrDict QuantizeAttrs;
  if (YScale->getType().getRank() == 1 && Rank >= 2)
    QuantizeAttrs.set("axis", Attribute::getInt(int64_t(Rank) - 2));
  SmallVector<Value *, 3> QuantizeIn = {Scaled->getResult(0), YScale};
  if (YZero)
    QuantizeIn.push_back(YZero);
  return success(N.createNodeForOutputs(OpId::QuantizeLinear, QuantizeIn,
                                        std::move(QuantizeAttrs)));
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
  Node *R = N.createNode(OpId::Unsqueeze, {Scale, N.createI64Constant(Axes)},
                         AttrDict(), {N.makeName(Suffix)});
  return R ? R->getResult(0) : nullptr;
}

LogicalResult autopar::importQLinearConv(NodeImporter &N) {
  SmallVector<Value *, 8> In = getInputs(N);
  for (unsigned I = 0; I != 8; ++I)
    if (I >= In.size() || (!In[I] && I != 7)) {
      N.error("input #" + Twine(I) + " is required");
      return failure();
    }
  Value *X = In[0], *XScale = In[1], *XZero = In[2], *W = In[3],
        *WScale = In[4], *WZero = In[5], *YScale = In[6], *YZero = In[7];
  Value *Bias = In.size() > 8 ? In[8] : nullptr;
  std::optional<AttrDict> ConvAttrs = N.convertAttrs(OpId::ConvInteger);
  if (!ConvAttrs)
    return failure();
  Node *Conv = N.createNode(OpId::ConvInteger, {X, W, XZero, WZero},
                            std::move(*ConvAttrs), {N.makeName("sums")});
  if (!Conv)
    return failure();
  Value *Sums = Conv->getResult(0);
  unsigned Rank = Sums->getType().getRank();
  // The i32 bias is quantized with scale x_scale * w_scale and zero point
  // 0: it adds to the sums.
  if (Bias) {
    Value *B = perChannel(N, Bias, Rank, "bias_channels");
    Node *Add = B ? N.createNode(OpId::Add, {Sums, B}, AttrDict(),
                                 {N.makeName("biased_sums")})
                  : nullptr;
    if (!Add)
      return failure();
    Sums = Add->getResult(0);
  }
  AttrDict CastAttrs;
  CastAttrs.set("to", Attribute::getString(getElementTypeName(
                          XScale->getType().getElementType())));
  Node *Float = N.createNode(OpId::Cast, {Sums}, std::move(CastAttrs),
                             {N.makeName("float_sums")});
  Node *ScaledX = Float ? N.createNode(OpId::Mul, {Float->getResult(0), XScale},
                                       AttrDict(), {N.makeName("scaled_x")})
                        : nullptr;
  Value *WChannels =
      ScaledX ? perChannel(N, WScale, Rank, "w_scale_channels") : nullptr;
  Node *Scaled =
      WChannels ? N.createNode(OpId::Mul, {ScaledX->getResult(0), WChannels},
                               AttrDict(), {N.makeName("scaled")})
                : nullptr;
  if (!Scaled)
    return failure();
  SmallVector<Value *, 3> QuantizeIn = {Scaled->getResult(0), YScale};
  if (YZero)
    QuantizeIn.push_back(YZero);
  return success(
      N.createNodeForOutputs(OpId::QuantizeLinear, QuantizeIn, AttrDict()));
}
