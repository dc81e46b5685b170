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
