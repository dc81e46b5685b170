//===- ElementwiseKernels.cu - Copies, elementwise ops, optimizers --------===//
//
// One thread per element in grid-stride loops. Floats compute in f32 as
// the CPU kernels do (which also compute in f32, except the activation
// gradients and the optimizer steps, which use f64 per element there and
// here).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <cmath>

namespace autopar {
namespace cuda {

namespace {

template <typename T, typename IdxT>
__global__ void copyStridedKernel(T *Dst, int64_t DstBase, Strides DS,
                                  const T *Src, int64_t SrcBase, Strides SS,
                                  Dims Shape, int64_t N) {
  const Strides *const Both[2] = {&DS, &SS};
  GRID_STRIDE(I, N) {
    int64_t O[2];
    offsetsOf<IdxT>(I, Shape, Both, O);
    Dst[DstBase + O[0]] = Src[SrcBase + O[1]];
  }
}

/// Index arithmetic in 32 bits when every flat index fits.
constexpr int64_t Max32 = 0xffffffffLL;

__device__ float sigmoidF(float X) {
  if (X >= 0)
    return 1.0f / (1.0f + expf(-X));
  float E = expf(X);
  return E / (1.0f + E);
}

/// log(1 + exp(x)) without overflow (the CPU kernel's).
__device__ float softplusF(float X) {
  return X > 0 ? X + log1pf(expf(-X)) : log1pf(expf(X));
}

__device__ float applyUnary(UnaryOp Op, float V, float Alpha, float Beta) {
  switch (Op) {
  case UnaryOp::Neg:
    return -V;
  case UnaryOp::Abs:
    return fabsf(V);
  case UnaryOp::Sqrt:
    return sqrtf(V);
  case UnaryOp::Reciprocal:
    return 1.0f / V;
  case UnaryOp::Exp:
    return expf(V);
  case UnaryOp::Log:
    return logf(V);
  case UnaryOp::Tanh:
    return tanhf(V);
  case UnaryOp::Erf:
    return erff(V);
  case UnaryOp::Sigmoid:
    return sigmoidF(V);
  case UnaryOp::Relu:
    return V < 0 ? 0.0f : V;
  case UnaryOp::LeakyRelu:
    return V < 0 ? Alpha * V : V;
  case UnaryOp::GeluErf:
    return 0.5f * V * (1.0f + erff(V * 0.7071067811865476f));
  case UnaryOp::GeluTanh:
    return 0.5f * V *
           (1.0f + tanhf(0.7978845608028654f * (V + 0.044715f * V * V * V)));
  case UnaryOp::Silu:
    return V * sigmoidF(V);
  case UnaryOp::Ceil:
    return ceilf(V);
  case UnaryOp::Floor:
    return floorf(V);
  case UnaryOp::Round:
    return rintf(V); // Half to even in the default rounding mode.
  case UnaryOp::Sign:
    return V > 0 ? 1.0f : V < 0 ? -1.0f : V == 0 ? 0.0f : V;
  case UnaryOp::Sin:
    return sinf(V);
  case UnaryOp::Cos:
    return cosf(V);
  case UnaryOp::Tan:
    return tanf(V);
  case UnaryOp::Asin:
    return asinf(V);
  case UnaryOp::Acos:
    return acosf(V);
  case UnaryOp::Atan:
    return atanf(V);
  case UnaryOp::Sinh:
    return sinhf(V);
  case UnaryOp::Cosh:
    return coshf(V);
  case UnaryOp::Asinh:
    return asinhf(V);
  case UnaryOp::Acosh:
    return acoshf(V);
  case UnaryOp::Atanh:
    return atanhf(V);
  case UnaryOp::Softplus:
    return softplusF(V);
  case UnaryOp::Softsign:
    return V / (1.0f + fabsf(V));
  case UnaryOp::Elu:
    return V < 0 ? Alpha * expm1f(V) : V;
  case UnaryOp::Selu:
    return Beta * (V > 0 ? V : Alpha * expf(V) - Alpha);
  case UnaryOp::Celu:
    return fmaxf(0.0f, V) + fminf(0.0f, Alpha * expm1f(V / Alpha));
  case UnaryOp::HardSigmoid:
    return fmaxf(0.0f, fminf(1.0f, Alpha * V + Beta));
  case UnaryOp::HardSwish:
    return V * fmaxf(0.0f, fminf(1.0f, V / 6.0f + 0.5f));
  case UnaryOp::Mish:
    return V * tanhf(softplusF(V));
  case UnaryOp::ThresholdedRelu:
    return V > Alpha ? V : 0.0f;
  case UnaryOp::Shrink:
    return V < -Beta ? V + Alpha : V > Beta ? V - Alpha : 0.0f;
  case UnaryOp::Clip: { // The CPU's std::min(std::max(V, Lo), Hi).
    float M = V < Alpha ? Alpha : V;
    return Beta < M ? Beta : M;
  }
  case UnaryOp::Not: // On bools, before any float (unaryKernel).
  case UnaryOp::IsNaN:
  case UnaryOp::IsInf:
    return V;
  }
  return V;
}

__global__ void unaryKernel(UnaryOp Op, float Alpha, float Beta, DType XT,
                            const void *X, DType YT, void *Y, int64_t N) {
  if (Op == UnaryOp::Not) {
    const uint8_t *XB = static_cast<const uint8_t *>(X);
    uint8_t *YB = static_cast<uint8_t *>(Y);
    GRID_STRIDE(I, N) { YB[I] = !XB[I]; }
    return;
  }
  if (Op == UnaryOp::IsNaN || Op == UnaryOp::IsInf) {
    uint8_t *YB = static_cast<uint8_t *>(Y);
    GRID_STRIDE(I, N) {
      float V = loadF(XT, X, I);
      YB[I] = Op == UnaryOp::IsNaN
                  ? isnan(V)
                  : isinf(V) && (V < 0 ? Alpha != 0 : Beta != 0);
    }
    return;
  }
  GRID_STRIDE(I, N) {
    storeF(YT, Y, I, applyUnary(Op, loadF(XT, X, I), Alpha, Beta));
  }
}

/// Min and Max with NaN propagating (numpy's minimum and maximum).
__device__ float extremumF(bool Max, float P, float Q) {
  if (isnan(P) || isnan(Q))
    return isnan(P) ? P : Q;
  return Max ? fmaxf(P, Q) : fminf(P, Q);
}

template <typename IdxT>
__global__ void binaryKernel(BinaryOp Op, DType XT, const void *X, Strides XS,
                             DType YT, const void *Y, Strides YS, DType ZT,
                             void *Z, Dims Shape, int64_t N) {
  const Strides *const Both[2] = {&XS, &YS};
  GRID_STRIDE(I, N) {
    int64_t O[2];
    offsetsOf<IdxT>(I, Shape, Both, O);
    int64_t XO = O[0], YO = O[1];
    if (Op == BinaryOp::And || Op == BinaryOp::Or || Op == BinaryOp::Xor) {
      uint8_t P = static_cast<const uint8_t *>(X)[XO];
      uint8_t Q = static_cast<const uint8_t *>(Y)[YO];
      static_cast<uint8_t *>(Z)[I] = Op == BinaryOp::And  ? (P && Q)
                                     : Op == BinaryOp::Or ? (P || Q)
                                                          : (!P != !Q);
      continue;
    }
    float P = loadF(XT, X, XO), Q = loadF(YT, Y, YO);
    switch (Op) {
    case BinaryOp::Add:
      storeF(ZT, Z, I, P + Q);
      break;
    case BinaryOp::Sub:
      storeF(ZT, Z, I, P - Q);
      break;
    case BinaryOp::Mul:
      storeF(ZT, Z, I, P * Q);
      break;
    case BinaryOp::Div:
      storeF(ZT, Z, I, P / Q);
      break;
    case BinaryOp::Pow:
      storeF(ZT, Z, I, Q == 2.0f ? P * P : powf(P, Q));
      break;
    case BinaryOp::Equal:
      static_cast<uint8_t *>(Z)[I] = P == Q;
      break;
    case BinaryOp::Less:
      static_cast<uint8_t *>(Z)[I] = P < Q;
      break;
    case BinaryOp::Greater:
      static_cast<uint8_t *>(Z)[I] = P > Q;
      break;
    case BinaryOp::GreaterOrEqual:
      static_cast<uint8_t *>(Z)[I] = P >= Q;
      break;
    case BinaryOp::LessOrEqual:
      static_cast<uint8_t *>(Z)[I] = P <= Q;
      break;
    case BinaryOp::Min:
    case BinaryOp::Max:
      storeF(ZT, Z, I, extremumF(Op == BinaryOp::Max, P, Q));
      break;
    case BinaryOp::Fmod:
      storeF(ZT, Z, I, fmodf(P, Q));
      break;
    case BinaryOp::PRelu:
      storeF(ZT, Z, I, P < 0 ? Q * P : P);
      break;
    case BinaryOp::And: // On bools, before any float (above).
    case BinaryOp::Or:
    case BinaryOp::Xor:
      break;
    }
  }
}

/// The same for contiguous operands of one float type: no index math.
__global__ void binaryContiguousKernel(BinaryOp Op, DType T, const void *X,
                                       const void *Y, void *Z, int64_t N) {
  GRID_STRIDE(I, N) {
    float P = loadF(T, X, I), Q = loadF(T, Y, I), R;
    switch (Op) {
    case BinaryOp::Add:
      R = P + Q;
      break;
    case BinaryOp::Sub:
      R = P - Q;
      break;
    case BinaryOp::Mul:
      R = P * Q;
      break;
    case BinaryOp::Div:
      R = P / Q;
      break;
    case BinaryOp::Pow: // binary() runs only Add to Div here.
    case BinaryOp::Equal:
    case BinaryOp::Less:
    case BinaryOp::Greater:
    case BinaryOp::And:
    case BinaryOp::Or:
    case BinaryOp::Min:
    case BinaryOp::Max:
    case BinaryOp::Fmod:
    case BinaryOp::GreaterOrEqual:
    case BinaryOp::LessOrEqual:
    case BinaryOp::Xor:
    case BinaryOp::PRelu:
      R = 0;
      break;
    }
    storeF(T, Z, I, R);
  }
}

template <typename T, typename IdxT>
__global__ void whereKernel(const uint8_t *C, Strides CS, const T *X,
                            Strides XS, const T *Y, Strides YS, T *Z,
                            Dims Shape, int64_t N) {
  const Strides *const All[3] = {&CS, &XS, &YS};
  GRID_STRIDE(I, N) {
    int64_t O[3];
    offsetsOf<IdxT>(I, Shape, All, O);
    Z[I] = C[O[0]] ? X[O[1]] : Y[O[2]];
  }
}

template <typename T>
__global__ void triluKernel(const T *X, T *Y, int64_t N, int64_t Rows,
                            int64_t Cols, int64_t K, bool Upper) {
  GRID_STRIDE(I, N) {
    int64_t Row = I / Cols % Rows, Col = I % Cols;
    bool Keep = Upper ? Col - Row >= K : Col - Row <= K;
    Y[I] = Keep ? X[I] : T(0);
  }
}

__device__ bool isFloat(DType T) {
  return T == DType::F32 || T == DType::F16 || T == DType::BF16 ||
         T == DType::F64;
}

__device__ int64_t loadInt(DType T, const void *P, int64_t I) {
  switch (T) {
  case DType::I64:
    return static_cast<const int64_t *>(P)[I];
  case DType::I32:
    return static_cast<const int32_t *>(P)[I];
  case DType::I8:
    return static_cast<const int8_t *>(P)[I];
  default: // U8, Bool
    return static_cast<const uint8_t *>(P)[I];
  }
}

/// V truncated toward zero into [Lo, Hi]; NaN is 0 (the CPU's toInteger).
__device__ int64_t toInteger(double V, int64_t Lo, int64_t Hi) {
  if (isnan(V))
    return 0;
  if (V <= double(Lo))
    return Lo;
  if (V >= double(Hi))
    return Hi;
  return int64_t(V);
}

__global__ void castKernel(DType XT, const void *X, DType YT, void *Y,
                           int64_t N) {
  GRID_STRIDE(I, N) {
    bool FromFloat = isFloat(XT);
    double F = 0;
    int64_t V = 0;
    if (FromFloat)
      F = XT == DType::F64 ? static_cast<const double *>(X)[I]
                           : double(loadF(XT, X, I));
    else
      V = loadInt(XT, X, I);
    switch (YT) {
    case DType::F64:
      static_cast<double *>(Y)[I] = FromFloat ? F : double(V);
      break;
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      storeF(YT, Y, I, FromFloat ? float(F) : float(V));
      break;
    case DType::I64:
      static_cast<int64_t *>(Y)[I] =
          FromFloat ? toInteger(F, INT64_MIN, int64_t(9223372036854774784.0))
                    : V;
      break;
    case DType::I32:
      static_cast<int32_t *>(Y)[I] =
          FromFloat ? int32_t(toInteger(F, INT32_MIN, INT32_MAX)) : int32_t(V);
      break;
    case DType::I8:
      static_cast<int8_t *>(Y)[I] =
          FromFloat ? int8_t(toInteger(F, -128, 127)) : int8_t(V);
      break;
    case DType::U8:
      static_cast<uint8_t *>(Y)[I] =
          FromFloat ? uint8_t(toInteger(F, 0, 255)) : uint8_t(V);
      break;
    case DType::Bool:
      static_cast<uint8_t *>(Y)[I] = FromFloat ? F != 0 : V != 0;
      break;
    }
  }
}

__global__ void scaleKernel(DType XT, const void *X, DType YT, void *Y,
                            int64_t N, float Factor) {
  GRID_STRIDE(I, N) { storeF(YT, Y, I, Factor * loadF(XT, X, I)); }
}

__global__ void swigluKernel(DType T, const void *A, const void *B, void *Y,
                             int64_t N, float Alpha) {
  GRID_STRIDE(I, N) {
    float G = loadF(T, A, I);
    storeF(T, Y, I, G * sigmoidF(Alpha * G) * loadF(T, B, I));
  }
}

__device__ double sigmoidD(double X) { return 1 / (1 + exp(-X)); }

__global__ void geluGradKernel(DType T, const void *DY, const void *X, void *DX,
                               int64_t N, bool Tanh) {
  GRID_STRIDE(I, N) {
    double V = loadF(T, X, I), D;
    if (Tanh) {
      const double C = 0.7978845608028654, K = 0.044715;
      double Th = tanh(C * (V + K * V * V * V));
      D = 0.5 * (1 + Th) + 0.5 * V * (1 - Th * Th) * C * (1 + 3 * K * V * V);
    } else {
      D = 0.5 * (1 + erf(V * 0.7071067811865476)) +
          V * exp(-0.5 * V * V) * 0.3989422804014327;
    }
    storeF(T, DX, I, float(loadF(T, DY, I) * D));
  }
}

__global__ void siluGradKernel(DType T, const void *DY, const void *X, void *DX,
                               int64_t N) {
  GRID_STRIDE(I, N) {
    double V = loadF(T, X, I), S = sigmoidD(V);
    storeF(T, DX, I, float(loadF(T, DY, I) * S * (1 + V * (1 - S))));
  }
}

__global__ void dropoutKernel(DType T, const void *X, void *Y, uint8_t *Mask,
                              int64_t N, DropoutBlock B) {
  GRID_STRIDE(I, N) {
    bool Keep = B.keeps(I);
    storeF(T, Y, I, Keep ? loadF(T, X, I) * B.Key.Scale : 0.0f);
    if (Mask)
      Mask[I] = Keep;
  }
}

__global__ void dropoutGradKernel(DType T, const void *DY, const uint8_t *Mask,
                                  void *DX, int64_t N, float Scale) {
  GRID_STRIDE(I, N) {
    storeF(T, DX, I, Mask[I] ? loadF(T, DY, I) * Scale : 0.0f);
  }
}

__global__ void swigluGradKernel(DType T, const void *DY, const void *A,
                                 const void *B, void *DA, void *DB, int64_t N,
                                 double Alpha) {
  GRID_STRIDE(I, N) {
    double X = loadF(T, A, I), G = loadF(T, B, I), Up = loadF(T, DY, I);
    double S = sigmoidD(Alpha * X);
    storeF(T, DA, I, float(Up * G * (S + Alpha * X * S * (1 - S))));
    storeF(T, DB, I, float(Up * X * S));
  }
}

/// torch.optim.AdamW, per element in f64 as the CPU kernel computes it; the
/// bias corrections are computed once per block.
__global__ void adamwKernel(DType PT, void *P, DType GT, const void *G,
                            DType MT, void *M, DType VT, void *V, int64_t N,
                            AdamWScalars S) {
  __shared__ double Coef[6];
  if (threadIdx.x == 0) {
    double Step = *S.Step, B1 = *S.Beta1, B2 = *S.Beta2;
    Coef[0] = *S.Lr;
    Coef[1] = B1;
    Coef[2] = B2;
    Coef[3] = *S.Eps;
    Coef[4] = 1 - pow(B1, Step);
    Coef[5] = 1 - pow(B2, Step);
  }
  __syncthreads();
  double Lr = Coef[0], B1 = Coef[1], B2 = Coef[2], Eps = Coef[3];
  double Correct1 = Coef[4], Correct2 = Coef[5], Wd = *S.WeightDecay;
  GRID_STRIDE(I, N) {
    double Param = double(loadF(PT, P, I)) * (1 - Lr * Wd);
    double Grad = loadF(GT, G, I);
    float Mean = float(B1 * loadF(MT, M, I) + (1 - B1) * Grad);
    float Square = float(B2 * loadF(VT, V, I) + (1 - B2) * Grad * Grad);
    double Denom = sqrt(Square / Correct2) + Eps;
    storeF(PT, P, I, float(Param - Lr * (Mean / Correct1) / Denom));
    storeF(MT, M, I, Mean);
    storeF(VT, V, I, Square);
  }
}

__global__ void sgdKernel(DType PT, void *P, DType GT, const void *G, int64_t N,
                          const float *Lr, const float *WeightDecay) {
  double L = *Lr, Wd = *WeightDecay;
  GRID_STRIDE(I, N) {
    double Param = loadF(PT, P, I);
    storeF(PT, P, I, float(Param - L * (loadF(GT, G, I) + Wd * Param)));
  }
}

__global__ void streamCopyKernel(const float4 *X, float4 *Y, int64_t N4) {
  GRID_STRIDE(I, N4) {
    float4 V = X[I];
    Y[I] = make_float4(2 * V.x, 2 * V.y, 2 * V.z, 2 * V.w);
  }
}

} // namespace

template <typename T>
static void launchCopy(void *Dst, int64_t DstBase, const Strides &DS,
                       const void *Src, int64_t SrcBase, const Strides &SS,
                       const Dims &Shape, int64_t N, cudaStream_t Stream) {
  if (N <= Max32)
    copyStridedKernel<T, uint32_t><<<gridFor(N), Threads, 0, Stream>>>(
        static_cast<T *>(Dst), DstBase, DS, static_cast<const T *>(Src),
        SrcBase, SS, Shape, N);
  else
    copyStridedKernel<T, uint64_t><<<gridFor(N), Threads, 0, Stream>>>(
        static_cast<T *>(Dst), DstBase, DS, static_cast<const T *>(Src),
        SrcBase, SS, Shape, N);
}

cudaError_t copyStrided(void *Dst, int64_t DstBase, const Strides &DS,
                        const void *Src, int64_t SrcBase, const Strides &SS,
                        const Dims &Shape, int ElemSize, cudaStream_t Stream) {
  int64_t N = 1;
  for (int D = 0; D < Shape.Rank; ++D)
    N *= Shape.Size[D];
  if (N == 0)
    return cudaSuccess;
  switch (ElemSize) {
  case 1:
    launchCopy<uint8_t>(Dst, DstBase, DS, Src, SrcBase, SS, Shape, N, Stream);
    break;
  case 2:
    launchCopy<uint16_t>(Dst, DstBase, DS, Src, SrcBase, SS, Shape, N, Stream);
    break;
  case 4:
    launchCopy<uint32_t>(Dst, DstBase, DS, Src, SrcBase, SS, Shape, N, Stream);
    break;
  case 8:
    launchCopy<uint64_t>(Dst, DstBase, DS, Src, SrcBase, SS, Shape, N, Stream);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t unary(UnaryOp Op, float Alpha, float Beta, DType XT, const void *X,
                  DType YT, void *Y, int64_t N, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  unaryKernel<<<gridFor(N), Threads, 0, Stream>>>(Op, Alpha, Beta, XT, X, YT, Y,
                                                  N);
  return cudaGetLastError();
}

cudaError_t binary(BinaryOp Op, DType XT, const void *X, const Strides &XS,
                   DType YT, const void *Y, const Strides &YS, DType ZT,
                   void *Z, const Dims &Shape, cudaStream_t Stream) {
  int64_t N = 1;
  bool Contiguous = XT == YT && XT == ZT && Op <= BinaryOp::Div;
  int64_t Stride = 1;
  for (int D = Shape.Rank - 1; D >= 0; --D) {
    Contiguous &=
        (Shape.Size[D] == 1 || (XS.S[D] == Stride && YS.S[D] == Stride));
    N *= Shape.Size[D];
    Stride *= Shape.Size[D];
  }
  if (N == 0)
    return cudaSuccess;
  if (Contiguous && N < (int64_t(1) << 31))
    binaryContiguousKernel<<<gridFor(N), Threads, 0, Stream>>>(Op, XT, X, Y, Z,
                                                               N);
  else if (N <= Max32)
    binaryKernel<uint32_t><<<gridFor(N), Threads, 0, Stream>>>(
        Op, XT, X, XS, YT, Y, YS, ZT, Z, Shape, N);
  else
    binaryKernel<uint64_t><<<gridFor(N), Threads, 0, Stream>>>(
        Op, XT, X, XS, YT, Y, YS, ZT, Z, Shape, N);
  return cudaGetLastError();
}

template <typename T>
static void launchWhere(const uint8_t *C, const Strides &CS, const void *X,
                        const Strides &XS, const void *Y, const Strides &YS,
                        void *Z, const Dims &Shape, int64_t N,
                        cudaStream_t Stream) {
  if (N <= Max32)
    whereKernel<T, uint32_t><<<gridFor(N), Threads, 0, Stream>>>(
        C, CS, static_cast<const T *>(X), XS, static_cast<const T *>(Y), YS,
        static_cast<T *>(Z), Shape, N);
  else
    whereKernel<T, uint64_t><<<gridFor(N), Threads, 0, Stream>>>(
        C, CS, static_cast<const T *>(X), XS, static_cast<const T *>(Y), YS,
        static_cast<T *>(Z), Shape, N);
}

cudaError_t where(const uint8_t *C, const Strides &CS, const void *X,
                  const Strides &XS, const void *Y, const Strides &YS, void *Z,
                  const Dims &Shape, int ElemSize, cudaStream_t Stream) {
  int64_t N = 1;
  for (int D = 0; D < Shape.Rank; ++D)
    N *= Shape.Size[D];
  if (N == 0)
    return cudaSuccess;
  switch (ElemSize) {
  case 1:
    launchWhere<uint8_t>(C, CS, X, XS, Y, YS, Z, Shape, N, Stream);
    break;
  case 2:
    launchWhere<uint16_t>(C, CS, X, XS, Y, YS, Z, Shape, N, Stream);
    break;
  case 4:
    launchWhere<uint32_t>(C, CS, X, XS, Y, YS, Z, Shape, N, Stream);
    break;
  case 8:
    launchWhere<uint64_t>(C, CS, X, XS, Y, YS, Z, Shape, N, Stream);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t trilu(const void *X, void *Y, int64_t N, int64_t Rows, int64_t Cols,
                  int64_t K, bool Upper, int ElemSize, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  unsigned Grid = gridFor(N);
  switch (ElemSize) {
  case 1:
    triluKernel<<<Grid, Threads, 0, Stream>>>(static_cast<const uint8_t *>(X),
                                              static_cast<uint8_t *>(Y), N,
                                              Rows, Cols, K, Upper);
    break;
  case 2:
    triluKernel<<<Grid, Threads, 0, Stream>>>(static_cast<const uint16_t *>(X),
                                              static_cast<uint16_t *>(Y), N,
                                              Rows, Cols, K, Upper);
    break;
  case 4:
    triluKernel<<<Grid, Threads, 0, Stream>>>(static_cast<const uint32_t *>(X),
                                              static_cast<uint32_t *>(Y), N,
                                              Rows, Cols, K, Upper);
    break;
  case 8:
    triluKernel<<<Grid, Threads, 0, Stream>>>(static_cast<const uint64_t *>(X),
                                              static_cast<uint64_t *>(Y), N,
                                              Rows, Cols, K, Upper);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t cast(DType XT, const void *X, DType YT, void *Y, int64_t N,
                 cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  castKernel<<<gridFor(N), Threads, 0, Stream>>>(XT, X, YT, Y, N);
  return cudaGetLastError();
}

cudaError_t scale(DType XT, const void *X, DType YT, void *Y, int64_t N,
                  float Factor, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  scaleKernel<<<gridFor(N), Threads, 0, Stream>>>(XT, X, YT, Y, N, Factor);
  return cudaGetLastError();
}

cudaError_t swiglu(DType T, const void *A, const void *B, void *Y, int64_t N,
                   float Alpha, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  swigluKernel<<<gridFor(N), Threads, 0, Stream>>>(T, A, B, Y, N, Alpha);
  return cudaGetLastError();
}

cudaError_t geluGrad(DType T, const void *DY, const void *X, void *DX,
                     int64_t N, bool Tanh, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  geluGradKernel<<<gridFor(N), Threads, 0, Stream>>>(T, DY, X, DX, N, Tanh);
  return cudaGetLastError();
}

cudaError_t siluGrad(DType T, const void *DY, const void *X, void *DX,
                     int64_t N, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  siluGradKernel<<<gridFor(N), Threads, 0, Stream>>>(T, DY, X, DX, N);
  return cudaGetLastError();
}

cudaError_t dropout(DType T, const void *X, void *Y, uint8_t *Mask, int64_t N,
                    const DropoutBlock &B, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  dropoutKernel<<<gridFor(N), Threads, 0, Stream>>>(T, X, Y, Mask, N, B);
  return cudaGetLastError();
}

cudaError_t dropoutGrad(DType T, const void *DY, const uint8_t *Mask, void *DX,
                        int64_t N, float Scale, cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  dropoutGradKernel<<<gridFor(N), Threads, 0, Stream>>>(T, DY, Mask, DX, N,
                                                        Scale);
  return cudaGetLastError();
}

cudaError_t swigluGrad(DType T, const void *DY, const void *A, const void *B,
                       void *DA, void *DB, int64_t N, float Alpha,
                       cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  swigluGradKernel<<<gridFor(N), Threads, 0, Stream>>>(T, DY, A, B, DA, DB, N,
                                                       Alpha);
  return cudaGetLastError();
}

cudaError_t adamw(DType PT, void *P, DType GT, const void *G, DType MT, void *M,
                  DType VT, void *V, int64_t N, const AdamWScalars &S,
                  cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  adamwKernel<<<gridFor(N), Threads, 0, Stream>>>(PT, P, GT, G, MT, M, VT, V, N,
                                                  S);
  return cudaGetLastError();
}

cudaError_t sgd(DType PT, void *P, DType GT, const void *G, int64_t N,
                const float *Lr, const float *WeightDecay,
                cudaStream_t Stream) {
  if (N == 0)
    return cudaSuccess;
  sgdKernel<<<gridFor(N), Threads, 0, Stream>>>(PT, P, GT, G, N, Lr,
                                                WeightDecay);
  return cudaGetLastError();
}

cudaError_t streamCopy(const float *X, float *Y, int64_t N,
                       cudaStream_t Stream) {
  int64_t N4 = N / 4;
  if (N4 == 0)
    return cudaSuccess;
  streamCopyKernel<<<gridFor(N4), Threads, 0, Stream>>>(
      reinterpret_cast<const float4 *>(X), reinterpret_cast<float4 *>(Y), N4);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace autopar
