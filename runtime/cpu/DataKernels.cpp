//===- DataKernels.cpp - Constant, ConstantOfShape, Cast, Shape, Size -----===//
//
// Constants are encoded as weights/TensorBytes.h lays tensors out. Cast
// goes between any two element types through f64 (floats) or i64
// (integers, bool): floats to integers truncate toward zero, NaN becomes 0
// and values beyond the target's range saturate; integers to narrower
// integers wrap; anything to bool is "not zero"; f8e4m3 saturates at 448
// unless `saturate` is 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"
#include "weights/TensorBytes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using namespace autopar;
using namespace llvm;

/// Fills Out with Bytes, which hold Out's elements.
static void copyBytes(const Tensor &Out, const std::vector<uint8_t> &Bytes) {
  if (!Bytes.empty())
    std::memcpy(Out.getData(), Bytes.data(), Bytes.size());
}

Error autopar::runConstant(const KernelArgs &A) {
  const Attribute *Value = A.attr("value");
  if (!Value || !Value->isa(Attribute::Kind::Tensor))
    return A.error("needs a tensor 'value'");
  const DenseTensor &Data = Value->getTensor();
  const TensorType &Ty = Data.getType();
  if (Error E = A.checkShape(0, Ty.getStaticSizes()))
    return E;
  if (Error E = A.checkResultType(0, {Ty.getElementType()}))
    return E;
  copyBytes(A.Out[0], encodeTensorBytes(Data));
  return Error::success();
}

Error autopar::runConstantOfShape(const KernelArgs &A) {
  Expected<Shape> Out = A.readInts(0);
  if (!Out)
    return Out.takeError();
  if (Error E = A.checkShape(0, *Out))
    return E;
  std::vector<uint8_t> Element(4, 0);
  ElementType Ty = ElementType::F32;
  if (const Attribute *Value = A.attr("value")) {
    const DenseTensor &Data = Value->getTensor();
    if (Data.size() != 1)
      return A.error("'value' must have one element");
    Ty = Data.getType().getElementType();
    Element = encodeTensorBytes(Data);
  }
  if (Error E = A.checkResultType(0, {Ty}))
    return E;
  char *Dst = A.Out[0].data<char>();
  for (int64_t I = 0, N = A.Out[0].getNumElements(); I != N; ++I)
    std::memcpy(Dst + I * Element.size(), Element.data(), Element.size());
  return Error::success();
}

namespace {

/// One element read for a cast: a float or an integer.
struct Scalar {
  bool IsFloat;
  double F;
  int64_t I;
};

} // namespace

static Scalar load(const Tensor &T, int64_t I) {
  const char *P = T.data<char>() + I * getElementSize(T.getElementType());
  switch (T.getElementType()) {
  case ElementType::F64: {
    double V;
    std::memcpy(&V, P, 8);
    return {true, V, 0};
  }
  case ElementType::F32: {
    float V;
    std::memcpy(&V, P, 4);
    return {true, V, 0};
  }
  case ElementType::F16:
  case ElementType::BF16: {
    uint16_t Bits;
    std::memcpy(&Bits, P, 2);
    return {true,
            T.getElementType() == ElementType::F16 ? halfToFloat(Bits)
                                                   : bfloat16ToFloat(Bits),
            0};
  }
  case ElementType::F8E4M3:
    return {true, decodeF8E4M3(uint8_t(*P)), 0};
  case ElementType::I64: {
    int64_t V;
    std::memcpy(&V, P, 8);
    return {false, 0, V};
  }
  case ElementType::I32: {
    int32_t V;
    std::memcpy(&V, P, 4);
    return {false, 0, V};
  }
  case ElementType::I8:
    return {false, 0, int8_t(*P)};
  case ElementType::U8:
  case ElementType::Bool:
    return {false, 0, uint8_t(*P)};
  }
  llvm_unreachable("unknown element type");
}

/// V truncated toward zero into [Lo, Hi]; NaN is 0.
static int64_t toInteger(double V, int64_t Lo, int64_t Hi) {
  if (std::isnan(V))
    return 0;
  if (V <= double(Lo))
    return Lo;
  if (V >= double(Hi))
    return Hi;
  return int64_t(V);
}

template <typename T> static void storeRaw(char *P, T V) {
  std::memcpy(P, &V, sizeof(T));
}

template <typename T> static void storeInteger(char *P, const Scalar &S) {
  T V = S.IsFloat ? T(toInteger(S.F, std::numeric_limits<T>::lowest(),
                                std::numeric_limits<T>::max()))
                  : T(S.I);
  storeRaw(P, V);
}

static void store(const Tensor &T, int64_t I, const Scalar &S, bool Saturate) {
  char *P = T.data<char>() + I * getElementSize(T.getElementType());
  double F = S.IsFloat ? S.F : double(S.I);
  switch (T.getElementType()) {
  case ElementType::F64:
    return storeRaw(P, F);
  case ElementType::F32:
    return storeRaw(P, S.IsFloat ? float(S.F) : float(S.I));
  case ElementType::F16:
    return storeRaw(P, floatToHalf(S.IsFloat ? float(S.F) : float(S.I)));
  case ElementType::BF16:
    return storeRaw(P, floatToBfloat16(S.IsFloat ? float(S.F) : float(S.I)));
  case ElementType::F8E4M3:
    if (Saturate && !std::isnan(F))
      F = std::max(-448.0, std::min(448.0, F));
    *P = char(encodeF8E4M3(F));
    return;
  case ElementType::I64:
    // 2^63 does not fit; the largest double below it does.
    return storeRaw(
        P, S.IsFloat ? toInteger(S.F, INT64_MIN, int64_t(9223372036854774784.0))
                     : S.I);
  case ElementType::I32:
    return storeInteger<int32_t>(P, S);
  case ElementType::I8:
    return storeInteger<int8_t>(P, S);
  case ElementType::U8:
    return storeInteger<uint8_t>(P, S);
  case ElementType::Bool:
    *P = char(S.IsFloat ? S.F != 0 : S.I != 0);
    return;
  }
}

Error autopar::runCast(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<ElementType> To = planCast(A);
  if (!To)
    return To.takeError();
  if (Error E = A.checkResultType(0, {*To}))
    return E;
  if (X.getElementType() == *To) {
    if (X.getSizeInBytes())
      std::memcpy(Y.getData(), X.getData(), X.getSizeInBytes());
    return Error::success();
  }
  bool Saturate = A.intAttr("saturate", 1);
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I)
    store(Y, I, load(X, I), Saturate);
  return Error::success();
}

Error autopar::runShape(const KernelArgs &A) {
  ArrayRef<int64_t> In = A.In[0].getShape();
  int64_t Rank = In.size();
  int64_t Start = A.intAttr("start", 0), End = A.intAttr("end", Rank);
  Start = std::clamp<int64_t>(Start < 0 ? Start + Rank : Start, 0, Rank);
  End = std::clamp<int64_t>(End < 0 ? End + Rank : End, 0, Rank);
  End = std::max(End, Start);
  if (Error E = A.checkShape(0, {End - Start}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::I64}))
    return E;
  std::copy(In.begin() + Start, In.begin() + End, A.Out[0].data<int64_t>());
  return Error::success();
}

Error autopar::runSize(const KernelArgs &A) {
  if (Error E = A.checkShape(0, {}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::I64}))
    return E;
  A.Out[0].data<int64_t>()[0] = A.In[0].getNumElements();
  return Error::success();
}
