//===- ElementwiseKernels.cpp - Broadcasting binary ops, Sum, Where -------===//
//
// numpy broadcasting over row-major tensors. Arithmetic takes f32, i64 and
// i32 (integers wrap around like two's complement hardware; integer Div
// truncates toward zero and a zero divisor is an error), comparisons also
// bool, And/Or bool only. Pow raises an f32 base to an f32 or integer
// exponent. Where and Trilu (which zeroes one triangle of the last two
// dimensions) select elements of any type.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
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

/// Z[i] = Fn(X[i'], Y[i'']) over Z's shape with X and Y broadcast to it.
template <typename T, typename R, typename FnTy>
static void broadcastBinary(const Tensor &X, const Tensor &Y, const Tensor &Z,
                            FnTy Fn) {
  ArrayRef<int64_t> Out = Z.getShape();
  const T *XD = X.data<T>();
  const T *YD = Y.data<T>();
  R *ZD = Z.data<R>();
  int64_t N = Z.getNumElements();
  if (X.getShape() == Out && Y.getShape() == Out) {
    for (int64_t I = 0; I != N; ++I)
      ZD[I] = Fn(XD[I], YD[I]);
    return;
  }
  if (X.getShape() == Out && Y.getNumElements() == 1) {
    for (int64_t I = 0; I != N; ++I)
      ZD[I] = Fn(XD[I], YD[0]);
    return;
  }
  StridedWalk Walk(Out, {getBroadcastStrides(X.getShape(), Out),
                         getBroadcastStrides(Y.getShape(), Out)});
  for (int64_t I = 0; I != N; ++I, Walk.next())
    ZD[I] = Fn(XD[Walk.offset(0)], YD[Walk.offset(1)]);
}

template <typename T> static T wrapAdd(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) + U(B));
}
template <typename T> static T wrapSub(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) - U(B));
}
template <typename T> static T wrapMul(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) * U(B));
}

template <typename T> static Error runArithmetic(const KernelArgs &A, OpId Op) {
  const Tensor &X = A.In[0], &Y = A.In[1], &Z = A.Out[0];
  ElementFn Fn = getOpFacts(Op).Element;
  switch (Fn) {
  case ElementFn::Add:
    if constexpr (std::is_integral_v<T>)
      broadcastBinary<T, T>(X, Y, Z, wrapAdd<T>);
    else
      broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return P + Q; });
    return Error::success();
  case ElementFn::Sub:
    if constexpr (std::is_integral_v<T>)
      broadcastBinary<T, T>(X, Y, Z, wrapSub<T>);
    else
      broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return P - Q; });
    return Error::success();
  case ElementFn::Mul:
    if constexpr (std::is_integral_v<T>)
      broadcastBinary<T, T>(X, Y, Z, wrapMul<T>);
    else
      broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return P * Q; });
    return Error::success();
  case ElementFn::None:
  case ElementFn::Div:
  case ElementFn::Pow:
  case ElementFn::Equal:
  case ElementFn::Less:
  case ElementFn::Greater:
  case ElementFn::And:
  case ElementFn::Or:
  case ElementFn::Neg:
  case ElementFn::Abs:
  case ElementFn::Sqrt:
  case ElementFn::Reciprocal:
  case ElementFn::Exp:
  case ElementFn::Log:
  case ElementFn::Tanh:
  case ElementFn::Erf:
  case ElementFn::Sigmoid:
  case ElementFn::Relu:
  case ElementFn::LeakyRelu:
  case ElementFn::Not:
  case ElementFn::Gelu:
  case ElementFn::Silu:
    break;
  }
  assert(Fn == ElementFn::Div && "not an arithmetic op");
  if constexpr (std::is_integral_v<T>) {
    bool DivByZero = false;
    broadcastBinary<T, T>(X, Y, Z, [&](T P, T Q) -> T {
      if (Q == 0) {
        DivByZero = true;
        return 0;
      }
      if (Q == -1)
        return wrapSub<T>(0, P);
      return P / Q;
    });
    if (DivByZero)
      return A.error("integer division by zero");
  } else {
    broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return P / Q; });
  }
  return Error::success();
}

template <typename T> static void runComparison(const KernelArgs &A, OpId Op) {
  const Tensor &X = A.In[0], &Y = A.In[1], &Z = A.Out[0];
  if (Op == OpId::Equal)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P == Q; });
  else if (Op == OpId::Less)
    broadcastBinary<T, uint8_t>(X, Y, Z, [](T P, T Q) { return P < Q; });
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
  if (Op == OpId::And || Op == OpId::Or) {
    if (Error E = A.checkType(0, {ElementType::Bool}))
      return E;
    if (Error E = A.checkResultType(0, {ElementType::Bool}))
      return E;
    if (Op == OpId::And)
      broadcastBinary<uint8_t, uint8_t>(
          X, Y, A.Out[0], [](uint8_t P, uint8_t Q) { return P && Q; });
    else
      broadcastBinary<uint8_t, uint8_t>(
          X, Y, A.Out[0], [](uint8_t P, uint8_t Q) { return P || Q; });
    return Error::success();
  }
  if (Op == OpId::Equal || Op == OpId::Less || Op == OpId::Greater) {
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

template <typename T> static T addElements(T A, T B) {
  if constexpr (std::is_integral_v<T>)
    return wrapAdd(A, B);
  else
    return A + B;
}

template <typename T> static void accumulate(const KernelArgs &A) {
  const Tensor &Z = A.Out[0];
  T *ZD = Z.data<T>();
  int64_t N = Z.getNumElements();
  std::fill(ZD, ZD + N, T(0));
  for (const Tensor &X : A.In) {
    const T *XD = X.data<T>();
    StridedWalk Walk(Z.getShape(),
                     {getBroadcastStrides(X.getShape(), Z.getShape())});
    for (int64_t I = 0; I != N; ++I, Walk.next())
      ZD[I] = addElements(ZD[I], XD[Walk.offset(0)]);
  }
}

Error autopar::runSum(const KernelArgs &A) {
  for (const Tensor &X : A.In)
    if (X.getElementType() != A.In[0].getElementType())
      return A.error("operands have different element types");
  if (Expected<Shape> Out = planBroadcast(A); !Out)
    return Out.takeError();
  if (Error E = A.checkType(0, {ElementType::F32, ElementType::I64}))
    return E;
  if (Error E = A.checkResultType(0, {A.In[0].getElementType()}))
    return E;
  if (A.In[0].getElementType() == ElementType::F32)
    accumulate<float>(A);
  else
    accumulate<int64_t>(A);
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
