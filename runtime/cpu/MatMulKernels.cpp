//===- MatMulKernels.cpp - MatMul, Linear and Gemm through CBLAS ----------===//
//
// f32 only. MatMul follows numpy (1-D operands promoted and the added
// dimension dropped, batch dimensions broadcast); when B has no batch
// dimensions the whole of A is one GEMM. Linear is X[..., K] W[K, N] + B[N]
// as one GEMM over the rows of X. Gemm is ONNX's, with transA/transB,
// alpha, beta and C broadcast to [M, N]. OpenBLAS splits a GEMM over rows
// and columns of the result, never over K, so results do not depend on its
// thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

// OpenBLAS's own call; declared here in case the cblas.h found is another
// implementation's.
extern "C" void openblas_set_num_threads(int NumThreads);

using namespace autopar;
using namespace llvm;

static int BlasThreads = 1;

void autopar::setBlasThreads(int Threads) {
  BlasThreads = std::max(Threads, 1);
  openblas_set_num_threads(BlasThreads);
}

SerialBlas::SerialBlas() : Threads(BlasThreads) {
  if (Threads > 1)
    openblas_set_num_threads(1);
}

SerialBlas::~SerialBlas() {
  if (Threads > 1)
    openblas_set_num_threads(Threads);
}

void autopar::sgemm(bool TransA, bool TransB, int64_t M, int64_t N, int64_t K,
                    float Alpha, const float *A, const float *B, float Beta,
                    float *C) {
  sgemm(TransA, TransB, M, N, K, Alpha, A, TransA ? M : K, B, TransB ? K : N,
        Beta, C, N);
}

void autopar::sgemm(bool TransA, bool TransB, int64_t M, int64_t N, int64_t K,
                    float Alpha, const float *A, int64_t LdA, const float *B,
                    int64_t LdB, float Beta, float *C, int64_t LdC) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    for (int64_t I = 0; I != M; ++I)
      for (int64_t J = 0; J != N; ++J)
        C[I * LdC + J] = Beta == 0 ? 0.0f : Beta * C[I * LdC + J];
    return;
  }
  cblas_sgemm(CblasRowMajor, TransA ? CblasTrans : CblasNoTrans,
              TransB ? CblasTrans : CblasNoTrans, int(M), int(N), int(K), Alpha,
              A, int(std::max<int64_t>(LdA, 1)), B,
              int(std::max<int64_t>(LdB, 1)), Beta, C,
              int(std::max<int64_t>(LdC, 1)));
}

/// An error unless each size fits CBLAS's int arguments.
static Error checkBlasSizes(const KernelArgs &A,
                            std::initializer_list<int64_t> Sizes) {
  for (int64_t S : Sizes)
    if (S > INT_MAX)
      return A.error("a GEMM dimension of " + Twine(S) +
                     " exceeds what CBLAS takes");
  return Error::success();
}

static Error checkAllF32(const KernelArgs &A) {
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (A.has(I))
      if (Error E = A.checkType(I, {ElementType::F32}))
        return E;
  return A.checkResultType(0, {ElementType::F32});
}

Error autopar::runMatMul(const KernelArgs &A) {
  if (Error E = checkAllF32(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  Expected<MatMulPlan> P = planMatMul(A);
  if (!P)
    return P.takeError();
  int64_t M = P->M, N = P->N, K = P->K, Count = P->Count;
  if (P->WCount == 1 && P->XBatch.size() == P->Batch.size() &&
      P->XCount == Count) {
    // One GEMM: [Count * M, K] x [K, N].
    if (Error E = checkBlasSizes(A, {Count * M, N, K}))
      return E;
    sgemm(false, false, Count * M, N, K, 1.0f, X.data<float>(), W.data<float>(),
          0.0f, Y.data<float>());
    return Error::success();
  }
  if (Error E = checkBlasSizes(A, {M, N, K}))
    return E;
  Shape XStrides = getBroadcastStrides(P->XBatch, P->Batch);
  Shape WStrides = getBroadcastStrides(P->WBatch, P->Batch);
  StridedWalk Walk(P->Batch, {XStrides, WStrides});
  for (int64_t I = 0; I != Count; ++I, Walk.next())
    sgemm(false, false, M, N, K, 1.0f, X.data<float>() + Walk.offset(0) * M * K,
          W.data<float>() + Walk.offset(1) * K * N, 0.0f,
          Y.data<float>() + I * M * N);
  return Error::success();
}

/// Linear over blocks of BlockRows rows of X (all of them at once when 0),
/// each block's bias preloaded, then Epilogue (when given) on the block's
/// rows [First, First + Count) of the result.
static Error
runLinearRows(const KernelArgs &A, int64_t BlockRows,
              function_ref<void(int64_t First, int64_t Count)> Epilogue) {
  if (Error E = checkAllF32(A))
    return E;
  Expected<LinearPlan> P = planLinear(A);
  if (!P)
    return P.takeError();
  int64_t Rows = P->Rows, N = P->N, K = P->K;
  if (Error E = checkBlasSizes(A, {Rows, N, K}))
    return E;
  const float *X = A.In[0].data<float>(), *W = A.In[1].data<float>();
  const float *Bias = A.has(2) ? A.In[2].data<float>() : nullptr;
  float *YD = A.Out[0].data<float>();
  if (BlockRows <= 0)
    BlockRows = std::max<int64_t>(Rows, 1);
  for (int64_t R0 = 0; R0 < Rows; R0 += BlockRows) {
    int64_t Count = std::min(BlockRows, Rows - R0);
    float *YBlock = YD + R0 * N;
    if (Bias)
      for (int64_t Row = 0; Row != Count; ++Row)
        std::copy_n(Bias, N, YBlock + Row * N);
    sgemm(false, false, Count, N, K, 1.0f, X + R0 * K, W, Bias ? 1.0f : 0.0f,
          YBlock);
    if (Epilogue)
      Epilogue(R0, Count);
  }
  return Error::success();
}

Error autopar::runLinear(const KernelArgs &A) {
  return runLinearRows(A, 0, nullptr);
}

Expected<bool> autopar::runLinearEpilogue(const KernelArgs &Lin,
                                          const KernelArgs &Epi) {
  if (Lin.N.getOp() != OpId::Linear || Epi.Out.size() != 1 ||
      !Epi.Out[0].isPresent() || Lin.Out.size() != 1)
    return false;
  const Tensor &Y = Lin.Out[0], &Z = Epi.Out[0];
  auto SameF32 = [&](const Tensor &T) {
    return T.isPresent() && T.getElementType() == ElementType::F32 &&
           T.getShape() == Y.getShape();
  };
  if (!SameF32(Y) || !SameF32(Z) || Y.getShape().empty())
    return false;
  // What the epilogue adds to Y: nothing (Gelu) or a residual R.
  const float *R = nullptr;
  bool Tanh = false;
  if (Epi.N.getOp() == OpId::Gelu && Epi.In.size() == 1 &&
      Epi.In[0].getData() == Y.getData()) {
    StringRef Mode = Epi.stringAttr("approximate", "none");
    if (Mode != "none" && Mode != "tanh")
      return false;
    Tanh = Mode == "tanh";
  } else if (Epi.N.getOp() == OpId::Add && Epi.In.size() == 2 &&
             SameF32(Epi.In[0]) && SameF32(Epi.In[1]) &&
             (Epi.In[0].getData() == Y.getData()) !=
                 (Epi.In[1].getData() == Y.getData())) {
    R = (Epi.In[0].getData() == Y.getData() ? Epi.In[1] : Epi.In[0])
            .data<float>();
  } else {
    return false;
  }
  int64_t N = Y.getShape().back();
  float *YD = Y.data<float>(), *ZD = Z.data<float>();
  // Blocks of 4 MiB of Y: in the last-level cache when the epilogue reads
  // them (smaller blocks cost OpenBLAS more than they save, measured at 2
  // threads on the bench GPT).
  int64_t BlockRows =
      std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(N, 1));
  if (Error E =
          runLinearRows(Lin, BlockRows, [&](int64_t First, int64_t Count) {
            const float *YBlock = YD + First * N;
            float *ZBlock = ZD + First * N;
            if (!R)
              return geluArray(YBlock, ZBlock, Count * N, Tanh);
            const float *RBlock = R + First * N;
            for (int64_t I = 0; I != Count * N; ++I)
              ZBlock[I] = YBlock[I] + RBlock[I];
          }))
    return E;
  return true;
}

Error autopar::runGemm(const KernelArgs &A) {
  if (Error E = checkAllF32(A))
    return E;
  const Tensor &X = A.In[0], &W = A.In[1], &Y = A.Out[0];
  Expected<GemmPlan> P = planGemm(A);
  if (!P)
    return P.takeError();
  int64_t M = P->M, N = P->N, K = P->K;
  if (Error E = checkBlasSizes(A, {M, N, K}))
    return E;
  if (Error E = checkGemmC(A, *P))
    return E;
  float *YD = Y.data<float>();
  if (A.has(2)) {
    const Tensor &C = A.In[2];
    Shape Target{M, N};
    StridedWalk Walk(Target, {getBroadcastStrides(C.getShape(), Target)});
    for (int64_t I = 0; I != M * N; ++I, Walk.next())
      YD[I] = P->Beta * C.data<float>()[Walk.offset(0)];
  }
  sgemm(P->TransA, P->TransB, M, N, K, P->Alpha, X.data<float>(),
        W.data<float>(), A.has(2) ? 1.0f : 0.0f, YD);
  return Error::success();
}
