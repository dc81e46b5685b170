//===- ElementwiseKernels.cpp - Broadcasting binary ops, Sum, Where -------===//
//
// numpy broadcasting over row-major tensors. Arithmetic takes f32, i64 and
// i32 (integers wrap around like two's complement hardware; integer Div
// truncates toward zero and a zero divisor is an error), comparisons also
// bool, And/Or/Xor bool only. Pow raises an f32 base to an f32 or integer
// exponent. Mod with fmod = 1 is C's fmod (the dividend's sign), with fmod
// = 0 (integers only) the remainder has the divisor's sign; PRelu is
// x < 0 ? slope * x : x. Sum, Mean, Min and Max combine any number of
// operands (Min and Max propagate NaN, as numpy's minimum and maximum do).
// Where and Trilu (which zeroes one triangle of the last two dimensions)
// select elements of any type. The bitwise ops are BitwiseKernels.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Broadcast.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

using namespace autopar;
using namespace llvm;

/// Integer division truncating toward zero; false for a zero divisor.
template <typename T> static bool divide(T P, T Q, T &R) {
  if (Q == 0)
    return false;
  R = Q == -1 ? wrapSub<T>(0, P) : P / Q;
  return true;
}

/// ONNX Mod of integers: the truncated remainder (fmod = 1, C's %) or the
/// remainder with the divisor's sign (fmod = 0, Python's %); false for a
/// zero divisor.
template <typename T> static bool modulo(T P, T Q, bool CRemainder, T &R) {
  if (Q == 0)
    return false;
  if (Q == -1) { // INT_MIN % -1 overflows in C++.
    R = 0;
    return true;
  }
  R = P % Q;
  if (!CRemainder && R != 0 && (R < 0) != (Q < 0))
    R += Q;
  return true;
}

template <typename T> static Error runArithmetic(const KernelArgs &A, OpId Op) {
  const Tensor &X = A.In[0], &Y = A.In[1], &Z = A.Out[0];
  ElementFn Fn = getOpFacts(Op).Element;
  constexpr bool Int = std::is_integral_v<T>;
  if (Fn == ElementFn::Add) {
    if constexpr (Int)
      broadcastBinary<T, T>(X, Y, Z, wrapAdd<T>);
    else
      broadcastBinaryOnThreads<T, T>(X, Y, Z, [](T P, T Q) { return P + Q; });
  } else if (Fn == ElementFn::Sub) {
    if constexpr (Int)
      broadcastBinary<T, T>(X, Y, Z, wrapSub<T>);
    else
      broadcastBinaryOnThreads<T, T>(X, Y, Z, [](T P, T Q) { return P - Q; });
  } else if (Fn == ElementFn::Mul) {
    if constexpr (Int)
      broadcastBinary<T, T>(X, Y, Z, wrapMul<T>);
    else
      broadcastBinaryOnThreads<T, T>(X, Y, Z, [](T P, T Q) { return P * Q; });
  } else if (Fn == ElementFn::PRelu) {
    broadcastBinary<T, T>(X, Y, Z, [](T P, T Slope) {
      if constexpr (Int)
        return P < 0 ? wrapMul<T>(Slope, P) : P;
      else
        return P < 0 ? Slope * P : P;
    });
  } else if (Fn == ElementFn::Div) {
    if constexpr (Int) {
      bool ByZero = false;
      broadcastBinary<T, T>(X, Y, Z, [&](T P, T Q) {
        T R = 0;
        ByZero |= !divide(P, Q, R);
        return R;
      });
      if (ByZero)
        return A.error("integer division by zero");
    } else {
      broadcastBinaryOnThreads<T, T>(X, Y, Z, [](T P, T Q) { return P / Q; });
    }
  } else if (Fn == ElementFn::Mod) {
    bool CRemainder = A.intAttr("fmod", 0) == 1;
    if constexpr (Int) {
      bool ByZero = false;
      broadcastBinary<T, T>(X, Y, Z, [&](T P, T Q) {
        T R = 0;
        ByZero |= !modulo(P, Q, CRemainder, R);
        return R;
      });
      if (ByZero)
        return A.error("integer Mod by zero (a divisor is 0)");
    } else {
      if (!CRemainder)
        return A.error("'fmod' must be 1 for floating-point operands");
      broadcastBinary<T, T>(X, Y, Z,
                            [](T P, T Q) { return T(std::fmod(P, Q)); });
    }
  } else {
    return A.error("no CPU kernel for this arithmetic function");
  }
  return Error::success();
}

template <typename T> static void runComparison(const KernelArgs &A, OpId Op) {
  const Tensor &X = A.In[0], &Y = A.In[1], &Z = A.Out[0];
  if (Op == OpId::Equal)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P == Q; });
  else if (Op == OpId::Less)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P < Q; });
  else if (Op == OpId::LessOrEqual)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P <= Q; });
  else if (Op == OpId::GreaterOrEqual)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P >= Q; });
  else
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P > Q; });
}

static Error runPow(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(
          1, {ElementType::F32, ElementType::I64, ElementType::I32}))
    return E;
  const Tensor &Y = A.In[1];
  if (Y.getElementType() == ElementType::F32) {
    broadcastBinary<float, float>(A.In[0], Y, A.Out[0], [](float P, float Q) {
      return Q == 2.0f ? P * P : std::pow(P, Q);
    });
    return Error::success();
  }
  std::vector<float> Exponent(Y.getNumElements());
  for (size_t I = 0; I != Exponent.size(); ++I)
    Exponent[I] = Y.getElementType() == ElementType::I64
                      ? float(Y.data<int64_t>()[I])
                      : float(Y.data<int32_t>()[I]);
  Tensor YF(ElementType::F32, Y.getShape(), Exponent.data());
  broadcastBinary<float, float>(A.In[0], YF, A.Out[0], [](float P, float Q) {
    return Q == 2.0f ? P * P : std::pow(P, Q);
  });
  return Error::success();
}

static bool isComparison(OpId Op) {
  return Op == OpId::Equal || Op == OpId::Less || Op == OpId::Greater ||
         Op == OpId::LessOrEqual || Op == OpId::GreaterOrEqual;
}

Error autopar::runBinary(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.In[1];
  Expected<Shape> Out = planBinaryBroadcast(A);
  if (!Out)
    return Out.takeError();
  OpId Op = A.N.getOp();
  if (Op == OpId::Pow) {
    if (Error E = A.checkResultType(0, {ElementType::F32}))
      return E;
    return runPow(A);
  }
  if (X.getElementType() != Y.getElementType())
    return A.error("operands " + X.getTypeString() + " and " +
                   Y.getTypeString() + " have different element types");
  ElementType Ty = X.getElementType();
  if (Op == OpId::BitwiseAnd || Op == OpId::BitwiseOr ||
      Op == OpId::BitwiseXor || Op == OpId::BitShift)
    return runBitwise(A);
  if (Op == OpId::And || Op == OpId::Or || Op == OpId::Xor) {
    if (Error E = A.checkType(0, {ElementType::Bool}))
      return E;
    if (Error E = A.checkResultType(0, {ElementType::Bool}))
      return E;
    if (Op == OpId::And)
      broadcastBinary<uint8_t, uint8_t>(
          X, Y, A.Out[0], [](uint8_t P, uint8_t Q) { return P && Q; });
    else if (Op == OpId::Or)
      broadcastBinary<uint8_t, uint8_t>(
          X, Y, A.Out[0], [](uint8_t P, uint8_t Q) { return P || Q; });
    else
      broadcastBinary<uint8_t, uint8_t>(
          X, Y, A.Out[0], [](uint8_t P, uint8_t Q) { return !P != !Q; });
    return Error::success();
  }
  if (isComparison(Op)) {
    if (Error E = A.checkType(0, {ElementType::F32, ElementType::I64,
                                  ElementType::I32, ElementType::Bool}))
      return E;
    if (Error E = A.checkResultType(0, {ElementType::Bool}))
      return E;
    if (Ty == ElementType::F32)
      runComparison<float>(A, Op);
    else if (Ty == ElementType::I64)
      runComparison<int64_t>(A, Op);
    else if (Ty == ElementType::I32)
      runComparison<int32_t>(A, Op);
    else
      runComparison<uint8_t>(A, Op);
    return Error::success();
  }
  if (Error E = A.checkType(
          0, {ElementType::F32, ElementType::I64, ElementType::I32}))
    return E;
  if (Error E = A.checkResultType(0, {Ty}))
    return E;
  if (Ty == ElementType::F32)
    return runArithmetic<float>(A, Op);
  if (Ty == ElementType::I64)
    return runArithmetic<int64_t>(A, Op);
  return runArithmetic<int32_t>(A, Op);
}

/// Min and Max of two elements; NaN wins (numpy's minimum and maximum).
template <typename T> static T extremum(bool Max, T P, T Q) {
  if constexpr (!std::is_integral_v<T>)
    if (std::isnan(P) || std::isnan(Q))
      return std::isnan(P) ? P : Q;
  return Max ? std::max(P, Q) : std::min(P, Q);
}

/// Sum, Mean, Min or Max of every operand broadcast to the result.
template <typename T> static void combineOperands(const KernelArgs &A) {
  const Tensor &Z = A.Out[0];
  OpId Op = A.N.getOp();
  T *ZD = Z.data<T>();
  int64_t N = Z.getNumElements();
  for (size_t K = 0; K != A.In.size(); ++K) {
    const Tensor &X = A.In[K];
    const T *XD = X.data<T>();
    StridedWalk Walk(Z.getShape(),
                     {getBroadcastStrides(X.getShape(), Z.getShape())});
    for (int64_t I = 0; I != N; ++I, Walk.next()) {
      T V = XD[Walk.offset(0)];
      if (K == 0)
        ZD[I] = V;
      else if (Op == OpId::Min || Op == OpId::Max)
        ZD[I] = extremum(Op == OpId::Max, ZD[I], V);
      else if constexpr (std::is_integral_v<T>)
        ZD[I] = wrapAdd(ZD[I], V);
      else
        ZD[I] += V;
    }
  }
  if constexpr (!std::is_integral_v<T>)
    if (Op == OpId::Mean)
      for (int64_t I = 0; I != N; ++I)
        ZD[I] /= T(A.In.size());
}

Error autopar::runSum(const KernelArgs &A) {
  for (const Tensor &X : A.In)
    if (X.getElementType() != A.In[0].getElementType())
      return A.error("operands have different element types");
  if (Expected<Shape> Out = planBroadcast(A); !Out)
    return Out.takeError();
  OpId Op = A.N.getOp();
  if (Op == OpId::Mean) {
    if (Error E = A.checkType(0, {ElementType::F32}))
      return E;
  } else if (Op == OpId::Sum) {
    if (Error E = A.checkType(0, {ElementType::F32, ElementType::I64}))
      return E;
  } else if (Error E = A.checkType(
                 0, {ElementType::F32, ElementType::I64, ElementType::I32})) {
    return E;
  }
  if (Error E = A.checkResultType(0, {A.In[0].getElementType()}))
    return E;
  switch (A.In[0].getElementType()) {
  case ElementType::F32:
    combineOperands<float>(A);
    break;
  case ElementType::I64:
    combineOperands<int64_t>(A);
    break;
  default:
    combineOperands<int32_t>(A);
    break;
  }
  return Error::success();
}

Error autopar::runWhere(const KernelArgs &A) {
  const Tensor &C = A.In[0], &X = A.In[1], &Y = A.In[2], &Z = A.Out[0];
  if (Error E = A.checkType(0, {ElementType::Bool}))
    return E;
  if (Error E = checkWhereTypes(A))
    return E;
  Expected<Shape> Out = planBroadcast(A);
  if (!Out)
    return Out.takeError();
  size_t Size = getElementSize(Z.getElementType());
  const uint8_t *CD = C.data<uint8_t>();
  const char *XD = X.data<char>(), *YD = Y.data<char>();
  char *ZD = Z.data<char>();
  StridedWalk Walk(*Out, {getBroadcastStrides(C.getShape(), *Out),
                          getBroadcastStrides(X.getShape(), *Out),
                          getBroadcastStrides(Y.getShape(), *Out)});
  for (int64_t I = 0, N = Z.getNumElements(); I != N; ++I, Walk.next()) {
    const char *Src = CD[Walk.offset(0)] ? XD + Walk.offset(1) * Size
                                         : YD + Walk.offset(2) * Size;
    std::memcpy(ZD + I * Size, Src, Size);
  }
  return Error::success();
}

Error autopar::runTrilu(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (X.getRank() < 2)
    return A.error("'input' must have rank 2 or more");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  int64_t K = 0;
  if (A.has(1)) {
    Expected<Shape> Given = A.readInts(1);
    if (!Given)
      return Given.takeError();
    if (Given->size() != 1)
      return A.error("'k' must have one element");
    K = Given->front();
  }
  bool Upper = A.intAttr("upper", 1);
  int64_t Rows = X.getDim(X.getRank() - 2), Cols = X.getDim(X.getRank() - 1);
  size_t Size = getElementSize(X.getElementType());
  const char *In = X.data<char>();
  char *Out = Y.data<char>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I) {
    int64_t Row = I / Cols % Rows, Col = I % Cols;
    // Col - Row cannot overflow: both lie within a tensor's dimensions.
    bool Keep = Upper ? Col - Row >= K : Col - Row <= K;
    if (Keep)
      std::memcpy(Out + I * Size, In + I * Size, Size);
    else
      std::memset(Out + I * Size, 0, Size);
  }
  return Error::success();
}
