//===- UnaryMathKernels.cpp - ONNX's other unary functions ----------------===//
//
// The unary functions of ONNX beyond UnaryKernels.cpp's, with the formulas
// and attribute defaults of the ONNX operators: rounding (Round is half to
// even), trigonometric and hyperbolic functions, the activations Softplus,
// Softsign, Elu, Selu, Celu, HardSigmoid, HardSwish, Mish, ThresholdedRelu
// and Shrink, and Clip between its optional scalar bounds, in f32; Sign,
// Shrink and Clip also on i64 and i32. IsNaN and IsInf map f32 to bool.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace autopar;
using namespace llvm;

template <typename T, typename R, typename FnTy>
static void mapTo(const Tensor &X, const Tensor &Y, FnTy Fn) {
  const T *XD = X.data<T>();
  R *YD = Y.data<R>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I)
    YD[I] = Fn(XD[I]);
}

/// log(1 + exp(x)) without overflow.
static float softplus(float X) {
  return X > 0 ? X + std::log1p(std::exp(-X)) : std::log1p(std::exp(X));
}

/// Clip's bounds of type T: operands 1 and 2 when given (one element
/// each), else the type's extremes.
template <typename T>
static Error getClipBounds(const KernelArgs &A, T &Lo, T &Hi) {
  Lo = std::numeric_limits<T>::lowest();
  Hi = std::numeric_limits<T>::max();
  if constexpr (std::numeric_limits<T>::has_infinity) {
    Lo = -std::numeric_limits<T>::infinity();
    Hi = std::numeric_limits<T>::infinity();
  }
  for (unsigned I : {1u, 2u}) {
    if (!A.has(I))
      continue;
    if (Error E = A.checkType(I, {A.In[0].getElementType()}))
      return E;
    if (A.In[I].getNumElements() != 1)
      return A.error(Twine(I == 1 ? "'min'" : "'max'") +
                     " must be a scalar, got " + A.In[I].getTypeString());
    (I == 1 ? Lo : Hi) = A.In[I].data<T>()[0];
  }
  return Error::success();
}

/// Sign, Shrink and Clip of integers.
template <typename T> static Error runIntegerMath(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  switch (getOpFacts(A.N.getOp()).Element) {
  case ElementFn::Sign:
    mapTo<T, T>(X, Y, [](T V) { return T((V > 0) - (V < 0)); });
    return Error::success();
  case ElementFn::Shrink: {
    double Bias = A.floatAttr("bias", 0.0), Lambd = A.floatAttr("lambd", 0.5);
    mapTo<T, T>(X, Y, [=](T V) {
      double D = double(V);
      return T(D < -Lambd ? D + Bias : D > Lambd ? D - Bias : 0.0);
    });
    return Error::success();
  }
  case ElementFn::Clip: {
    T Lo, Hi;
    if (Error E = getClipBounds(A, Lo, Hi))
      return E;
    mapTo<T, T>(X, Y, [=](T V) { return std::min(std::max(V, Lo), Hi); });
    return Error::success();
  }
  default:
    return A.error("takes floating-point operands, got " + X.getTypeString());
  }
}

/// The f32 functions; an error for the others.
static Error runFloatMath(const KernelArgs &A, ElementFn Fn) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  auto Map = [&](auto F) { mapTo<float, float>(X, Y, F); };
  float Alpha = float(A.floatAttr("alpha", 1.0));
  switch (Fn) {
  case ElementFn::Ceil:
    Map([](float V) { return std::ceil(V); });
    break;
  case ElementFn::Floor:
    Map([](float V) { return std::floor(V); });
    break;
  case ElementFn::Round:
    // nearbyint rounds half to even in the default rounding mode.
    Map([](float V) { return std::nearbyint(V); });
    break;
  case ElementFn::Sign:
    Map([](float V) {
      return V > 0 ? 1.0f : V < 0 ? -1.0f : V == 0 ? 0.0f : V;
    });
    break;
  case ElementFn::Sin:
    Map([](float V) { return std::sin(V); });
    break;
  case ElementFn::Cos:
    Map([](float V) { return std::cos(V); });
    break;
  case ElementFn::Tan:
    Map([](float V) { return std::tan(V); });
    break;
  case ElementFn::Asin:
    Map([](float V) { return std::asin(V); });
    break;
  case ElementFn::Acos:
    Map([](float V) { return std::acos(V); });
    break;
  case ElementFn::Atan:
    Map([](float V) { return std::atan(V); });
    break;
  case ElementFn::Sinh:
    Map([](float V) { return std::sinh(V); });
    break;
  case ElementFn::Cosh:
    Map([](float V) { return std::cosh(V); });
    break;
  case ElementFn::Asinh:
    Map([](float V) { return std::asinh(V); });
    break;
  case ElementFn::Acosh:
    Map([](float V) { return std::acosh(V); });
    break;
  case ElementFn::Atanh:
    Map([](float V) { return std::atanh(V); });
    break;
  case ElementFn::Softplus:
    Map(softplus);
    break;
  case ElementFn::Softsign:
    Map([](float V) { return V / (1.0f + std::fabs(V)); });
    break;
  case ElementFn::Elu:
    Map([=](float V) { return V < 0 ? Alpha * std::expm1(V) : V; });
    break;
  case ElementFn::Selu: {
    float SeluAlpha = float(A.floatAttr("alpha", 1.67326319217681884765625));
    float Gamma = float(A.floatAttr("gamma", 1.05070102214813232421875));
    Map([=](float V) {
      return Gamma * (V > 0 ? V : SeluAlpha * std::exp(V) - SeluAlpha);
    });
    break;
  }
  case ElementFn::Celu:
    Map([=](float V) {
      return std::max(0.0f, V) + std::min(0.0f, Alpha * std::expm1(V / Alpha));
    });
    break;
  case ElementFn::HardSigmoid: {
    float HAlpha = float(A.floatAttr("alpha", 0.2));
    float Beta = float(A.floatAttr("beta", 0.5));
    Map([=](float V) {
      return std::max(0.0f, std::min(1.0f, HAlpha * V + Beta));
    });
    break;
  }
  case ElementFn::HardSwish:
    Map([](float V) {
      return V * std::max(0.0f, std::min(1.0f, V / 6.0f + 0.5f));
    });
    break;
  case ElementFn::Mish:
    Map([](float V) { return V * std::tanh(softplus(V)); });
    break;
  case ElementFn::ThresholdedRelu:
    Map([=](float V) { return V > Alpha ? V : 0.0f; });
    break;
  case ElementFn::Shrink: {
    float Bias = float(A.floatAttr("bias", 0.0));
    float Lambd = float(A.floatAttr("lambd", 0.5));
    Map([=](float V) {
      return V < -Lambd ? V + Bias : V > Lambd ? V - Bias : 0.0f;
    });
    break;
  }
  case ElementFn::Clip: {
    float Lo, Hi;
    if (Error E = getClipBounds(A, Lo, Hi))
      return E;
    // NaN stays NaN: std::max and std::min return their first operand
    // when the comparison is false.
    Map([=](float V) { return std::min(std::max(V, Lo), Hi); });
    break;
  }
  default:
    return A.error("no CPU kernel for this function");
  }
  return Error::success();
}

Error autopar::runUnaryMath(const KernelArgs &A) {
  ElementType Ty = A.In[0].getElementType();
  if (Ty == ElementType::I64)
    return runIntegerMath<int64_t>(A);
  if (Ty == ElementType::I32)
    return runIntegerMath<int32_t>(A);
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  return runFloatMath(A, getOpFacts(A.N.getOp()).Element);
}

Error autopar::runFloatClass(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::Bool}))
    return E;
  if (A.N.getOp() == OpId::IsNaN) {
    mapTo<float, uint8_t>(X, Y, [](float V) { return uint8_t(std::isnan(V)); });
    return Error::success();
  }
  bool Negative = A.intAttr("detect_negative", 1) != 0;
  bool Positive = A.intAttr("detect_positive", 1) != 0;
  mapTo<float, uint8_t>(X, Y, [=](float V) {
    return uint8_t(std::isinf(V) && (V < 0 ? Negative : Positive));
  });
  return Error::success();
}
