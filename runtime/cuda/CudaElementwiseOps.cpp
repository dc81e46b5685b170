//===- CudaElementwiseOps.cpp - Elementwise ops on the device -------------===//
//
// Binary ops with numpy broadcasting (Pow takes an integer exponent cast to
// f32; Mod is fmod = 1 on floats), Sum, Mean, Min, Max, Where, Trilu, unary
// ops (Clip's bounds read from the device), SwiGLU and the gradients of
// GELU, SiLU and SwiGLU: shapes from runtime/OpShapes.h, then one launch
// each. The integer-only ops (bitwise, BitShift, integer Mod, Sign, Clip)
// have no device kernel: the backend runs them on the host when small.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "runtime/OpShapes.h"
#include "runtime/cpu/KernelSupport.h"

#include <cmath>
#include <cstring>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

static std::optional<BinaryOp> getBinaryOp(OpId Op) {
  switch (getOpFacts(Op).Element) {
  case ElementFn::Add:
    return BinaryOp::Add;
  case ElementFn::Sub:
    return BinaryOp::Sub;
  case ElementFn::Mul:
    return BinaryOp::Mul;
  case ElementFn::Div:
    return BinaryOp::Div;
  case ElementFn::Pow:
    return BinaryOp::Pow;
  case ElementFn::Equal:
    return BinaryOp::Equal;
  case ElementFn::Less:
    return BinaryOp::Less;
  case ElementFn::Greater:
    return BinaryOp::Greater;
  case ElementFn::And:
    return BinaryOp::And;
  case ElementFn::Or:
    return BinaryOp::Or;
  case ElementFn::Min:
    return BinaryOp::Min;
  case ElementFn::Max:
    return BinaryOp::Max;
  case ElementFn::Mod: // fmod = 1 on floats (runBinary checks).
    return BinaryOp::Fmod;
  case ElementFn::GreaterOrEqual:
    return BinaryOp::GreaterOrEqual;
  case ElementFn::LessOrEqual:
    return BinaryOp::LessOrEqual;
  case ElementFn::Xor:
    return BinaryOp::Xor;
  case ElementFn::PRelu:
    return BinaryOp::PRelu;
  // Integers only: the host path runs small ones.
  case ElementFn::BitShift:
  case ElementFn::BitwiseAnd:
  case ElementFn::BitwiseOr:
  case ElementFn::BitwiseXor:
  case ElementFn::None:
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
  case ElementFn::IsNaN:
  case ElementFn::IsInf:
  case ElementFn::BitwiseNot:
    return std::nullopt;
  }
  return std::nullopt;
}

Error cuda::runBinary(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Z = A.Out[0];
  Tensor Y = A.In[1];
  Expected<Shape> Out = planBinaryBroadcast(A);
  if (!Out)
    return Out.takeError();
  std::optional<BinaryOp> Known = getBinaryOp(A.N.getOp());
  if (!Known)
    return A.error("no CUDA kernel for integer operands of more than 64 KiB "
                   "(smaller ones run on the host), got " +
                   X.getTypeString());
  BinaryOp Op = *Known;
  if (Op == BinaryOp::Fmod && isCudaFloat(X.getElementType()) &&
      A.intAttr("fmod", 0) != 1)
    return A.error("'fmod' must be 1 for floating-point operands");
  Scratch S(C);
  if (Op == BinaryOp::And || Op == BinaryOp::Or || Op == BinaryOp::Xor) {
    for (const Tensor *T : {&X, static_cast<const Tensor *>(&Y), &Z})
      if (T->getElementType() != ElementType::Bool)
        return typeError(A, "an operand or the result", *T, "bool");
  } else {
    // Pow takes an integer exponent: cast it to f32 first.
    if (Op == BinaryOp::Pow && !isCudaFloat(Y.getElementType())) {
      if (Error E = checkIndexType(A, 1))
        return E;
      Expected<Tensor> F = S.get(A, ElementType::F32, Y.getShape());
      if (!F)
        return F.takeError();
      if (Error E =
              launched(A, cast(dt(Y), Y.getData(), DType::F32, F->getData(),
                               Y.getNumElements(), C.getStream())))
        return E;
      Y = *F;
    }
    for (unsigned I : {0u, 1u})
      if (!isCudaFloat((I ? Y : X).getElementType()))
        return typeError(A, "operand " + Twine(I), I ? Y : X,
                         "f32, f16, bf16, f64 (integer operands of more than "
                         "64 KiB have no CUDA kernel)");
    bool Compare = Op == BinaryOp::Equal || Op == BinaryOp::Less ||
                   Op == BinaryOp::Greater || Op == BinaryOp::GreaterOrEqual ||
                   Op == BinaryOp::LessOrEqual;
    if (Compare ? Z.getElementType() != ElementType::Bool
                : !isCudaFloat(Z.getElementType()))
      return typeError(A, "result 0", Z, Compare ? "bool" : "a float");
  }
  Expected<Dims> D = makeDims(A, *Out);
  if (!D)
    return D.takeError();
  return launched(A, binary(Op, dt(X), X.getData(),
                            broadcastTo(X.getShape(), *Out), dt(Y), Y.getData(),
                            broadcastTo(Y.getShape(), *Out), dt(Z), Z.getData(),
                            *D, C.getStream()));
}

Error cuda::runSum(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkAllFloat(A))
    return E;
  Expected<Shape> Out = planBroadcast(A);
  if (!Out)
    return Out.takeError();
  const Tensor &Z = A.Out[0];
  Expected<Dims> D = makeDims(A, *Out);
  if (!D)
    return D.takeError();
  Strides Own = makeStrides(getStrides(*Out));
  // Z = X0 op X1, then Z = Z op Xi (Mean: the sum, then scaled).
  OpId Node = A.N.getOp();
  BinaryOp Op = Node == OpId::Min   ? BinaryOp::Min
                : Node == OpId::Max ? BinaryOp::Max
                                    : BinaryOp::Add;
  const Tensor &First = A.In[0];
  if (A.In.size() == 1) {
    if (First.getElementType() == Z.getElementType())
      return copyDevice(A, C, Z, First);
    return launched(A, cast(dt(First), First.getData(), dt(Z), Z.getData(),
                            Z.getNumElements(), C.getStream()));
  }
  for (size_t I = 1; I != A.In.size(); ++I) {
    const Tensor &X = I == 1 ? First : Z;
    Strides XS = I == 1 ? broadcastTo(First.getShape(), *Out) : Own;
    if (Error E = launched(A, binary(Op, dt(X), X.getData(), XS, dt(A.In[I]),
                                     A.In[I].getData(),
                                     broadcastTo(A.In[I].getShape(), *Out),
                                     dt(Z), Z.getData(), *D, C.getStream())))
      return E;
  }
  if (Node == OpId::Mean)
    return launched(A, scale(dt(Z), Z.getData(), dt(Z), Z.getData(),
                             Z.getNumElements(), float(1.0 / A.In.size()),
                             C.getStream()));
  return Error::success();
}

Error cuda::runWhere(const KernelArgs &A, CudaContext &C) {
  const Tensor &Cond = A.In[0], &X = A.In[1], &Y = A.In[2], &Z = A.Out[0];
  if (Cond.getElementType() != ElementType::Bool)
    return typeError(A, "operand 0", Cond, "bool");
  if (Error E = checkWhereTypes(A))
    return E;
  Expected<Shape> Out = planBroadcast(A);
  if (!Out)
    return Out.takeError();
  Expected<Dims> D = makeDims(A, *Out);
  if (!D)
    return D.takeError();
  return launched(
      A, where(Cond.data<uint8_t>(), broadcastTo(Cond.getShape(), *Out),
               X.getData(), broadcastTo(X.getShape(), *Out), Y.getData(),
               broadcastTo(Y.getShape(), *Out), Z.getData(), *D,
               int(getElementSize(Z.getElementType())), C.getStream()));
}

Error cuda::runTrilu(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (X.getRank() < 2)
    return A.error("'input' must have rank 2 or more");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Y.getElementType() != X.getElementType())
    return A.error("the result " + Y.getTypeString() +
                   " must have the type of " + X.getTypeString());
  int64_t K = 0;
  if (A.has(1)) {
    Expected<Shape> Given = readIntOperand(A, C, 1);
    if (!Given)
      return Given.takeError();
    if (Given->size() != 1)
      return A.error("'k' must have one element");
    K = Given->front();
  }
  return launched(A, trilu(X.getData(), Y.getData(), X.getNumElements(),
                           X.getDim(X.getRank() - 2), X.getDim(X.getRank() - 1),
                           K, A.intAttr("upper", 1) != 0,
                           int(getElementSize(X.getElementType())),
                           C.getStream()));
}

/// The value of the one-element float operand I (Clip's bounds), read from
/// the device.
static Expected<float> readFloatScalar(const KernelArgs &A, CudaContext &C,
                                       unsigned I) {
  const Tensor &T = A.In[I];
  if (T.getNumElements() != 1)
    return A.error("operand " + Twine(I) + " " + T.getTypeString() +
                   " must be a scalar");
  Expected<std::vector<uint8_t>> Bytes = C.readToHost(T);
  if (!Bytes)
    return A.error(toString(Bytes.takeError()));
  switch (T.getElementType()) {
  case ElementType::F32: {
    float V;
    std::memcpy(&V, Bytes->data(), 4);
    return V;
  }
  case ElementType::F64: {
    double V;
    std::memcpy(&V, Bytes->data(), 8);
    return float(V);
  }
  case ElementType::F16:
  case ElementType::BF16: {
    uint16_t Bits;
    std::memcpy(&Bits, Bytes->data(), 2);
    return T.getElementType() == ElementType::F16 ? halfToFloat(Bits)
                                                  : bfloat16ToFloat(Bits);
  }
  default:
    return typeError(A, "operand " + Twine(I), T, "a float");
  }
}

Error cuda::runUnary(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  OpId Op = A.N.getOp();
  if (Op == OpId::Not) {
    if (X.getElementType() != ElementType::Bool ||
        Y.getElementType() != ElementType::Bool)
      return typeError(A, "operand 0", X, "bool");
    return launched(A, unary(UnaryOp::Not, 0, 0, DType::Bool, X.getData(),
                             DType::Bool, Y.getData(), X.getNumElements(),
                             C.getStream()));
  }
  if (Op == OpId::IsNaN || Op == OpId::IsInf) {
    if (!isCudaFloat(X.getElementType()))
      return typeError(A, "operand 0", X, "a float");
    if (Y.getElementType() != ElementType::Bool)
      return typeError(A, "result 0", Y, "bool");
    return launched(
        A, unary(Op == OpId::IsNaN ? UnaryOp::IsNaN : UnaryOp::IsInf,
                 float(A.intAttr("detect_negative", 1)),
                 float(A.intAttr("detect_positive", 1)), dt(X), X.getData(),
                 DType::Bool, Y.getData(), X.getNumElements(), C.getStream()));
  }
  if (Op == OpId::BitwiseNot)
    return A.error("no CUDA kernel for integer operands of more than 64 KiB "
                   "(smaller ones run on the host), got " +
                   X.getTypeString());
  if (Error E = checkAllFloat(A))
    return E;
  UnaryOp U = UnaryOp::Neg;
  float Alpha = 0, Beta = 0;
  switch (getOpFacts(Op).Element) {
  case ElementFn::Neg:
    U = UnaryOp::Neg;
    break;
  case ElementFn::Abs:
    U = UnaryOp::Abs;
    break;
  case ElementFn::Sqrt:
    U = UnaryOp::Sqrt;
    break;
  case ElementFn::Reciprocal:
    U = UnaryOp::Reciprocal;
    break;
  case ElementFn::Exp:
    U = UnaryOp::Exp;
    break;
  case ElementFn::Log:
    U = UnaryOp::Log;
    break;
  case ElementFn::Tanh:
    U = UnaryOp::Tanh;
    break;
  case ElementFn::Erf:
    U = UnaryOp::Erf;
    break;
  case ElementFn::Sigmoid:
    U = UnaryOp::Sigmoid;
    break;
  case ElementFn::Relu:
    U = UnaryOp::Relu;
    break;
  case ElementFn::LeakyRelu:
    U = UnaryOp::LeakyRelu;
    Alpha = float(A.floatAttr("alpha", 0.01));
    break;
  case ElementFn::Silu:
    U = UnaryOp::Silu;
    break;
  case ElementFn::Gelu: {
    StringRef Mode = A.stringAttr("approximate", "none");
    if (Mode != "none" && Mode != "tanh")
      return A.error("'approximate' must be \"none\" or \"tanh\", got \"" +
                     Mode + "\"");
    U = Mode == "tanh" ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
    break;
  }
  case ElementFn::Ceil:
    U = UnaryOp::Ceil;
    break;
  case ElementFn::Floor:
    U = UnaryOp::Floor;
    break;
  case ElementFn::Round:
    U = UnaryOp::Round;
    break;
  case ElementFn::Sign:
    U = UnaryOp::Sign;
    break;
  case ElementFn::Sin:
    U = UnaryOp::Sin;
    break;
  case ElementFn::Cos:
    U = UnaryOp::Cos;
    break;
  case ElementFn::Tan:
    U = UnaryOp::Tan;
    break;
  case ElementFn::Asin:
    U = UnaryOp::Asin;
    break;
  case ElementFn::Acos:
    U = UnaryOp::Acos;
    break;
  case ElementFn::Atan:
    U = UnaryOp::Atan;
    break;
  case ElementFn::Sinh:
    U = UnaryOp::Sinh;
    break;
  case ElementFn::Cosh:
    U = UnaryOp::Cosh;
    break;
  case ElementFn::Asinh:
    U = UnaryOp::Asinh;
    break;
  case ElementFn::Acosh:
    U = UnaryOp::Acosh;
    break;
  case ElementFn::Atanh:
    U = UnaryOp::Atanh;
    break;
  case ElementFn::Softplus:
    U = UnaryOp::Softplus;
    break;
  case ElementFn::Softsign:
    U = UnaryOp::Softsign;
    break;
  case ElementFn::HardSwish:
    U = UnaryOp::HardSwish;
    break;
  case ElementFn::Mish:
    U = UnaryOp::Mish;
    break;
  case ElementFn::Elu:
    U = UnaryOp::Elu;
    Alpha = float(A.floatAttr("alpha", 1.0));
    break;
  case ElementFn::Selu:
    U = UnaryOp::Selu;
    Alpha = float(A.floatAttr("alpha", 1.67326319217681884765625));
    Beta = float(A.floatAttr("gamma", 1.05070102214813232421875));
    break;
  case ElementFn::Celu:
    U = UnaryOp::Celu;
    Alpha = float(A.floatAttr("alpha", 1.0));
    break;
  case ElementFn::HardSigmoid:
    U = UnaryOp::HardSigmoid;
    Alpha = float(A.floatAttr("alpha", 0.2));
    Beta = float(A.floatAttr("beta", 0.5));
    break;
  case ElementFn::ThresholdedRelu:
    U = UnaryOp::ThresholdedRelu;
    Alpha = float(A.floatAttr("alpha", 1.0));
    break;
  case ElementFn::Shrink:
    U = UnaryOp::Shrink;
    Alpha = float(A.floatAttr("bias", 0.0));
    Beta = float(A.floatAttr("lambd", 0.5));
    break;
  case ElementFn::Clip: {
    U = UnaryOp::Clip;
    Alpha = -INFINITY;
    Beta = INFINITY;
    for (unsigned I : {1u, 2u}) {
      if (!A.has(I))
        continue;
      Expected<float> Bound = readFloatScalar(A, C, I);
      if (!Bound)
        return Bound.takeError();
      (I == 1 ? Alpha : Beta) = *Bound;
    }
    break;
  }
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
    return A.error("no CUDA kernel");
  }
  return launched(A, unary(U, Alpha, Beta, dt(X), X.getData(), dt(Y),
                           Y.getData(), X.getNumElements(), C.getStream()));
}

/// An error unless operands [0, Count) and every result have one float

Error cuda::runSwiGLU(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkSameFloat(A, 2))
    return E;
  return launched(A, swiglu(dt(A.In[0]), A.In[0].getData(), A.In[1].getData(),
                            A.Out[0].getData(), A.In[0].getNumElements(),
                            float(A.floatAttr("alpha", 1.0)), C.getStream()));
}

Error cuda::runActivationGrad(const KernelArgs &A, CudaContext &C) {
  OpId Op = A.N.getOp();
  if (Error E = checkSameFloat(A, Op == OpId::SwiGLUGrad ? 3 : 2))
    return E;
  DType T = dt(A.In[0]);
  int64_t N = A.In[0].getNumElements();
  cudaStream_t S = C.getStream();
  if (Op == OpId::GeluGrad)
    return launched(
        A, geluGrad(T, A.In[0].getData(), A.In[1].getData(), A.Out[0].getData(),
                    N, A.stringAttr("approximate", "none") == "tanh", S));
  if (Op == OpId::SiluGrad)
    return launched(A, siluGrad(T, A.In[0].getData(), A.In[1].getData(),
                                A.Out[0].getData(), N, S));
  return launched(A, swigluGrad(T, A.In[0].getData(), A.In[1].getData(),
                                A.In[2].getData(), A.Out[0].getData(),
                                A.Out[1].getData(), N,
                                float(A.floatAttr("alpha", 1.0)), S));
}

Error cuda::runDropout(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0];
  if (Error E = checkFloat(A, 0))
    return E;
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (A.Out[0].getElementType() != X.getElementType())
    return typeError(A, "result 0", A.Out[0], "the type of operand 0");
  uint8_t *Mask = nullptr;
  if (A.hasResult(1)) {
    if (Error E = A.checkShape(1, X.getShape()))
      return E;
    if (A.Out[1].getElementType() != ElementType::Bool)
      return typeError(A, "result 1", A.Out[1], "bool");
    Mask = static_cast<uint8_t *>(A.Out[1].getData());
  }
  if (A.Dropout)
    return launched(A, dropout(dt(X), X.getData(), A.Out[0].getData(), Mask,
                               X.getNumElements(), *A.Dropout, C.getStream()));
  // Inference: a copy. Training mode needs a random stream.
  if (A.has(2)) {
    if (A.In[2].getElementType() != ElementType::Bool)
      return typeError(A, "operand 2", A.In[2], "bool");
    Expected<std::vector<uint8_t>> Training = C.readToHost(A.In[2]);
    if (!Training)
      return A.error(toString(Training.takeError()));
    float Ratio = 0.5f;
    if (A.has(1)) {
      if (A.In[1].getElementType() != ElementType::F32)
        return typeError(A, "operand 1", A.In[1], "f32");
      Expected<std::vector<uint8_t>> R = C.readToHost(A.In[1]);
      if (!R)
        return A.error(toString(R.takeError()));
      if (R->size() >= 4)
        std::memcpy(&Ratio, R->data(), 4);
    }
    if (!Training->empty() && (*Training)[0] && Ratio != 0)
      return A.error("training-mode Dropout without a random stream "
                     "(`rng_stream`: run dropout-streams before autodiff)");
  }
  if (Error E = copyDevice(A, C, A.Out[0], X))
    return E;
  if (Mask && X.getNumElements())
    return launched(
        A, cudaMemsetAsync(Mask, 1, size_t(X.getNumElements()), C.getStream()));
  return Error::success();
}

Error cuda::runDropoutGrad(const KernelArgs &A, CudaContext &C) {
  const Tensor &DY = A.In[0], &Mask = A.In[1];
  if (Error E = checkFloat(A, 0))
    return E;
  if (Mask.getElementType() != ElementType::Bool)
    return typeError(A, "operand 1", Mask, "bool");
  if (Mask.getShape() != DY.getShape())
    return A.error("mask " + Mask.getTypeString() + " is not dY's shape " +
                   DY.getTypeString());
  if (Error E = A.checkShape(0, DY.getShape()))
    return E;
  if (A.Out[0].getElementType() != DY.getElementType())
    return typeError(A, "result 0", A.Out[0], "the type of dY");
  double Ratio = A.floatAttr("ratio", 0);
  if (!(Ratio >= 0 && Ratio < 1))
    return A.error("ratio " + std::to_string(Ratio) + " is not in [0, 1)");
  return launched(A, dropoutGrad(dt(DY), DY.getData(),
                                 static_cast<const uint8_t *>(Mask.getData()),
                                 A.Out[0].getData(), DY.getNumElements(),
                                 float(1 / (1 - Ratio)), C.getStream()));
}
