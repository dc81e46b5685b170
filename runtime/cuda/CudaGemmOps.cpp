//===- CudaGemmOps.cpp - MatMul, Linear and Gemm through cuBLAS -----------===//
//
// GEMMs go through cuBLAS (cublasGemmEx, cublasGemmStridedBatchedEx) with
// f32 accumulation, every operand of the result's type; fp32 GEMMs use
// TF32 tensor cores only when the backend allows it. MatMul's batch
// broadcasts become one GEMM, one strided-batched GEMM, or one GEMM per
// batch; the shapes are runtime/OpShapes.h's.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

#include <algorithm>
#include <climits>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

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

/// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so B
/// goes first.
Error cuda::runGemmCall(const KernelArgs &A, CudaContext &C, const Tensor &T,
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

Error cuda::runMatMul(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  Expected<MatMulPlan> P = planMatMul(A);
  if (!P)
    return P.takeError();
  int64_t M = P->M, N = P->N, K = P->K;
  int64_t Count = P->Count, XCount = P->XCount, WCount = P->WCount;
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
  StridedWalk Walk(P->Batch, {getBroadcastStrides(P->XBatch, P->Batch),
                              getBroadcastStrides(P->WBatch, P->Batch)});
  for (int64_t I = 0; I != Count; ++I, Walk.next()) {
    G.A = X.data<char>() + Walk.offset(0) * M * K * Size;
    G.B = W.data<char>() + Walk.offset(1) * K * N * Size;
    G.C = Y.data<char>() + I * M * N * Size;
    if (Error E = runGemmCall(A, C, Y, G))
      return E;
  }
  return Error::success();
}

Error cuda::runLinear(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  Expected<LinearPlan> P = planLinear(A);
  if (!P)
    return P.takeError();
  int64_t Rows = P->Rows, N = P->N, K = P->K;
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

Error cuda::runGemm(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkGemmTypes(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  Expected<GemmPlan> P = planGemm(A);
  if (!P)
    return P.takeError();
  GemmCall G;
  G.TransA = P->TransA;
  G.TransB = P->TransB;
  G.Alpha = P->Alpha;
  float Beta = P->Beta;
  G.M = P->M;
  G.K = P->K;
  G.N = P->N;
  G.A = X.getData();
  G.B = W.getData();
  G.C = Y.getData();
  if (A.has(2)) {
    const Tensor &CT = A.In[2];
    Shape Target{G.M, G.N};
    if (Error E = checkGemmC(A, *P))
      return E;
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
