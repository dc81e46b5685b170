//===- ImageImporters.cpp - Resize, Upsample and the Lp pools -------------===//
//
// Resize's forms (opsets 10, 11, 13, 18, 19) and the deprecated Upsample
// (7, 9) become the IR's Resize at opset 19's form; LpPool and GlobalLpPool
// keep their attributes, opset 1's float p made an integer.
//
// Resize-10 and Upsample map output index x to x / scale (asymmetric) and
// round like onnxruntime's opset-10 kernel ("simple": truncation, or ceil
// along an axis that shrinks); their linear mode is Resize's linear.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphImporter.h"
#include "frontend/OpImporters.h"

#include "onnx/onnx_pb.h"

#include <cmath>
#include <sstream>

using namespace autopar;
using namespace llvm;

/// Input I; when a small float initializer holds it (a parameter: only
/// integer and scalar initializers are constants), a Constant of its value,
/// so that the shape function reads Resize's scales.
static Value *getConstantInput(NodeImporter &N, unsigned I) {
  Value *V = N.getInput(I);
  if (!V || !V->isParam() || int(I) >= N.getProto().input_size())
    return V;
  if (std::optional<DenseTensor> Data =
          N.getImporter().getSmallInitializerData(N.getProto().input(I)))
    return N.createConstant(std::move(*Data));
  return V;
}

/// Input I, null when absent or statically empty (opset 11 writes an empty
/// roi, or empty scales next to sizes).
static Value *getNonEmptyInput(NodeImporter &N, unsigned I) {
  Value *V = N.getInput(I);
  if (!V || V->getType().getStaticNumElements() == std::optional<int64_t>(0))
    return nullptr;
  return getConstantInput(N, I);
}

/// A Resize of Operands (X, roi, scales, sizes), the trailing absent ones
/// left out.
static LogicalResult createResize(NodeImporter &N,
                                  SmallVector<Value *, 4> Operands,
                                  AttrDict Attrs) {
  while (!Operands.back())
    Operands.pop_back();
  return success(
      N.createNodeForOutputs(OpId::Resize, Operands, std::move(Attrs)));
}

/// Resize-10 and Upsample's attributes: mode (Upsample's "bilinear" is
/// linear) with the asymmetric transform and the "simple" rounding.
static std::optional<AttrDict> getOpset10Attrs(NodeImporter &N) {
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Resize, {"scales"});
  if (!Attrs)
    return std::nullopt;
  if (const Attribute *Mode = Attrs->get("mode")) {
    StringRef Name = Mode->getString();
    if (Name == "bilinear")
      Attrs->set("mode", Attribute::getString("linear"));
    else if (Name != "nearest" && Name != "linear") {
      N.error("'mode' must be nearest or linear, got '" + Name + "'");
      return std::nullopt;
    }
  }
  Attrs->set("coordinate_transformation_mode",
             Attribute::getString("asymmetric"));
  Attrs->set("nearest_mode", Attribute::getString("simple"));
  return Attrs;
}

LogicalResult autopar::importResize(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  if (N.getOpsetVersion() < 11) {
    if (!requireInputs(N, 2))
      return failure();
    std::optional<AttrDict> Attrs = getOpset10Attrs(N);
    if (!Attrs)
      return failure();
    return createResize(N, {N.getInput(0), nullptr, getConstantInput(N, 1)},
                        std::move(*Attrs));
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Resize);
  if (!Attrs)
    return failure();
  // roi matters to tf_crop_and_resize alone.
  const Attribute *Coord = Attrs->get("coordinate_transformation_mode");
  bool Crop = Coord && Coord->getString() == "tf_crop_and_resize";
  Value *Roi = Crop ? getNonEmptyInput(N, 1) : nullptr;
  Value *Scales = getNonEmptyInput(N, 2);
  Value *Sizes = N.getNumInputs() > 3 ? getNonEmptyInput(N, 3) : nullptr;
  return createResize(N, {N.getInput(0), Roi, Scales, Sizes},
                      std::move(*Attrs));
}

LogicalResult autopar::importUpsample(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  std::optional<AttrDict> Attrs = getOpset10Attrs(N);
  if (!Attrs)
    return failure();
  Value *Scales = nullptr;
  if (N.getOpsetVersion() >= 9) {
    if (!requireInputs(N, 2))
      return failure();
    Scales = getConstantInput(N, 1);
  } else {
    const onnx::AttributeProto *A = N.getAttr("scales");
    if (!A || A->floats_size() == 0) {
      N.error("attribute 'scales' is required below opset 9");
      return failure();
    }
    Scales = N.createConstant(DenseTensor(
        TensorType::get(ElementType::F32, {int64_t(A->floats_size())}),
        std::vector<double>(A->floats().begin(), A->floats().end())));
  }
  return createResize(N, {N.getInput(0), nullptr, Scales}, std::move(*Attrs));
}

template <OpId Op> LogicalResult autopar::importLpPool(NodeImporter &N) {
  const onnx::AttributeProto *P = N.getAttr("p");
  bool FloatP = P && P->type() == onnx::AttributeProto::FLOAT;
  std::optional<AttrDict> Attrs =
      FloatP ? N.convertAttrs(Op, {"p"}) : N.convertAttrs(Op);
  if (!Attrs)
    return failure();
  if (FloatP) {
    // Opset 1's p is a float; the kernels take whole powers (up to 2^20,
    // past which every |x|^p overflows or vanishes anyway).
    float V = P->f();
    if (V < 1 || V > 1 << 20 || V != std::floor(V)) {
      std::ostringstream Text;
      Text << V;
      N.error("'p' must be a positive whole number, got " + Text.str());
      return failure();
    }
    Attrs->set("p", Attribute::getInt(int64_t(V)));
  }
  return success(N.createNodeForOutputs(Op, getInputs(N), std::move(*Attrs)));
}

template LogicalResult autopar::importLpPool<OpId::LpPool>(NodeImporter &N);
template LogicalResult
autopar::importLpPool<OpId::GlobalLpPool>(NodeImporter &N);
