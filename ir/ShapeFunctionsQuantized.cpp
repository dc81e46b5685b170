//===- ShapeFunctionsQuantized.cpp - Quantized codes and products ---------===//
//
// ONNX's QuantizeLinear, DequantizeLinear (opsets 10-23), DynamicQuantize-
// Linear and MatMulInteger, and ONNX Runtime's MatMulNBits and
// GatherBlockQuantized (com.microsoft). A scale is per tensor (a scalar or
// one element), per axis (1-D, the size of x's `axis`) or per block (x's
// rank, ceil(size / block_size) along `axis`, x's sizes elsewhere); a zero
// point has the scale's shape. Codes the IR has no type for (int4, int16)
// are refused where the importer converts the model's types.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

namespace {

bool isCodeType(ElementType Ty) {
  return Ty == ElementType::U8 || Ty == ElementType::I8 ||
         Ty == ElementType::F8E4M3;
}

/// Checks that operand Scale (and the zero point ZeroPoint, when given)
/// fits operand Data per tensor, per axis or per block.
Error checkScaleLayout(const ShapeContext &Ctx, unsigned Data, unsigned Scale,
                       unsigned ZeroPoint) {
  const TensorType &X = Ctx.getOperandType(Data);
  const TensorType &S = Ctx.getOperandType(Scale);
  int64_t Block = Ctx.getIntAttr("block_size", 0);
  if (Block < 0)
    return Ctx.error("'block_size' must be 0 or more, got " + Twine(Block));
  bool PerTensor = S.getRank() == 0 ||
                   (S.getRank() == 1 && isStaticOne(S.getDim(0)) && !Block);
  if (!PerTensor) {
    int64_t Axis = Ctx.getIntAttr("axis", 1);
    int64_t Rank = X.getRank();
    if (Axis < -Rank || Axis >= Rank)
      return Ctx.error("'axis' " + Twine(Axis) + " is out of range for " +
                       describe(Ctx, Data));
    unsigned A = unsigned(Axis < 0 ? Axis + Rank : Axis);
    if (!Block) {
      if (S.getRank() != 1 || !mayEqual(S.getDim(0), X.getDim(A)))
        return Ctx.error(describe(Ctx, Scale) +
                         " must be a scalar, or 1-D with the size of axis " +
                         Twine(A) + " of " + describe(Ctx, Data));
    } else {
      bool Fits = S.getRank() == X.getRank();
      for (unsigned I = 0; Fits && I != S.getRank(); ++I)
        Fits = mayEqual(S.getDim(I),
                        I == A ? ceilDivDim(X.getDim(I), Block) : X.getDim(I));
      if (!Fits)
        return Ctx.error(describe(Ctx, Scale) + " does not fit blocks of " +
                         Twine(Block) + " along axis " + Twine(A) + " of " +
                         describe(Ctx, Data));
    }
  }
  if (Ctx.hasOperand(ZeroPoint) &&
      Ctx.getOperandType(ZeroPoint).getShape() != S.getShape())
    return Ctx.error(describe(Ctx, ZeroPoint) + " must have the shape of " +
                     describe(Ctx, Scale));
  return Error::success();
}

/// `bits` (default 4) and `block_size` of the packed com.microsoft ops.
Error checkPacking(const ShapeContext &Ctx, int64_t DefaultBlock,
                   ArrayRef<int64_t> Bits, int64_t &BitsOut,
                   int64_t &BlockOut) {
  BitsOut = Ctx.getIntAttr("bits", 4);
  if (!is_contained(Bits, BitsOut))
    return Ctx.error("'bits' " + Twine(BitsOut) + " is not supported");
  BlockOut = Ctx.getIntAttr("block_size", DefaultBlock);
  if (BlockOut < 16 || (BlockOut & (BlockOut - 1)))
    return Ctx.error("'block_size' must be a power of 2 of at least 16, got " +
                     Twine(BlockOut));
  return Error::success();
}

} // namespace

InferResult autopar::inferQuantizeLinear(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkFloat(Ctx, 1))
    return E;
  if (Error E = checkFlag(Ctx, "saturate"))
    return E;
  if (Error E = checkScaleLayout(Ctx, 0, 1, 2))
    return E;
  std::optional<ElementType> Code;
  if (const Attribute *A = Ctx.getAttr("output_type")) {
    Code = parseElementTypeName(A->getString());
    if (!Code || !isCodeType(*Code))
      return Ctx.error("'output_type' must be u8, i8 or f8e4m3, got '" +
                       A->getString() + "'");
  }
  if (Ctx.hasOperand(2)) {
    ElementType ZeroPoint = elementTypeOf(Ctx, 2);
    if (!isCodeType(ZeroPoint))
      return Ctx.error(describe(Ctx, 2) + " must be u8, i8 or f8e4m3");
    if (Code && *Code != ZeroPoint)
      return Ctx.error("'output_type' " + getElementTypeName(*Code) +
                       " differs from " + describe(Ctx, 2));
    Code = ZeroPoint;
  }
  return Types{TensorType(Code.value_or(ElementType::U8),
                          Ctx.getOperandType(0).getShape())};
}

InferResult autopar::inferDequantizeLinear(const ShapeContext &Ctx) {
  ElementType X = elementTypeOf(Ctx, 0);
  if (!isCodeType(X) && X != ElementType::I32)
    return Ctx.error(describe(Ctx, 0) + " must be u8, i8, i32 or f8e4m3");
  if (Error E = checkFloat(Ctx, 1))
    return E;
  // ONNX says i32 codes (a quantized bias) have zero point 0; exporters
  // write it anyway, as an i32 0.
  if (Ctx.hasOperand(2))
    if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
      return E;
  if (Error E = checkScaleLayout(Ctx, 0, 1, 2))
    return E;
  return Types{
      TensorType(elementTypeOf(Ctx, 1), Ctx.getOperandType(0).getShape())};
}

InferResult autopar::inferDynamicQuantizeLinear(const ShapeContext &Ctx) {
  if (Error E = checkElementType(Ctx, 0, ElementType::F32))
    return E;
  return Types{
      TensorType(ElementType::U8, Ctx.getOperandType(0).getShape()),
      TensorType(ElementType::F32, {}),
      TensorType(ElementType::U8, {}),
  };
}

InferResult autopar::inferMatMulInteger(const ShapeContext &Ctx) {
  for (unsigned I : {0u, 1u}) {
    ElementType Ty = elementTypeOf(Ctx, I);
    if (Ty != ElementType::U8 && Ty != ElementType::I8)
      return Ctx.error(describe(Ctx, I) + " must be u8 or i8");
  }
  Expected<SmallVector<Dim, 4>> Shape = getMatMulResultShape(Ctx);
  if (!Shape)
    return Shape.takeError();
  // Zero points: per tensor, per row of A ([M], or A's rank with a last
  // dimension of 1), per column of B ([N], or B's rank, 1 before the last).
  for (unsigned I : {2u, 3u}) {
    if (!Ctx.hasOperand(I))
      continue;
    if (Error E = checkSameElementTypeAs(Ctx, I, I - 2))
      return E;
    const TensorType &Z = Ctx.getOperandType(I), &M = Ctx.getOperandType(I - 2);
    if (Z.getRank() == 0 || (Z.getRank() == 1 && isStaticOne(Z.getDim(0))))
      continue;
    // A's zero points run along its rows (dimension R - 2), with 1 for the
    // columns; B's along its columns, with 1 for the rows.
    bool A = I == 2;
    unsigned R = M.getRank(), Along = A ? R - 2 : R - 1,
             One = A ? R - 1 : R - 2;
    bool Fits = R >= 2 && (Z.getRank() == 1 || Z.getRank() == R);
    if (Fits && Z.getRank() == 1)
      Fits = mayEqual(Z.getDim(0), M.getDim(Along));
    for (unsigned D = 0; Fits && Z.getRank() == R && D != R; ++D)
      Fits = D == One ? isStaticOne(Z.getDim(D))
                      : mayEqual(Z.getDim(D), M.getDim(D));
    if (!Fits)
      return Ctx.error(describe(Ctx, I) + " must be a scalar or one per " +
                       (A ? "row of " : "column of ") + describe(Ctx, I - 2));
  }
  return Types{TensorType(ElementType::I32, *Shape)};
}

InferResult autopar::inferMatMulNBits(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0, /*AllowF64=*/false))
    return E;
  int64_t Bits = 0, Block = 0;
  if (Error E = checkPacking(Ctx, 0, {2, 3, 4, 5, 6, 7, 8}, Bits, Block))
    return E;
  int64_t K = Ctx.getIntAttr("K", 0), N = Ctx.getIntAttr("N", 0);
  if (K <= 0 || N <= 0)
    return Ctx.error("'K' and 'N' must be positive, got " + Twine(K) + " and " +
                     Twine(N));
  const TensorType &A = Ctx.getOperandType(0);
  if (A.getRank() < 1 || !mayEqual(A.getDim(A.getRank() - 1), Dim::get(K)))
    return Ctx.error(describe(Ctx, 0) + " must end in 'K' " + Twine(K));
  int64_t KBlocks = (K + Block - 1) / Block;
  int64_t Blob = Block * Bits / 8;
  if (Error E = checkElementType(Ctx, 1, ElementType::U8))
    return E;
  const TensorType &B = Ctx.getOperandType(1);
  if (B.getShape() !=
      ArrayRef<Dim>{Dim::get(N), Dim::get(KBlocks), Dim::get(Blob)})
    return Ctx.error(describe(Ctx, 1) + " must be [" + Twine(N) + ", " +
                     Twine(KBlocks) + ", " + Twine(Blob) + "] (N, " +
                     "k_blocks, block_size * bits / 8)");
  // Scales, and float zero points: [N * k_blocks] or [N, k_blocks]; packed
  // u8 zero points: [N * ceil(k_blocks * bits / 8)] or [N, ...].
  auto Fits = [&](const TensorType &T, int64_t PerRow) {
    return T.getShape() == ArrayRef<Dim>{Dim::get(N * PerRow)} ||
           T.getShape() == ArrayRef<Dim>{Dim::get(N), Dim::get(PerRow)};
  };
  if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
    return E;
  if (!Fits(Ctx.getOperandType(2), KBlocks))
    return Ctx.error(describe(Ctx, 2) + " must be [" + Twine(N * KBlocks) +
                     "] or [" + Twine(N) + ", " + Twine(KBlocks) + "]");
  if (Ctx.hasOperand(3)) {
    bool Packed = elementTypeOf(Ctx, 3) == ElementType::U8;
    if (!Packed)
      if (Error E = checkSameElementTypeAs(Ctx, 3, 0))
        return E;
    int64_t PerRow = Packed ? (KBlocks * Bits + 7) / 8 : KBlocks;
    if (!Fits(Ctx.getOperandType(3), PerRow))
      return Ctx.error(describe(Ctx, 3) + " must be [" + Twine(N * PerRow) +
                       "] or [" + Twine(N) + ", " + Twine(PerRow) + "]");
  }
  if (Ctx.hasOperand(4))
    return Ctx.error("g_idx (act-order quantization) is not supported");
  if (Ctx.hasOperand(5)) {
    if (Error E = checkSameElementTypeAs(Ctx, 5, 0))
      return E;
    if (Ctx.getOperandType(5).getShape() != ArrayRef<Dim>{Dim::get(N)})
      return Ctx.error(describe(Ctx, 5) + " must be [" + Twine(N) + "]");
  }
  SmallVector<Dim, 4> Y(A.getShape().begin(), A.getShape().end());
  Y.back() = Dim::get(N);
  return Types{TensorType(A.getElementType(), Y)};
}

InferResult autopar::inferGatherBlockQuantized(const ShapeContext &Ctx) {
  if (Error E = checkElementType(Ctx, 0, ElementType::U8))
    return E;
  if (Error E = checkIndexType(Ctx, 1))
    return E;
  if (Error E = checkFloat(Ctx, 2, /*AllowF64=*/false))
    return E;
  int64_t Bits = 0, Block = 0;
  if (Error E = checkPacking(Ctx, 128, {4, 8}, Bits, Block))
    return E;
  const TensorType &Data = Ctx.getOperandType(0);
  int64_t Rank = Data.getRank();
  int64_t Gather = Ctx.getIntAttr("gather_axis", 0),
          Quantize = Ctx.getIntAttr("quantize_axis", 1);
  if (Gather < -Rank || Gather >= Rank || Quantize < -Rank || Quantize >= Rank)
    return Ctx.error("'gather_axis' " + Twine(Gather) + " or 'quantize_axis' " +
                     Twine(Quantize) + " is out of range for " +
                     describe(Ctx, 0));
  unsigned G = unsigned(Gather < 0 ? Gather + Rank : Gather),
           Q = unsigned(Quantize < 0 ? Quantize + Rank : Quantize);
  if (Bits < 8 && Q != Rank - 1)
    return Ctx.error("packed codes ('bits' " + Twine(Bits) +
                     ") must be quantized along the last axis of " +
                     describe(Ctx, 0));
  if (G == Q)
    return Ctx.error("'gather_axis' and 'quantize_axis' must differ");
  // The codes unpacked: the quantized axis holds 8 / bits per byte.
  SmallVector<Dim, 4> Unpacked(Data.getShape().begin(), Data.getShape().end());
  Unpacked[Q] = Unpacked[Q] * Dim::get(8 / Bits);
  const TensorType &S = Ctx.getOperandType(2);
  bool Fits = S.getRank() == Data.getRank();
  for (unsigned I = 0; Fits && I != S.getRank(); ++I)
    Fits = mayEqual(S.getDim(I),
                    I == Q ? ceilDivDim(Unpacked[I], Block) : Unpacked[I]);
  if (!Fits)
    return Ctx.error(describe(Ctx, 2) + " does not fit blocks of " +
                     Twine(Block) + " along axis " + Twine(Q) + " of " +
                     describe(Ctx, 0) + " unpacked");
  if (Ctx.hasOperand(3)) {
    if (Error E = checkElementType(Ctx, 3, ElementType::U8))
      return E;
    SmallVector<Dim, 4> Expect(S.getShape().begin(), S.getShape().end());
    Expect[Q] = ceilDivDim(Expect[Q] * Dim::get(Bits), 8);
    if (Ctx.getOperandType(3).getShape() != ArrayRef<Dim>(Expect))
      return Ctx.error(describe(Ctx, 3) + " must hold one code per scale, " +
                       "packed as the data");
  }
  SmallVector<Dim, 4> Y(Unpacked.begin(), Unpacked.begin() + G);
  append_range(Y, Ctx.getOperandType(1).getShape());
  Y.append(Unpacked.begin() + G + 1, Unpacked.end());
  return Types{TensorType(elementTypeOf(Ctx, 2), Y)};
}
