//===- UnaryKernels.cpp - Elementwise functions and activations -----------===//
//
// One element in, one element out, in f32 (Neg, Abs and Relu also on i64
// and i32, Not on bool); ONNX's other unary functions are
// UnaryMathKernels.cpp's, BitwiseNot BitwiseKernels.cpp's. Gelu is 0.5 x (1 +
// erf(x / sqrt 2)), or with approximate = "tanh" 0.5 x (1 + tanh(sqrt(2 / pi)
// (x + 0.044715 x^3))), vectorized (cpu/VectorMath.h). Silu is x sigmoid(x);
// SwiGLU(A, B) is A sigmoid(alpha A) B.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include <cmath>
#include <type_traits>

using namespace autopar;
using namespace llvm;

static float sigmoid(float X) {
  if (X >= 0)
    return 1.0f / (1.0f + std::exp(-X));
  float E = std::exp(X);
  return E / (1.0f + E);
}

template <typename T, typename FnTy>
static void mapElements(const Tensor &X, const Tensor &Y, FnTy Fn) {
  const T *XD = X.data<T>();
  T *YD = Y.data<T>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I)
    YD[I] = Fn(XD[I]);
}

template <typename T>
static void runIntegerUnary(const Tensor &X, const Tensor &Y, OpId Op) {
  using U = std::make_unsigned_t<T>;
  if (Op == OpId::Neg)
    mapElements<T>(X, Y, [](T V) { return T(U(0) - U(V)); });
  else if (Op == OpId::Abs)
    mapElements<T>(X, Y, [](T V) { return V < 0 ? T(U(0) - U(V)) : V; });
  else
    mapElements<T>(X, Y, [](T V) { return V < 0 ? T(0) : V; });
}

static Error runFloatUnary(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  switch (getOpFacts(A.N.getOp()).Element) {
  case ElementFn::Neg:
    mapElements<float>(X, Y, [](float V) { return -V; });
    break;
  case ElementFn::Abs:
    mapElements<float>(X, Y, [](float V) { return std::fabs(V); });
    break;
  case ElementFn::Sqrt:
    mapElements<float>(X, Y, [](float V) { return std::sqrt(V); });
    break;
  case ElementFn::Reciprocal:
    mapElements<float>(X, Y, [](float V) { return 1.0f / V; });
    break;
  case ElementFn::Exp:
    mapElements<float>(X, Y, [](float V) { return std::exp(V); });
    break;
  case ElementFn::Log:
    mapElements<float>(X, Y, [](float V) { return std::log(V); });
    break;
  case ElementFn::Tanh:
    mapElements<float>(X, Y, [](float V) { return std::tanh(V); });
    break;
  case ElementFn::Erf:
    mapElements<float>(X, Y, [](float V) { return std::erf(V); });
    break;
  case ElementFn::Sigmoid:
    mapElements<float>(X, Y, sigmoid);
    break;
  case ElementFn::Relu:
    mapElements<float>(X, Y, [](float V) { return V < 0 ? 0.0f : V; });
    break;
  case ElementFn::LeakyRelu: {
    float Alpha = float(A.floatAttr("alpha", 0.01));
    mapElements<float>(X, Y, [=](float V) { return V < 0 ? Alpha * V : V; });
    break;
  }
  case ElementFn::Silu:
    mapElements<float>(X, Y, [](float V) { return V * sigmoid(V); });
    break;
  case ElementFn::Gelu: {
    StringRef Mode = A.stringAttr("approximate", "none");
    if (Mode == "tanh" || Mode == "none") {
      geluArray(X.data<float>(), Y.data<float>(), X.getNumElements(),
                Mode == "tanh");
    } else {
      return A.error("'approximate' must be \"none\" or \"tanh\", got \"" +
                     Mode + "\"");
    }
    break;
  }
  case ElementFn::Ceil:
  case ElementFn::Floor:
  case ElementFn::Round:
  case ElementFn::Sign:
  case ElementFn::Sin:
  case ElementFn::Cos:
  case ElementFn::Tan:
  case ElementFn::Asin:
  case ElementFn::Acos:
  case ElementFn::Atan:
  case ElementFn::Sinh:
  case ElementFn::Cosh:
  case ElementFn::Asinh:
  case ElementFn::Acosh:
  case ElementFn::Atanh:
  case ElementFn::Softplus:
  case ElementFn::Softsign:
  case ElementFn::Elu:
  case ElementFn::Selu:
  case ElementFn::Celu:
  case ElementFn::HardSigmoid:
  case ElementFn::HardSwish:
  case ElementFn::Mish:
  case ElementFn::ThresholdedRelu:
  case ElementFn::Shrink:
  case ElementFn::Clip:
    return runUnaryMath(A);
  case ElementFn::None:
  case ElementFn::Add:
  case ElementFn::Sub:
  case ElementFn::Mul:
  case ElementFn::Div:
  case ElementFn::Pow:
  case ElementFn::Equal:
  case ElementFn::Less:
  case ElementFn::Greater:
  case ElementFn::And:
  case ElementFn::Or:
  case ElementFn::Not:
  case ElementFn::Min:
  case ElementFn::Max:
  case ElementFn::Mod:
  case ElementFn::BitShift:
  case ElementFn::GreaterOrEqual:
  case ElementFn::LessOrEqual:
  case ElementFn::Xor:
  case ElementFn::BitwiseAnd:
  case ElementFn::BitwiseOr:
  case ElementFn::BitwiseXor:
  case ElementFn::PRelu:
  case ElementFn::IsNaN:
  case ElementFn::IsInf:
  case ElementFn::BitwiseNot:
    llvm_unreachable("not a unary float op");
  }
  return Error::success();
}

Error autopar::runUnary(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  OpId Op = A.N.getOp();
  if (Op == OpId::IsNaN || Op == OpId::IsInf)
    return runFloatClass(A);
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  if (Op == OpId::Not) {
    if (Error E = A.checkType(0, {ElementType::Bool}))
      return E;
    mapElements<uint8_t>(X, A.Out[0], [](uint8_t V) { return uint8_t(!V); });
    return Error::success();
  }
  if (Op == OpId::BitwiseNot)
    return runBitwiseNot(A);
  if ((Op == OpId::Sign || Op == OpId::Shrink || Op == OpId::Clip) &&
      X.getElementType() != ElementType::F32)
    return runUnaryMath(A);
  bool TakesIntegers = Op == OpId::Neg || Op == OpId::Abs || Op == OpId::Relu;
  if (TakesIntegers && X.getElementType() == ElementType::I64) {
    runIntegerUnary<int64_t>(X, A.Out[0], Op);
    return Error::success();
  }
  if (TakesIntegers && X.getElementType() == ElementType::I32) {
    runIntegerUnary<int32_t>(X, A.Out[0], Op);
    return Error::success();
  }
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  return runFloatUnary(A);
}

Error autopar::runSwiGLU(const KernelArgs &A) {
  const Tensor &G = A.In[0], &U = A.In[1], &Y = A.Out[0];
  for (unsigned I : {0u, 1u})
    if (Error E = A.checkType(I, {ElementType::F32}))
      return E;
  if (G.getShape() != U.getShape())
    return A.error("'A' " + G.getTypeString() + " and 'B' " +
                   U.getTypeString() + " must have the same shape");
  if (Error E = A.checkShape(0, G.getShape()))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  float Alpha = float(A.floatAttr("alpha", 1.0));
  const float *GD = G.data<float>(), *UD = U.data<float>();
  float *YD = Y.data<float>();
  for (int64_t I = 0, N = G.getNumElements(); I != N; ++I)
    YD[I] = GD[I] * sigmoid(Alpha * GD[I]) * UD[I];
  return Error::success();
}
