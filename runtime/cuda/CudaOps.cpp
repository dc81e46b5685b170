//===- CudaOps.cpp - Nodes on the CUDA device -----------------------------===//
//
// See CudaOps.h. Floats are f32, f16, bf16 or f64 in storage (f8e4m3 has no
// CUDA kernel); kernels take any mix of them and compute as CudaKernels.h
// says. GEMMs go through cuBLAS (cublasGemmEx, cublasGemmStridedBatchedEx)
// with f32 accumulation; fp32 GEMMs use TF32 tensor cores only when the
// backend allows it. Reshapes copy the bytes after checking the element
// count (the result shape is the program's). Expand and Split take their
// shapes from the results, so they read nothing back from the device.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOps.h"
#include "runtime/cuda/CudaKernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cstring>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

CudaContext::~CudaContext() = default;

Error autopar::cudaNodeError(const KernelArgs &A, cudaError_t E,
                             const Twine &What) {
  return A.error(What + ": " + cudaGetErrorString(E));
}

static Error cublasNodeError(const KernelArgs &A, cublasStatus_t S,
                             const Twine &What) {
  return A.error(What + ": " + cublasGetStatusString(S));
}

//===----------------------------------------------------------------------===//
// Types, shapes and strides
//===----------------------------------------------------------------------===//

static std::optional<DType> toDType(ElementType T) {
  switch (T) {
  case ElementType::F32:
    return DType::F32;
  case ElementType::F16:
    return DType::F16;
  case ElementType::BF16:
    return DType::BF16;
  case ElementType::F64:
    return DType::F64;
  case ElementType::I64:
    return DType::I64;
  case ElementType::I32:
    return DType::I32;
  case ElementType::I8:
    return DType::I8;
  case ElementType::U8:
    return DType::U8;
  case ElementType::Bool:
    return DType::Bool;
  case ElementType::F8E4M3:
    return std::nullopt;
  }
  return std::nullopt;
}

static bool isCudaFloat(ElementType T) {
  return T == ElementType::F32 || T == ElementType::F16 ||
         T == ElementType::BF16 || T == ElementType::F64;
}

static DType dt(const Tensor &T) { return *toDType(T.getElementType()); }

static Error typeError(const KernelArgs &A, const Twine &What, const Tensor &T,
                       StringRef Takes) {
  return A.error(What + " is " + T.getTypeString() +
                 "; the CUDA kernel takes " + Takes);
}

/// An error unless operand I (when given) is a float the kernels store.
static Error checkFloat(const KernelArgs &A, unsigned I) {
  if (!A.has(I) || isCudaFloat(A.In[I].getElementType()))
    return Error::success();
  return typeError(A, "operand " + Twine(I), A.In[I], "f32, f16, bf16, f64");
}

static Error checkFloatResult(const KernelArgs &A, unsigned I) {
  if (!A.hasResult(I) || isCudaFloat(A.Out[I].getElementType()))
    return Error::success();
  return typeError(A, "result " + Twine(I), A.Out[I], "f32, f16, bf16, f64");
}

static Error checkAllFloat(const KernelArgs &A) {
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (Error E = checkFloat(A, I))
      return E;
  for (unsigned I = 0; I != A.Out.size(); ++I)
    if (Error E = checkFloatResult(A, I))
      return E;
  return Error::success();
}

static Error checkIndexType(const KernelArgs &A, unsigned I) {
  ElementType T = A.In[I].getElementType();
  if (T == ElementType::I64 || T == ElementType::I32)
    return Error::success();
  return typeError(A, "operand " + Twine(I), A.In[I], "i64, i32");
}

static Expected<Dims> makeDims(const KernelArgs &A, ArrayRef<int64_t> S) {
  if (S.size() > size_t(MaxRank))
    return A.error("rank " + Twine(S.size()) + " exceeds the CUDA kernels' " +
                   Twine(MaxRank));
  Dims D;
  D.Rank = int(S.size());
  for (size_t I = 0; I != S.size(); ++I)
    D.Size[I] = S[I];
  return D;
}

static Strides makeStrides(ArrayRef<int64_t> S) {
  Strides R;
  for (size_t I = 0; I != S.size() && I != size_t(MaxRank); ++I)
    R.S[I] = S[I];
  return R;
}

/// Strides of In broadcast to Target.
static Strides broadcastTo(ArrayRef<int64_t> In, ArrayRef<int64_t> Target) {
  return makeStrides(getBroadcastStrides(In, Target));
}

static Error launched(const KernelArgs &A, cudaError_t E) {
  if (E == cudaSuccess)
    return Error::success();
  return cudaNodeError(A, E, "CUDA kernel launch failed");
}

static Error copyDevice(const KernelArgs &A, CudaContext &C, const Tensor &Dst,
                        const Tensor &Src) {
  if (Dst.getData() == Src.getData() || Src.getSizeInBytes() == 0)
    return Error::success();
  return launched(A, cudaMemcpyAsync(Dst.getData(), Src.getData(),
                                     Src.getSizeInBytes(),
                                     cudaMemcpyDeviceToDevice, C.getStream()));
}

Expected<Shape> autopar::readIntOperand(const KernelArgs &A, CudaContext &C,
                                        unsigned I) {
  const Tensor &T = A.In[I];
  if (T.getRank() > 1)
    return A.error("operand " + Twine(I) + " must have rank 0 or 1, got " +
                   T.getTypeString());
  if (Error E = checkIndexType(A, I))
    return E;
  Expected<std::vector<uint8_t>> Bytes = C.readToHost(T);
  if (!Bytes)
    return A.error(toString(Bytes.takeError()));
  Shape Values;
  for (int64_t J = 0, N = T.getNumElements(); J != N; ++J) {
    if (T.getElementType() == ElementType::I64) {
      int64_t V;
      std::memcpy(&V, Bytes->data() + 8 * J, 8);
      Values.push_back(V);
    } else {
      int32_t V;
      std::memcpy(&V, Bytes->data() + 4 * J, 4);
      Values.push_back(V);
    }
  }
  return Values;
}

/// A scratch tensor freed when the guard goes out of scope (after the
/// launches that use it: the allocator is stream-ordered).
class Scratch {
public:
  Scratch(CudaContext &C) : C(C) {}
  ~Scratch() {
    for (const Tensor &T : Held)
      C.freeScratch(T);
  }
  Expected<Tensor> get(const KernelArgs &A, ElementType Elem,
                       ArrayRef<int64_t> S) {
    Expected<Tensor> T = C.allocateScratch(Elem, S);
    if (!T)
      return A.error(toString(T.takeError()));
    Held.push_back(*T);
    return *T;
  }

private:
  CudaContext &C;
  SmallVector<Tensor, 4> Held;
};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static std::optional<BinaryOp> getBinaryOp(OpId Op) {
  switch (Op) {
  case OpId::Add:
    return BinaryOp::Add;
  case OpId::Sub:
    return BinaryOp::Sub;
  case OpId::Mul:
    return BinaryOp::Mul;
  case OpId::Div:
    return BinaryOp::Div;
  case OpId::Pow:
    return BinaryOp::Pow;
  case OpId::Equal:
    return BinaryOp::Equal;
  case OpId::Less:
    return BinaryOp::Less;
  case OpId::Greater:
    return BinaryOp::Greater;
  case OpId::And:
    return BinaryOp::And;
  case OpId::Or:
    return BinaryOp::Or;
  default:
    return std::nullopt;
  }
}

static Error runBinary(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Z = A.Out[0];
  Tensor Y = A.In[1];
  std::optional<Shape> Out = broadcastShapes({X.getShape(), Y.getShape()});
  if (!Out)
    return A.error("operands " + X.getTypeString() + " and " +
                   Y.getTypeString() + " do not broadcast");
  if (Error E = A.checkShape(0, *Out))
    return E;
  BinaryOp Op = *getBinaryOp(A.N.getOp());
  Scratch S(C);
  if (Op == BinaryOp::And || Op == BinaryOp::Or) {
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
                   Op == BinaryOp::Greater;
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

static Error runSum(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkAllFloat(A))
    return E;
  SmallVector<ArrayRef<int64_t>, 4> Shapes;
  for (const Tensor &X : A.In)
    Shapes.push_back(X.getShape());
  std::optional<Shape> Out = broadcastShapes(Shapes);
  if (!Out)
    return A.error("operands do not broadcast");
  if (Error E = A.checkShape(0, *Out))
    return E;
  const Tensor &Z = A.Out[0];
  Expected<Dims> D = makeDims(A, *Out);
  if (!D)
    return D.takeError();
  Strides Own = makeStrides(getStrides(*Out));
  // Z = X0 + X1, then Z += Xi.
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
    if (Error E = launched(A, binary(BinaryOp::Add, dt(X), X.getData(), XS,
                                     dt(A.In[I]), A.In[I].getData(),
                                     broadcastTo(A.In[I].getShape(), *Out),
                                     dt(Z), Z.getData(), *D, C.getStream())))
      return E;
  }
  return Error::success();
}

static Error runWhere(const KernelArgs &A, CudaContext &C) {
  const Tensor &Cond = A.In[0], &X = A.In[1], &Y = A.In[2], &Z = A.Out[0];
  if (Cond.getElementType() != ElementType::Bool)
    return typeError(A, "operand 0", Cond, "bool");
  if (X.getElementType() != Y.getElementType() ||
      Z.getElementType() != X.getElementType())
    return A.error("X " + X.getTypeString() + ", Y " + Y.getTypeString() +
                   " and the result " + Z.getTypeString() +
                   " must have one element type");
  std::optional<Shape> Out =
      broadcastShapes({Cond.getShape(), X.getShape(), Y.getShape()});
  if (!Out)
    return A.error("operands do not broadcast");
  if (Error E = A.checkShape(0, *Out))
    return E;
  Expected<Dims> D = makeDims(A, *Out);
  if (!D)
    return D.takeError();
  return launched(
      A, where(Cond.data<uint8_t>(), broadcastTo(Cond.getShape(), *Out),
               X.getData(), broadcastTo(X.getShape(), *Out), Y.getData(),
               broadcastTo(Y.getShape(), *Out), Z.getData(), *D,
               int(getElementSize(Z.getElementType())), C.getStream()));
}

static Error runTrilu(const KernelArgs &A, CudaContext &C) {
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

static Error runUnary(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  OpId Op = A.N.getOp();
  if (Op == OpId::Not) {
    if (X.getElementType() != ElementType::Bool ||
        Y.getElementType() != ElementType::Bool)
      return typeError(A, "operand 0", X, "bool");
    return launched(A, unary(UnaryOp::Not, 0, DType::Bool, X.getData(),
                             DType::Bool, Y.getData(), X.getNumElements(),
                             C.getStream()));
  }
  if (Error E = checkAllFloat(A))
    return E;
  UnaryOp U;
  float Alpha = 0;
  switch (Op) {
  case OpId::Neg:
    U = UnaryOp::Neg;
    break;
  case OpId::Abs:
    U = UnaryOp::Abs;
    break;
  case OpId::Sqrt:
    U = UnaryOp::Sqrt;
    break;
  case OpId::Reciprocal:
    U = UnaryOp::Reciprocal;
    break;
  case OpId::Exp:
    U = UnaryOp::Exp;
    break;
  case OpId::Log:
    U = UnaryOp::Log;
    break;
  case OpId::Tanh:
    U = UnaryOp::Tanh;
    break;
  case OpId::Erf:
    U = UnaryOp::Erf;
    break;
  case OpId::Sigmoid:
    U = UnaryOp::Sigmoid;
    break;
  case OpId::Relu:
    U = UnaryOp::Relu;
    break;
  case OpId::LeakyRelu:
    U = UnaryOp::LeakyRelu;
    Alpha = float(A.floatAttr("alpha", 0.01));
    break;
  case OpId::Silu:
    U = UnaryOp::Silu;
    break;
  case OpId::Gelu: {
    StringRef Mode = A.stringAttr("approximate", "none");
    if (Mode != "none" && Mode != "tanh")
      return A.error("'approximate' must be \"none\" or \"tanh\", got \"" +
                     Mode + "\"");
    U = Mode == "tanh" ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
    break;
  }
  default:
    return A.error("no CUDA kernel");
  }
  return launched(A, unary(U, Alpha, dt(X), X.getData(), dt(Y), Y.getData(),
                           X.getNumElements(), C.getStream()));
}

/// An error unless operands [0, Count) and every result have one float
/// type and operand 0's shape.
static Error checkSameFloat(const KernelArgs &A, unsigned Count) {
  if (Error E = checkAllFloat(A))
    return E;
  for (unsigned I = 0; I != Count; ++I)
    if (A.In[I].getShape() != A.In[0].getShape() ||
        A.In[I].getElementType() != A.In[0].getElementType())
      return A.error("operands " + A.In[0].getTypeString() + " and " +
                     A.In[I].getTypeString() + " differ");
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
    if (A.Out[I].getElementType() != A.In[0].getElementType())
      return A.error("result " + Twine(I) + " " + A.Out[I].getTypeString() +
                     " must have the type of " + A.In[0].getTypeString());
  }
  return Error::success();
}

static Error runSwiGLU(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkSameFloat(A, 2))
    return E;
  return launched(A, swiglu(dt(A.In[0]), A.In[0].getData(), A.In[1].getData(),
                            A.Out[0].getData(), A.In[0].getNumElements(),
                            float(A.floatAttr("alpha", 1.0)), C.getStream()));
}

static Error runActivationGrad(const KernelArgs &A, CudaContext &C) {
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

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

static Error runSoftmax(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = checkAllFloat(A))
    return E;
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  return launched(A, softmax(dt(X), X.getData(), dt(Y), Y.getData(),
                             getNumElements(X.getShape().take_front(*Axis)),
                             X.getDim(*Axis),
                             getNumElements(X.getShape().drop_front(*Axis + 1)),
                             A.N.getOp() == OpId::LogSoftmax, C.getStream()));
}

static Error runSoftmaxGrad(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkSameFloat(A, 2))
    return E;
  const Tensor &Y = A.In[1];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), Y.getRank());
  if (!Axis)
    return Axis.takeError();
  return launched(
      A, softmaxGrad(dt(Y), A.In[0].getData(), Y.getData(), A.Out[0].getData(),
                     getNumElements(Y.getShape().take_front(*Axis)),
                     Y.getDim(*Axis),
                     getNumElements(Y.getShape().drop_front(*Axis + 1)),
                     C.getStream()));
}

/// Operand I as Len contiguous elements of the normalised row Row: itself
/// when it has that many, else broadcast into scratch.
static Expected<Tensor> rowOperand(const KernelArgs &A, CudaContext &C,
                                   Scratch &S, unsigned I,
                                   ArrayRef<int64_t> Row) {
  const Tensor &T = A.In[I];
  std::optional<Shape> Joint = broadcastShapes({T.getShape(), Row});
  if (T.getRank() > Row.size() || !Joint || ArrayRef<int64_t>(*Joint) != Row)
    return A.error("operand " + Twine(I) + " " + T.getTypeString() +
                   " does not broadcast to the normalised shape");
  if (T.getNumElements() == getNumElements(Row))
    return T;
  Expected<Tensor> R = S.get(A, T.getElementType(), Row);
  if (!R)
    return R.takeError();
  Expected<Dims> D = makeDims(A, Row);
  if (!D)
    return D.takeError();
  if (Error E = launched(
          A,
          copyStrided(R->getData(), 0, makeStrides(getStrides(Row)),
                      T.getData(), 0, broadcastTo(T.getShape(), Row), *D,
                      int(getElementSize(T.getElementType())), C.getStream())))
    return E;
  return *R;
}

static Error runNorm(const KernelArgs &A, CudaContext &C) {
  bool Centered = A.N.getOp() == OpId::LayerNormalization;
  if (Error E = checkAllFloat(A))
    return E;
  const Tensor &X = A.In[0];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  ArrayRef<int64_t> Row = X.getShape().drop_front(*Axis);
  Scratch S(C);
  Expected<Tensor> Scale = rowOperand(A, C, S, 1, Row);
  if (!Scale)
    return Scale.takeError();
  Tensor Bias;
  if (Centered && A.has(2)) {
    Expected<Tensor> B = rowOperand(A, C, S, 2, Row);
    if (!B)
      return B.takeError();
    if (B->getElementType() != Scale->getElementType())
      return A.error("scale " + Scale->getTypeString() + " and bias " +
                     B->getTypeString() + " differ in type");
    Bias = *B;
  }
  DType StatT = DType::F32;
  if (Centered) {
    Shape StatShape = toShape(X.getShape().take_front(*Axis));
    StatShape.resize(X.getRank(), 1);
    for (unsigned I : {1u, 2u})
      if (A.hasResult(I)) {
        if (Error E = A.checkShape(I, StatShape))
          return E;
        StatT = dt(A.Out[I]);
      }
    if (A.hasResult(1) && A.hasResult(2) &&
        A.Out[1].getElementType() != A.Out[2].getElementType())
      return A.error("Mean and InvStdDev differ in type");
  }
  return launched(
      A,
      norm(Centered, dt(X), X.getData(), dt(*Scale), Scale->getData(),
           Bias.isPresent() ? Bias.getData() : nullptr, dt(A.Out[0]),
           A.Out[0].getData(), StatT,
           Centered && A.hasResult(1) ? A.Out[1].getData() : nullptr,
           Centered && A.hasResult(2) ? A.Out[2].getData() : nullptr,
           getNumElements(X.getShape().take_front(*Axis)), getNumElements(Row),
           A.floatAttr("epsilon", 1e-5), C.getStream()));
}

static Error runNormGrad(const KernelArgs &A, CudaContext &C) {
  bool Centered = A.N.getOp() == OpId::LayerNormalizationGrad;
  if (Error E = checkAllFloat(A))
    return E;
  const Tensor &DY = A.In[0], &X = A.In[1], &Scale = A.In[2];
  if (DY.getShape() != X.getShape() ||
      DY.getElementType() != X.getElementType())
    return A.error("dY " + DY.getTypeString() + " and X " + X.getTypeString() +
                   " differ");
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  int64_t Len = getNumElements(X.getShape().drop_front(*Axis));
  int64_t Rows = getNumElements(X.getShape().take_front(*Axis));
  if (Scale.getNumElements() != Len)
    return A.error("scale " + Scale.getTypeString() +
                   " must have one value per normalised element (" +
                   Twine(Len) + ")");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (A.Out[0].getElementType() != X.getElementType())
    return A.error("dX " + A.Out[0].getTypeString() + " must have X's type");
  for (unsigned I = 1; I < A.Out.size(); ++I)
    if (A.hasResult(I)) {
      if (Error E = A.checkShape(I, Scale.getShape()))
        return E;
      if (A.Out[I].getElementType() != Scale.getElementType())
        return A.error("result " + Twine(I) + " " + A.Out[I].getTypeString() +
                       " must have the scale's type");
    }
  Scratch S(C);
  Expected<Tensor> Work =
      S.get(A, ElementType::F64,
            {std::max<int64_t>(normGradWorkDoubles(Rows, Len), 1)});
  if (!Work)
    return Work.takeError();
  return launched(
      A, normGrad(Centered, dt(X), DY.getData(), X.getData(), dt(Scale),
                  Scale.getData(), A.Out[0].getData(),
                  A.hasResult(1) ? A.Out[1].getData() : nullptr,
                  Centered && A.hasResult(2) ? A.Out[2].getData() : nullptr,
                  Rows, Len, A.floatAttr("epsilon", 1e-5), Work->data<double>(),
                  C.getStream()));
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

namespace {

/// Row-major C = Alpha op(A) op(B) + Beta C, Batch times at the given
/// element strides (0: the same matrix for every batch).
struct GemmCall {
  bool TransA = false, TransB = false;
  int64_t M = 0, N = 0, K = 0;
  float Alpha = 1, Beta = 0;
  const void *A = nullptr, *B = nullptr;
  void *C = nullptr;
  int64_t Batch = 1, StrideA = 0, StrideB = 0, StrideC = 0;
};

} // namespace

static Expected<cudaDataType_t> gemmType(const KernelArgs &A, const Tensor &T) {
  switch (T.getElementType()) {
  case ElementType::F32:
    return CUDA_R_32F;
  case ElementType::F16:
    return CUDA_R_16F;
  case ElementType::BF16:
    return CUDA_R_16BF;
  default:
    return typeError(A, "a GEMM operand", T, "f32, f16, bf16");
  }
}

/// Runs G (operands of type T) through cuBLAS: row-major C = op(A) op(B)
/// is column-major C^T = op(B)^T op(A)^T, so B goes first.
static Error runGemmCall(const KernelArgs &A, CudaContext &C, const Tensor &T,
                         const GemmCall &G) {
  if (G.M == 0 || G.N == 0 || G.Batch == 0)
    return Error::success();
  for (int64_t D : {G.M, G.N, G.K, G.Batch})
    if (D > INT32_MAX)
      return A.error("a GEMM dimension of " + Twine(D) +
                     " exceeds what cuBLAS takes");
  Expected<cudaDataType_t> Type = gemmType(A, T);
  if (!Type)
    return Type.takeError();
  cublasComputeType_t Compute = *Type == CUDA_R_32F && C.allowTF32()
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  int LdA = int(std::max<int64_t>(G.TransA ? G.M : G.K, 1));
  int LdB = int(std::max<int64_t>(G.TransB ? G.K : G.N, 1));
  int LdC = int(G.N);
  cublasOperation_t OpA = G.TransA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t OpB = G.TransB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasHandle_t H = C.getCublas();
  if (cublasStatus_t S = cublasSetStream(H, C.getStream()))
    return cublasNodeError(A, S, "cublasSetStream");
  cublasStatus_t S;
  if (G.Batch == 1)
    S = cublasGemmEx(H, OpB, OpA, int(G.N), int(G.M), int(G.K), &G.Alpha, G.B,
                     *Type, LdB, G.A, *Type, LdA, &G.Beta, G.C, *Type, LdC,
                     Compute, CUBLAS_GEMM_DEFAULT);
  else
    S = cublasGemmStridedBatchedEx(
        H, OpB, OpA, int(G.N), int(G.M), int(G.K), &G.Alpha, G.B, *Type, LdB,
        G.StrideB, G.A, *Type, LdA, G.StrideA, &G.Beta, G.C, *Type, LdC,
        G.StrideC, int(G.Batch), Compute, CUBLAS_GEMM_DEFAULT);
  if (S != CUBLAS_STATUS_SUCCESS)
    return cublasNodeError(A, S, "cuBLAS GEMM");
  return Error::success();
}

static Error checkGemmTypes(const KernelArgs &A) {
  ElementType T = A.Out[0].getElementType();
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (A.has(I) && A.In[I].getElementType() != T)
      return A.error("operand " + Twine(I) + " " + A.In[I].getTypeString() +
                     " and the result " + A.Out[0].getTypeString() +
                     " differ in type; the CUDA GEMMs take one type");
  return Error::success();
}

static Error runMatMul(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  if (X.getRank() == 0 || W.getRank() == 0)
    return A.error("operands must have rank 1 or more");
  Shape XS = toShape(X.getShape()), WS = toShape(W.getShape());
  bool VectorX = XS.size() == 1, VectorW = WS.size() == 1;
  if (VectorX)
    XS.insert(XS.begin(), 1);
  if (VectorW)
    WS.push_back(1);
  int64_t M = XS[XS.size() - 2], K = XS.back(), N = WS.back();
  if (WS[WS.size() - 2] != K)
    return A.error("contracting dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " differ");
  ArrayRef<int64_t> XBatch = ArrayRef<int64_t>(XS).drop_back(2);
  ArrayRef<int64_t> WBatch = ArrayRef<int64_t>(WS).drop_back(2);
  std::optional<Shape> Batch = broadcastShapes({XBatch, WBatch});
  if (!Batch)
    return A.error("batch dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " do not broadcast");
  Shape Out(*Batch);
  if (!VectorX)
    Out.push_back(M);
  if (!VectorW)
    Out.push_back(N);
  if (Error E = A.checkShape(0, Out))
    return E;
  int64_t Count = getNumElements(*Batch);
  int64_t XCount = getNumElements(XBatch), WCount = getNumElements(WBatch);
  GemmCall G;
  G.M = M;
  G.N = N;
  G.K = K;
  G.A = X.getData();
  G.B = W.getData();
  G.C = Y.getData();
  if (WCount == 1 && XCount == Count) {
    G.M = Count * M; // One GEMM over all rows of X.
    return runGemmCall(A, C, Y, G);
  }
  if ((XCount == Count || XCount == 1) && (WCount == Count || WCount == 1)) {
    G.Batch = Count;
    G.StrideA = XCount == 1 ? 0 : M * K;
    G.StrideB = WCount == 1 ? 0 : K * N;
    G.StrideC = M * N;
    return runGemmCall(A, C, Y, G);
  }
  // Partial broadcasts: one GEMM per batch.
  size_t Size = getElementSize(Y.getElementType());
  StridedWalk Walk(*Batch, {getBroadcastStrides(XBatch, *Batch),
                            getBroadcastStrides(WBatch, *Batch)});
  for (int64_t I = 0; I != Count; ++I, Walk.next()) {
    G.A = X.data<char>() + Walk.offset(0) * M * K * Size;
    G.B = W.data<char>() + Walk.offset(1) * K * N * Size;
    G.C = Y.data<char>() + I * M * N * Size;
    if (Error E = runGemmCall(A, C, Y, G))
      return E;
  }
  return Error::success();
}

static Error runLinear(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  if (X.getRank() == 0 || W.getRank() != 2 ||
      W.getDim(0) != X.getShape().back())
    return A.error("X " + X.getTypeString() + " and W " + W.getTypeString() +
                   " must be [..., K] and [K, N]");
  int64_t K = W.getDim(0), N = W.getDim(1);
  if (A.has(2) && A.In[2].getShape() != ArrayRef<int64_t>{N})
    return A.error("B " + A.In[2].getTypeString() + " must be [" + Twine(N) +
                   "]");
  Shape Out = toShape(X.getShape().drop_back());
  Out.push_back(N);
  if (Error E = A.checkShape(0, Out))
    return E;
  int64_t Rows = getNumElements(X.getShape().drop_back());
  GemmCall G;
  G.M = Rows;
  G.N = N;
  G.K = K;
  G.A = X.getData();
  G.B = W.getData();
  G.C = Y.getData();
  if (A.has(2)) {
    // The bias in every row, then accumulate onto it.
    Dims D;
    D.Rank = 2;
    D.Size[0] = Rows;
    D.Size[1] = N;
    Strides Dst, Src;
    Dst.S[0] = N;
    Dst.S[1] = 1;
    Src.S[1] = 1;
    if (Error E = launched(
            A, copyStrided(Y.getData(), 0, Dst, A.In[2].getData(), 0, Src, D,
                           int(getElementSize(Y.getElementType())),
                           C.getStream())))
      return E;
    G.Beta = 1;
  }
  return runGemmCall(A, C, Y, G);
}

static Error runGemm(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  if (X.getRank() != 2 || W.getRank() != 2)
    return A.error("A and B must have rank 2");
  GemmCall G;
  G.TransA = A.intAttr("transA", 0);
  G.TransB = A.intAttr("transB", 0);
  G.Alpha = float(A.floatAttr("alpha", 1.0));
  float Beta = float(A.floatAttr("beta", 1.0));
  G.M = X.getDim(G.TransA ? 1 : 0);
  G.K = X.getDim(G.TransA ? 0 : 1);
  G.N = W.getDim(G.TransB ? 0 : 1);
  if (W.getDim(G.TransB ? 1 : 0) != G.K)
    return A.error("contracting dimensions of " + X.getTypeString() + " and " +
                   W.getTypeString() + " differ");
  if (Error E = A.checkShape(0, {G.M, G.N}))
    return E;
  G.A = X.getData();
  G.B = W.getData();
  G.C = Y.getData();
  if (A.has(2)) {
    const Tensor &CT = A.In[2];
    Shape Target{G.M, G.N};
    std::optional<Shape> Joint = broadcastShapes({CT.getShape(), Target});
    if (CT.getRank() > 2 || !Joint || *Joint != Target)
      return A.error("C " + CT.getTypeString() + " does not broadcast to [" +
                     Twine(G.M) + ", " + Twine(G.N) + "]");
    Expected<Dims> D = makeDims(A, Target);
    if (!D)
      return D.takeError();
    if (Error E = launched(
            A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Target)),
                           CT.getData(), 0, broadcastTo(CT.getShape(), Target),
                           *D, int(getElementSize(Y.getElementType())),
                           C.getStream())))
      return E;
    if (Beta != 1)
      if (Error E = launched(A, scale(dt(Y), Y.getData(), dt(Y), Y.getData(),
                                      Y.getNumElements(), Beta, C.getStream())))
        return E;
    G.Beta = 1;
  }
  return runGemmCall(A, C, Y, G);
}

//===----------------------------------------------------------------------===//
// Layouts, slices, gathers
//===----------------------------------------------------------------------===//

static Error runReshapeLike(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Y.getNumElements() != X.getNumElements())
    return A.error("cannot reshape " + X.getTypeString() + " to " +
                   Y.getTypeString());
  if (Y.getElementType() != X.getElementType())
    return A.error("the result " + Y.getTypeString() +
                   " must have the type of " + X.getTypeString());
  return copyDevice(A, C, Y, X);
}

static Error runDropout(const KernelArgs &A, CudaContext &C) {
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
      return A.error("training-mode Dropout has no CUDA kernel");
  }
  const Tensor &X = A.In[0];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Error E = copyDevice(A, C, A.Out[0], X))
    return E;
  if (A.hasResult(1)) {
    if (Error E = A.checkShape(1, X.getShape()))
      return E;
    if (A.Out[1].getElementType() != ElementType::Bool)
      return typeError(A, "result 1", A.Out[1], "bool");
    if (X.getNumElements())
      return launched(A, cudaMemsetAsync(A.Out[1].getData(), 1,
                                         size_t(X.getNumElements()),
                                         C.getStream()));
  }
  return Error::success();
}

static Error runTranspose(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  unsigned Rank = X.getRank();
  Shape Perm;
  if (const Attribute *P = A.attr("perm"))
    Perm.assign(P->getIntList().begin(), P->getIntList().end());
  else
    for (unsigned I = 0; I != Rank; ++I)
      Perm.push_back(Rank - 1 - I);
  if (Perm.size() != Rank)
    return A.error("'perm' has " + Twine(Perm.size()) + " entries for rank " +
                   Twine(Rank));
  SmallVector<bool, 4> Seen(Rank, false);
  Shape InStrides = getStrides(X.getShape()), Out, Strides;
  for (int64_t P : Perm) {
    if (P < 0 || P >= int64_t(Rank) || Seen[P])
      return A.error("'perm' is not a permutation");
    Seen[P] = true;
    Out.push_back(X.getDim(P));
    Strides.push_back(InStrides[P]);
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), 0, makeStrides(Strides), *D,
                                 int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

static Error runExpand(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  ArrayRef<int64_t> Out = Y.getShape();
  std::optional<Shape> Joint = broadcastShapes({X.getShape(), Out});
  if (!Joint || ArrayRef<int64_t>(*Joint) != Out)
    return A.error(X.getTypeString() + " does not broadcast to " +
                   Y.getTypeString());
  if (Y.getElementType() != X.getElementType())
    return A.error("the result " + Y.getTypeString() +
                   " must have the type of " + X.getTypeString());
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), 0, broadcastTo(X.getShape(), Out),
                                 *D, int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

static Error runConcat(const KernelArgs &A, CudaContext &C) {
  const Tensor &First = A.In[0], &Y = A.Out[0];
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", 0), First.getRank());
  if (!Axis)
    return Axis.takeError();
  Shape Out = toShape(First.getShape());
  Out[*Axis] = 0;
  for (const Tensor &X : A.In) {
    bool Fits = X.getRank() == First.getRank() &&
                X.getElementType() == First.getElementType();
    for (unsigned D = 0; Fits && D != X.getRank(); ++D)
      Fits = D == *Axis || X.getDim(D) == First.getDim(D);
    if (!Fits)
      return A.error("operands " + First.getTypeString() + " and " +
                     X.getTypeString() + " do not concatenate along axis " +
                     Twine(*Axis));
    Out[*Axis] += X.getDim(*Axis);
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  Strides OutStrides = makeStrides(getStrides(Out));
  int64_t At = 0;
  for (const Tensor &X : A.In) {
    Expected<Dims> D = makeDims(A, X.getShape());
    if (!D)
      return D.takeError();
    if (Error E = launched(
            A, copyStrided(
                   Y.getData(), At * OutStrides.S[*Axis], OutStrides,
                   X.getData(), 0, makeStrides(getStrides(X.getShape())), *D,
                   int(getElementSize(X.getElementType())), C.getStream())))
      return E;
    At += X.getDim(*Axis);
  }
  return Error::success();
}

static Error runSplit(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 0), X.getRank());
  if (!Axis)
    return Axis.takeError();
  // The sizes are the results' (the program's types); they must tile the
  // dimension.
  int64_t Sum = 0;
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    Shape Want = toShape(X.getShape());
    Want[*Axis] =
        A.Out[I].getRank() == X.getRank() ? A.Out[I].getDim(*Axis) : -1;
    if (Error E = A.checkShape(I, Want))
      return E;
    if (A.Out[I].getElementType() != X.getElementType())
      return A.error("result " + Twine(I) + " must have the type of " +
                     X.getTypeString());
    Sum += Want[*Axis];
  }
  if (Sum != X.getDim(*Axis))
    return A.error("the results' sizes along axis " + Twine(*Axis) +
                   " sum to " + Twine(Sum) + ", not " + Twine(X.getDim(*Axis)));
  Strides InStrides = makeStrides(getStrides(X.getShape()));
  int64_t At = 0;
  for (const Tensor &Y : A.Out) {
    Expected<Dims> D = makeDims(A, Y.getShape());
    if (!D)
      return D.takeError();
    if (Error E = launched(
            A, copyStrided(
                   Y.getData(), 0, makeStrides(getStrides(Y.getShape())),
                   X.getData(), At * InStrides.S[*Axis], InStrides, *D,
                   int(getElementSize(X.getElementType())), C.getStream())))
      return E;
    At += Y.getDim(*Axis);
  }
  return Error::success();
}

static Error runSlice(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  unsigned Rank = X.getRank();
  Expected<Shape> Starts = readIntOperand(A, C, 1);
  if (!Starts)
    return Starts.takeError();
  Expected<Shape> Ends = readIntOperand(A, C, 2);
  if (!Ends)
    return Ends.takeError();
  Shape Axes, Steps(Starts->size(), 1);
  if (A.has(3)) {
    Expected<Shape> Given = readIntOperand(A, C, 3);
    if (!Given)
      return Given.takeError();
    Axes = std::move(*Given);
  } else {
    for (unsigned I = 0; I != Starts->size(); ++I)
      Axes.push_back(I);
  }
  if (A.has(4)) {
    Expected<Shape> Given = readIntOperand(A, C, 4);
    if (!Given)
      return Given.takeError();
    Steps = std::move(*Given);
  }
  if (Ends->size() != Starts->size() || Axes.size() != Starts->size() ||
      Steps.size() != Starts->size())
    return A.error("starts, ends, axes and steps have different lengths");
  Shape Out = toShape(X.getShape()), InStrides = getStrides(X.getShape());
  Shape StridesOut(InStrides);
  SmallVector<bool, 4> Seen(Rank, false);
  int64_t Base = 0;
  for (size_t I = 0; I != Axes.size(); ++I) {
    Expected<unsigned> D = A.normalizeAxis(Axes[I], Rank);
    if (!D)
      return D.takeError();
    if (Seen[*D])
      return A.error("axis " + Twine(Axes[I]) + " is repeated");
    Seen[*D] = true;
    int64_t Dim = X.getDim(*D), Step = Steps[I];
    if (Step == 0 || Step == INT64_MIN)
      return A.error("a step is " + Twine(Step));
    int64_t Start = (*Starts)[I], End = (*Ends)[I];
    if (Start < 0)
      Start += Dim;
    if (End < 0)
      End += Dim;
    int64_t Count;
    if (Dim == 0) {
      Count = 0;
    } else if (Step > 0) {
      Start = std::clamp<int64_t>(Start, 0, Dim);
      End = std::clamp<int64_t>(End, 0, Dim);
      Count = End > Start ? (End - Start - 1) / Step + 1 : 0;
    } else {
      Start = std::clamp<int64_t>(Start, 0, Dim - 1);
      End = std::clamp<int64_t>(End, -1, Dim - 1);
      Count = Start > End ? (Start - End - 1) / -Step + 1 : 0;
    }
    Out[*D] = Count;
    if (Count) {
      Base += Start * InStrides[*D];
      StridesOut[*D] = InStrides[*D] * Step;
    }
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Y.getElementType() != X.getElementType())
    return A.error("the result must have the type of " + X.getTypeString());
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), Base, makeStrides(StridesOut), *D,
                                 int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

static bool isSplitForm(const KernelArgs &A) {
  return A.attr("mesh_axis") != nullptr;
}

static Error runGather(const KernelArgs &A, CudaContext &C) {
  if (isSplitForm(A))
    return A.error("the vocabulary-parallel form (mesh_axis) has no CUDA "
                   "kernel yet");
  const Tensor &X = A.In[0], &Indices = A.In[1], &Y = A.Out[0];
  if (Error E = checkIndexType(A, 1))
    return E;
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 0), X.getRank());
  if (!Axis)
    return Axis.takeError();
  Shape Out = toShape(X.getShape().take_front(*Axis));
  Out.append(Indices.getShape().begin(), Indices.getShape().end());
  Out.append(X.getShape().begin() + *Axis + 1, X.getShape().end());
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Y.getElementType() != X.getElementType())
    return A.error("the result must have the type of " + X.getTypeString());
  int64_t Len = X.getDim(*Axis);
  int Code = C.getErrorCode(A.N, "an index is out of range for dimension " +
                                     Twine(*Axis) + " of size " + Twine(Len));
  return launched(A, gather(X.getData(), Indices.getData(),
                            Indices.getElementType() == ElementType::I64,
                            Y.getData(),
                            getNumElements(X.getShape().take_front(*Axis)), Len,
                            Indices.getNumElements(),
                            getNumElements(X.getShape().drop_front(*Axis + 1)) *
                                int64_t(getElementSize(X.getElementType())),
                            C.getErrorWord(), Code, C.getStream()));
}

static Error runGatherGrad(const KernelArgs &A, CudaContext &C) {
  if (isSplitForm(A))
    return A.error("the vocabulary-parallel form (mesh_axis) has no CUDA "
                   "kernel yet");
  const Tensor &Data = A.In[0], &Idx = A.In[1], &DY = A.In[2], &Out = A.Out[0];
  if (Error E = checkIndexType(A, 1))
    return E;
  for (unsigned I : {0u, 2u})
    if (Error E = checkFloat(A, I))
      return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", 0), Data.getRank());
  if (!Axis)
    return Axis.takeError();
  if (Error E = A.checkShape(0, Data.getShape()))
    return E;
  int64_t Outer = getNumElements(Data.getShape().take_front(*Axis));
  int64_t Len = Data.getDim(*Axis);
  int64_t Inner = getNumElements(Data.getShape().drop_front(*Axis + 1));
  int64_t Count = Idx.getNumElements();
  if (DY.getNumElements() != Outer * Count * Inner)
    return A.error("dY " + DY.getTypeString() +
                   " is not the shape of Gather(data, indices)");
  Scratch S(C);
  Tensor Sums = Out;
  if (Out.getElementType() != ElementType::F32) {
    Expected<Tensor> T = S.get(A, ElementType::F32, Out.getShape());
    if (!T)
      return T.takeError();
    Sums = *T;
  }
  int Code = C.getErrorCode(A.N, "an index is outside [0, " + Twine(Len) + ")");
  if (Error E = launched(
          A, gatherGrad(Idx.getData(), Idx.getElementType() == ElementType::I64,
                        dt(DY), DY.getData(), Sums.data<float>(), Outer, Len,
                        Count, Inner, C.getErrorWord(), Code, C.getStream())))
    return E;
  if (Sums.getData() == Out.getData())
    return Error::success();
  return launched(A, cast(DType::F32, Sums.getData(), dt(Out), Out.getData(),
                          Out.getNumElements(), C.getStream()));
}

//===----------------------------------------------------------------------===//
// Reductions, casts, the loss, optimizers
//===----------------------------------------------------------------------===//

static Error runReduce(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0];
  if (Error E = checkFloat(A, 0))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  std::optional<Shape> Axes;
  if (const Attribute *Attr = A.attr("axes")) {
    Axes = toShape(Attr->getIntList());
  } else if (A.has(1)) {
    Expected<Shape> Given = readIntOperand(A, C, 1);
    if (!Given)
      return Given.takeError();
    Axes = std::move(*Given);
  }
  unsigned Rank = X.getRank();
  bool Empty = !Axes || Axes->empty();
  if (Empty && A.intAttr("noop_with_empty_axes", 0)) {
    if (Error E = A.checkShape(0, X.getShape()))
      return E;
    if (X.getElementType() == A.Out[0].getElementType())
      return copyDevice(A, C, A.Out[0], X);
    return launched(A,
                    cast(dt(X), X.getData(), dt(A.Out[0]), A.Out[0].getData(),
                         X.getNumElements(), C.getStream()));
  }
  SmallVector<bool, 4> Reduced(Rank, Empty);
  if (!Empty)
    for (int64_t Axis : *Axes) {
      Expected<unsigned> D = A.normalizeAxis(Axis, Rank);
      if (!D)
        return D.takeError();
      Reduced[*D] = true;
    }
  Shape Kept, Red, Out;
  bool KeepDims = A.intAttr("keepdims", 1);
  for (unsigned D = 0; D != Rank; ++D) {
    Kept.push_back(Reduced[D] ? 1 : X.getDim(D));
    Red.push_back(Reduced[D] ? X.getDim(D) : 1);
    if (!Reduced[D] || KeepDims)
      Out.push_back(Kept.back());
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  Expected<Dims> KD = makeDims(A, Kept);
  if (!KD)
    return KD.takeError();
  Expected<Dims> RD = makeDims(A, Red);
  if (!RD)
    return RD.takeError();
  Strides In = makeStrides(getStrides(X.getShape()));
  ReduceOp Op = A.N.getOp() == OpId::ReduceMax    ? ReduceOp::Max
                : A.N.getOp() == OpId::ReduceMean ? ReduceOp::Mean
                                                  : ReduceOp::Sum;
  bool InnerKept = Rank > 0 && !Reduced[Rank - 1] && X.getDim(Rank - 1) > 1;
  Scratch S(C);
  double *Work = nullptr;
  int64_t WorkDoubles =
      reduceWorkDoubles(getNumElements(Kept), getNumElements(Red), InnerKept);
  if (WorkDoubles > 0) {
    Expected<Tensor> T = S.get(A, ElementType::F64, {WorkDoubles});
    if (!T)
      return T.takeError();
    Work = T->data<double>();
  }
  return launched(A, reduce(Op, dt(X), X.getData(), dt(A.Out[0]),
                            A.Out[0].getData(), *KD, In, *RD, In, InnerKept,
                            Work, C.getStream()));
}

static Error runCast(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  std::optional<ElementType> To = parseElementTypeName(A.stringAttr("to", ""));
  if (!To)
    return A.error("'to' is not an element type");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Y.getElementType() != *To)
    return A.error("the result " + Y.getTypeString() + " is not of type '" +
                   getElementTypeName(*To) + "'");
  if (X.getElementType() == *To)
    return copyDevice(A, C, Y, X);
  if (!toDType(X.getElementType()) || !toDType(*To))
    return A.error("casts from or to f8e4m3 have no CUDA kernel");
  return launched(A, cast(dt(X), X.getData(), dt(Y), Y.getData(),
                          X.getNumElements(), C.getStream()));
}

namespace {
struct LossShape {
  int64_t Rows = 0, Classes = 0, Ignore = -100;
  bool Mean = true;
};
} // namespace

static Expected<LossShape> getLossShape(const KernelArgs &A, unsigned Logits,
                                        unsigned Labels) {
  if (isSplitForm(A))
    return A.error("the vocabulary-parallel form (mesh_axis) has no CUDA "
                   "kernel yet");
  if (Error E = checkFloat(A, Logits))
    return E;
  if (Error E = checkIndexType(A, Labels))
    return E;
  const Tensor &Z = A.In[Logits], &Y = A.In[Labels];
  if (Z.getRank() == 0 || Y.getShape() != Z.getShape().drop_back())
    return A.error("labels " + Y.getTypeString() +
                   " must have the leading dimensions of logits " +
                   Z.getTypeString());
  LossShape L;
  L.Classes = Z.getShape().back();
  L.Rows = Y.getNumElements();
  L.Ignore = A.intAttr("ignore_index", -100);
  L.Mean = A.stringAttr("reduction", "mean") == "mean";
  return L;
}

static Error runCrossEntropyLoss(const KernelArgs &A, CudaContext &C) {
  Expected<LossShape> L = getLossShape(A, 0, 1);
  if (!L)
    return L.takeError();
  if (Error E = A.checkShape(0, {}))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Scratch S(C);
  Expected<Tensor> Work =
      S.get(A, ElementType::F64, {std::max<int64_t>(L->Rows, 1)});
  if (!Work)
    return Work.takeError();
  int Code =
      C.getErrorCode(A.N, "a label is outside [0, " + Twine(L->Classes) + ")");
  const Tensor &Labels = A.In[1];
  return launched(
      A, crossEntropy(dt(A.In[0]), A.In[0].getData(), Labels.getData(),
                      Labels.getElementType() == ElementType::I64, dt(A.Out[0]),
                      A.Out[0].getData(), L->Rows, L->Classes, L->Ignore,
                      L->Mean, Work->data<double>(), C.getErrorWord(), Code,
                      C.getStream()));
}

static Error runCrossEntropyLossGrad(const KernelArgs &A, CudaContext &C) {
  Expected<LossShape> L = getLossShape(A, 1, 2);
  if (!L)
    return L.takeError();
  if (!isCudaFloat(A.In[0].getElementType()) || A.In[0].getNumElements() != 1)
    return typeError(A, "operand 0", A.In[0], "one float");
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Scratch S(C);
  Expected<Tensor> Work = S.get(A, ElementType::F64, {1});
  if (!Work)
    return Work.takeError();
  int Code =
      C.getErrorCode(A.N, "a label is outside [0, " + Twine(L->Classes) + ")");
  const Tensor &Labels = A.In[2];
  return launched(
      A, crossEntropyGrad(dt(A.In[0]), A.In[0].getData(), dt(A.In[1]),
                          A.In[1].getData(), Labels.getData(),
                          Labels.getElementType() == ElementType::I64,
                          dt(A.Out[0]), A.Out[0].getData(), L->Rows, L->Classes,
                          L->Ignore, L->Mean, Work->data<double>(),
                          C.getErrorWord(), Code, C.getStream()));
}

static Error checkParamLike(const KernelArgs &A,
                            std::initializer_list<unsigned> Operands) {
  for (unsigned I : Operands) {
    if (Error E = checkFloat(A, I))
      return E;
    if (A.In[I].getShape() != A.In[0].getShape())
      return A.error("operand " + Twine(I) + " " + A.In[I].getTypeString() +
                     " does not match the parameter " +
                     A.In[0].getTypeString());
  }
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
    // The executor gives the updated parameters' own buffers.
    if (A.Out[I].getElementType() != A.In[I == 0 ? 0 : I + 1].getElementType())
      return A.error("result " + Twine(I) +
                     " must have the type of the "
                     "state it updates");
  }
  return Error::success();
}

static Error checkScalars(const KernelArgs &A, unsigned From, unsigned To) {
  for (unsigned I = From; I != To; ++I)
    if (!A.has(I) || A.In[I].getElementType() != ElementType::F32 ||
        A.In[I].getNumElements() != 1)
      return A.error("operand " + Twine(I) + " must be one f32");
  return Error::success();
}

static Error runAdamW(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkParamLike(A, {0, 1, 2, 3}))
    return E;
  if (Error E = checkScalars(A, 4, 10))
    return E;
  // The step is a graph input; its host copy says whether it is valid.
  Expected<std::vector<uint8_t>> Step = C.readToHost(A.In[9]);
  if (!Step)
    return A.error(toString(Step.takeError()));
  float StepValue;
  std::memcpy(&StepValue, Step->data(), 4);
  if (StepValue < 1)
    return A.error("step must be 1 or more, got " + Twine(int64_t(StepValue)));
  AdamWScalars S{A.In[4].data<float>(), A.In[5].data<float>(),
                 A.In[6].data<float>(), A.In[7].data<float>(),
                 A.In[8].data<float>(), A.In[9].data<float>()};
  // In place on the results (the executor gives them the parameter's and
  // the moments' own buffers).
  for (unsigned I = 0; I != 3; ++I)
    if (Error E = copyDevice(A, C, A.Out[I], A.In[I == 0 ? 0 : I + 1]))
      return E;
  return launched(A, adamw(dt(A.Out[0]), A.Out[0].getData(), dt(A.In[1]),
                           A.In[1].getData(), dt(A.Out[1]), A.Out[1].getData(),
                           dt(A.Out[2]), A.Out[2].getData(),
                           A.In[0].getNumElements(), S, C.getStream()));
}

static Error runSgd(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkParamLike(A, {0, 1}))
    return E;
  if (Error E = checkScalars(A, 2, 4))
    return E;
  if (Error E = copyDevice(A, C, A.Out[0], A.In[0]))
    return E;
  return launched(A, sgd(dt(A.Out[0]), A.Out[0].getData(), dt(A.In[1]),
                         A.In[1].getData(), A.In[0].getNumElements(),
                         A.In[2].data<float>(), A.In[3].data<float>(),
                         C.getStream()));
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

using CudaKernelFn = Error (*)(const KernelArgs &, CudaContext &);

static CudaKernelFn lookup(OpId Op) {
  if (getBinaryOp(Op))
    return runBinary;
  switch (Op) {
  case OpId::Sum:
    return runSum;
  case OpId::Where:
    return runWhere;
  case OpId::Trilu:
    return runTrilu;
  case OpId::Neg:
  case OpId::Abs:
  case OpId::Sqrt:
  case OpId::Reciprocal:
  case OpId::Exp:
  case OpId::Log:
  case OpId::Tanh:
  case OpId::Erf:
  case OpId::Sigmoid:
  case OpId::Relu:
  case OpId::LeakyRelu:
  case OpId::Not:
  case OpId::Gelu:
  case OpId::Silu:
    return runUnary;
  case OpId::SwiGLU:
    return runSwiGLU;
  case OpId::GeluGrad:
  case OpId::SiluGrad:
  case OpId::SwiGLUGrad:
    return runActivationGrad;
  case OpId::Softmax:
  case OpId::LogSoftmax:
    return runSoftmax;
  case OpId::SoftmaxGrad:
    return runSoftmaxGrad;
  case OpId::LayerNormalization:
  case OpId::RMSNormalization:
    return runNorm;
  case OpId::LayerNormalizationGrad:
  case OpId::RMSNormalizationGrad:
    return runNormGrad;
  case OpId::MatMul:
    return runMatMul;
  case OpId::Linear:
    return runLinear;
  case OpId::Gemm:
    return runGemm;
  case OpId::Reshape:
  case OpId::Flatten:
  case OpId::Squeeze:
  case OpId::Unsqueeze:
  case OpId::Identity:
    return runReshapeLike;
  case OpId::Dropout:
    return runDropout;
  case OpId::Transpose:
    return runTranspose;
  case OpId::Expand:
    return runExpand;
  case OpId::Concat:
    return runConcat;
  case OpId::Split:
    return runSplit;
  case OpId::Slice:
    return runSlice;
  case OpId::Gather:
    return runGather;
  case OpId::GatherGrad:
    return runGatherGrad;
  case OpId::ReduceSum:
  case OpId::ReduceMean:
  case OpId::ReduceMax:
    return runReduce;
  case OpId::Cast:
    return runCast;
  case OpId::CrossEntropyLoss:
    return runCrossEntropyLoss;
  case OpId::CrossEntropyLossGrad:
    return runCrossEntropyLossGrad;
  case OpId::AdamW:
    return runAdamW;
  case OpId::Sgd:
    return runSgd;
  default:
    return nullptr;
  }
}

bool autopar::hasCudaKernel(OpId Op) { return lookup(Op) != nullptr; }

Error autopar::runCudaKernel(const KernelArgs &A, CudaContext &C) {
  CudaKernelFn Fn = lookup(A.N.getOp());
  if (!Fn)
    return A.error("no CUDA kernel");
  for (const Tensor &T : A.In)
    if (T.isPresent() && !toDType(T.getElementType()))
      return typeError(A, "an operand", T, "no f8e4m3");
  for (const Tensor &T : A.Out)
    if (T.isPresent() && !toDType(T.getElementType()))
      return typeError(A, "a result", T, "no f8e4m3");
  return Fn(A, C);
}
