//===- OpCost.cpp - Time of one node on one rank --------------------------===//
//
// Rules (docs/CostModel.md, "Per-op cost"):
// - Forward FLOPs are ir/OpFlops.h's, divided by the split degree (every
//   loop is a factor of the iteration space).
// - Backward FLOPs: a product computes one product of the same size per
//   operand that needs a gradient (dA = dY B^T, dB = A^T dY), so 2x the
//   forward when both do (Narayanan et al. 2021, section 5.1: backward =
//   2x forward). Attention's core is four products in its backward (dP, dV,
//   dQ, dK: 2x); flash attention also recomputes Q K^T, which takes time
//   but is not counted (Dao et al. 2022, section 3.1). Gather's backward
//   scatters one addition per output element into the table. Other ops: 2x
//   their forward FLOPs when an operand needs a gradient.
// - Bytes: every operand read and every result written once, at the local
//   size; views (reshapes, identity) move nothing. Backward: 2x (read the
//   saved inputs and the incoming gradient, write the outgoing ones).
// - Seconds: products at gemmSeconds (shape-dependent efficiency); other
//   ops at the fp32 vector peak; each against bytes at achievable HBM
//   bandwidth (roofline: Williams et al. 2009), the larger wins, plus one
//   kernel launch per kernel. Attention is priced kernel by kernel
//   (costAttention): materialized, its products and softmax add up; flash,
//   one kernel that skips a causal mask's blocks. Nodes that read no activation
//   (weight transposes, cached masks and rotary tables) are computed once, not
//   per step, and cost nothing.
//
//===----------------------------------------------------------------------===//

#include "cost/OpCost.h"

#include "cost/GemmEfficiency.h"
#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpFlops.h"
#include "ir/OpRegistry.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

GradientFlow::GradientFlow(const Graph &G) {
  // Float parameters that some node reads where a gradient flows (not the
  // frozen scales of a quantized weight, nor a parameter `--freeze` marks
  // `frozen`).
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    if (!isFloatElementType(P->getType().getElementType()) || P->isFrozen())
      continue;
    bool Trained = P->getUsers().empty();
    for (const Node *U : P->getUsers())
      for (unsigned I = 0, E = U->getNumOperands(); I != E && !Trained; ++I)
        Trained =
            U->getOperand(I) == P.get() && isGradientOperand(U->getOp(), I);
    if (Trained)
      Grad.insert(P.get());
  }
  for (const std::unique_ptr<Value> &I : G.getInputs())
    Activation.insert(I.get());
  for (const Node &N : G.getNodes()) {
    bool AnyGrad = false, AnyActivation = false;
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
      AnyGrad |= needsGrad(N, I);
      AnyActivation |= isActivation(N.getOperand(I));
    }
    bool NoGradient = N.getOp() == OpId::Shape || N.getOp() == OpId::Size;
    for (unsigned I = 0, E = N.getNumResults(); I != E; ++I) {
      const Value *R = N.getResult(I);
      if (!R)
        continue;
      if (AnyGrad && !NoGradient &&
          isFloatElementType(R->getType().getElementType()))
        Grad.insert(R);
      // Shapes are static: Shape and Size of an activation are not one.
      if (AnyActivation && !NoGradient)
        Activation.insert(R);
    }
  }
}

double autopar::trainingElementBytes(const Value &V, const CostSettings &S) {
  ElementType Ty = V.getType().getElementType();
  if (isFloatElementType(Ty))
    return getPrecisionBytes(S.Compute);
  return getElementTypeBits(Ty) / 8.0;
}

double autopar::localElements(const Value &V, ArrayRef<int> Map,
                              LoopSplit Split) {
  std::optional<int64_t> N = V.getType().getStaticNumElements();
  double Elements = N ? double(*N) : 0;
  if (Split.Degree > 1 && is_contained(Map, Split.Loop))
    Elements /= Split.Degree;
  return Elements;
}

namespace {

/// A dense product seen through its loops: sizes on one rank of the M, N, K
/// and batch loops (those in A and Y, B and Y, A and B, all three).
struct GemmShape {
  int64_t M = 1, N = 1, K = 1, Batch = 1;
};

/// Static size of loop L: the size of a dimension mapped to it.
int64_t loopSize(const Node &N, const OpLoops &Loops, unsigned L) {
  int64_t Size = 1;
  auto Visit = [&](const Value *V, ArrayRef<int> Map) {
    if (!V)
      return;
    for (unsigned I = 0; I != Map.size(); ++I)
      if (Map[I] == int(L) && V->getType().getDim(I).isStatic())
        Size = std::max(Size, V->getType().getDim(I).getSize());
  };
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
    Visit(N.getOperand(I), Loops.Operands[I]);
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    Visit(N.getResult(I), Loops.Results[I]);
  return Size;
}

std::optional<GemmShape> getGemmShape(const Node &N, const OpLoops &Loops,
                                      LoopSplit Split) {
  if (N.getNumOperands() < 2 || Loops.Operands.size() < 2)
    return std::nullopt;
  GemmShape S;
  for (unsigned L = 0; L != Loops.getNumLoops(); ++L) {
    bool InA = is_contained(Loops.Operands[0], int(L));
    bool InB = is_contained(Loops.Operands[1], int(L));
    bool InY = is_contained(Loops.Results[0], int(L));
    int64_t Size = loopSize(N, Loops, L);
    if (int(L) == Split.Loop && Split.Degree > 1)
      Size = std::max<int64_t>(1, Size / Split.Degree);
    if (InA && InB && InY)
      S.Batch *= Size;
    else if (InA && InY)
      S.M *= Size;
    else if (InB && InY)
      S.N *= Size;
    else if (InA && InB)
      S.K *= Size;
    else if (InY && !InA && !InB)
      // A convolution's output positions (the window loops leave the input
      // unmapped): rows of its implicit im2col matrix.
      S.M *= Size;
  }
  // The window of a convolution: the weight's dimensions that no loop maps
  // add to the contraction (im2col's K = in-channels x kernel elements).
  const Value *B = N.getOperand(1);
  for (unsigned I = 0, E = Loops.Operands[1].size(); I != E; ++I)
    if (Loops.Operands[1][I] == OpLoops::NoLoop && B &&
        B->getType().getDim(I).isStatic())
      S.K *= B->getType().getDim(I).getSize();
  return S;
}

/// Dense products, priced as GEMMs (their FLOPs are 2*M*N*K).
bool isProduct(const Node &N) {
  switch (getOpFacts(N.getOp()).Flops) {
  case FlopRule::MatMul:
  case FlopRule::Linear:
  case FlopRule::Gemm:
  case FlopRule::Conv:
  case FlopRule::ConvTranspose:
    return true;
  case FlopRule::Einsum:
    return N.getNumOperands() == 2;
  case FlopRule::Unknown:
  case FlopRule::Free:
  case FlopRule::PerOutput:
  case FlopRule::SumOperands:
  case FlopRule::PerInput:
  case FlopRule::Window:
  case FlopRule::Resize:
  case FlopRule::LRN:
  case FlopRule::Attention:
  case FlopRule::MsAttention:
  case FlopRule::Recurrent:
  case FlopRule::QuantizedMatMul:
    return false;
  }
  return false;
}

/// A recurrent layer step by step: the input projection of every step is
/// one GEMM, each step's recurrent GEMM waits for the previous hidden state,
/// and one kernel applies the gate equations (cuDNN's RNN; Appleyard,
/// Kocisky and Blunsom 2016, "Optimizing Performance of Recurrent Neural
/// Networks on GPUs", section 3.1). Backward: each GEMM twice (the
/// gradients of its input and of its weights), each step's gates once
/// more. C's forward bytes hold the operands and results on entry.
void costRecurrent(const Node &N, const DeviceSpec &D, const CostSettings &Set,
                   const GradientFlow &Flow, NodeCost &C) {
  std::optional<RecurrentShape> S = getRecurrentShape(N);
  if (!S)
    return;
  Precision P = Set.Compute;
  double Bandwidth = D.achievableHbmBytesPerSec();
  auto Kernel = [&](double Compute, double Bytes) {
    double Memory = Bandwidth > 0 ? Bytes / Bandwidth : 0;
    return std::max(Compute, Memory) + D.KernelLaunchSec;
  };
  int64_t Rows = S->Gates * S->Hidden;
  double Input = gemmSeconds(D, P, S->Seq * S->Batch, Rows, S->Input, 1);
  double Step = gemmSeconds(D, P, S->Batch, Rows, S->Hidden, 1);
  double GateBytes =
      double(S->Batch) * (Rows + 2 * S->Hidden) * getPrecisionBytes(P) * 2;
  double VectorRate = D.PeakFlops(Precision::FP32);
  double GateFlops = double(S->Batch) * S->Hidden * (S->Gates * 5 + 1);
  double Gates = Kernel(VectorRate > 0 ? GateFlops / VectorRate : 0, GateBytes);
  double PerDir =
      Kernel(Input, C.FwdBytes / S->Dirs) + S->Seq * (Kernel(Step, 0) + Gates);
  C.FwdSeconds = S->Dirs * PerDir;
  bool Grad = false;
  for (const Value *O : N.getOperands())
    Grad |= Flow.needsGrad(O);
  if (!Grad)
    return;
  C.BwdFlops = 2 * C.FwdFlops;
  C.BwdBytes = 2 * C.FwdBytes;
  C.BwdSeconds = S->Dirs * (2 * Kernel(Input, C.FwdBytes / S->Dirs) +
                            S->Seq * (2 * Kernel(Step, 0) + Gates));
}

/// Forward and backward of a product: one GEMM, then dA (M x K from
/// [M,N] x [N,K]) and dB (K x N from [K,M] x [M,N]) when needed.
void costProduct(const Node &N, const GemmShape &S, const DeviceSpec &D,
                 Precision P, const GradientFlow &Flow, NodeCost &C,
                 double &FwdCompute, double &BwdCompute) {
  if (!isFloatElementType(N.getOperand(0)->getType().getElementType())) {
    // Integer codes (MatMulInteger): the int8 peak, with the GEMM model's
    // tiles and a roofline over 1-byte codes and i32 sums.
    double Bytes = (double(S.M) * S.K + double(S.K) * S.N) * S.Batch +
                   4.0 * S.M * S.N * S.Batch;
    FwdCompute = gemmSecondsAt(D, Precision::FP16, D.integerProductPeak(),
                               Bytes, S.M, S.N, S.K, S.Batch);
    return;
  }
  FwdCompute = gemmSeconds(D, P, S.M, S.N, S.K, S.Batch);
  unsigned Grads = 0;
  if (Flow.needsGrad(N.getOperand(0))) {
    BwdCompute += gemmSeconds(D, P, S.M, S.K, S.N, S.Batch);
    ++Grads;
  }
  if (Flow.needsGrad(N.getOperand(1))) {
    BwdCompute += gemmSeconds(D, P, S.K, S.N, S.M, S.Batch);
    ++Grads;
  }
  C.BwdFlops = C.FwdFlops * Grads;
}

/// MatMulNBits: A [..., K] times B dequantized on the fly to [K, N], in
/// the activations' precision; C's bytes (the packed weight's) are the
/// memory side. Backward, when A needs a gradient: dA = dY W^T.
void costQuantizedMatMul(const Node &N, const DeviceSpec &D, Precision P,
                         const GradientFlow &Flow, double Bytes,
                         double &FwdCompute, double &BwdCompute) {
  const Attribute *KA = N.getAttr("K"), *NA = N.getAttr("N");
  std::optional<int64_t> Out = N.getResult(0)->getType().getStaticNumElements();
  if (!KA || !NA || !Out || NA->getInt() <= 0)
    return;
  int64_t K = KA->getInt(), Cols = NA->getInt(), Rows = *Out / Cols;
  FwdCompute = gemmSecondsAt(D, P, D.PeakFlops(P), Bytes, Rows, Cols, K);
  if (Flow.needsGrad(N.getOperand(0)))
    BwdCompute = gemmSecondsAt(D, P, D.PeakFlops(P), 2 * Bytes, Rows, K, Cols);
}

/// Attention: C's forward bytes hold its operands and result on entry. Sets
/// its seconds and bytes, kernel by kernel: materialized attention is five
/// kernels forward and backward whose times add, flash attention one each.
void costAttention(const Node &N, const OpLoops &Loops, LoopSplit Split,
                   const DeviceSpec &D, const CostSettings &Set,
                   const GradientFlow &Flow, NodeCost &C) {
  int64_t Size[6];
  for (unsigned L = 0; L != 6; ++L) {
    Size[L] = loopSize(N, Loops, L);
    if (int(L) == Split.Loop && Split.Degree > 1)
      Size[L] = std::max<int64_t>(1, Size[L] / Split.Degree);
  }
  // Loops (ir/OpLoops.cpp): B, H, Sq, Skv, D, Dv; in the 3-D form the H loop
  // is the hidden size, heads x D.
  int64_t Batch = Size[0] * Size[1], Sq = Size[2], Skv = Size[3], Hd = Size[4],
          HdV = Size[5];
  if (N.getOperand(0)->getType().getRank() == 3) {
    const Attribute *A = N.getAttr("q_num_heads");
    int64_t Heads = A && A->isa(Attribute::Kind::Int) ? A->getInt() : 1;
    if (Split.Loop == 1 && Split.Degree > 1)
      Heads = std::max<int64_t>(1, Heads / Split.Degree);
    Batch = Size[0] * Heads;
    Hd = std::max<int64_t>(1, Size[1] / Heads);
    HdV = Hd;
  }
  Precision P = Set.Compute;
  bool Grad = Flow.needsGrad(N.getOperand(0)) ||
              Flow.needsGrad(N.getOperand(1)) ||
              Flow.needsGrad(N.getOperand(2));
  // Local bytes of Q, K, V and the mask, and of the output.
  double In[4] = {0, 0, 0, 0};
  for (unsigned I = 0; I != 4 && I < N.getNumOperands(); ++I)
    if (const Value *O = N.getOperand(I))
      In[I] = localElements(*O, Loops.Operands[I], Split) *
              trainingElementBytes(*O, Set);
  double Out = localElements(*N.getResult(0), Loops.Results[0], Split) *
               trainingElementBytes(*N.getResult(0), Set);
  double IO = C.FwdBytes;
  double Bandwidth = D.achievableHbmBytesPerSec();
  auto Kernel = [&](double Compute, double Bytes) {
    double Memory = Bandwidth > 0 ? Bytes / Bandwidth : 0;
    return std::max(Compute, Memory) + D.KernelLaunchSec;
  };
  double QK = gemmSeconds(D, P, Sq, Skv, Hd, Batch);
  double PV = gemmSeconds(D, P, Sq, HdV, Skv, Batch);
  // dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
  double DV = gemmSeconds(D, P, Skv, HdV, Sq, Batch),
         DP = gemmSeconds(D, P, Sq, Skv, HdV, Batch),
         DQ = gemmSeconds(D, P, Sq, Hd, Skv, Batch),
         DK = gemmSeconds(D, P, Skv, Hd, Sq, Batch);
  if (Grad)
    C.BwdFlops = 2 * C.FwdFlops;

  if (Set.Attention == AttentionKernel::Flash) {
    // One kernel each way over Q, K, V and the output (and, backward, their
    // gradients). With a causal mask it skips the blocks above the
    // diagonal: 1.7-1.8x faster than without the mask (Dao 2023,
    // FlashAttention-2, section 3.1.1), taken as 1.75.
    const Attribute *Causal = N.getAttr("is_causal");
    double Work = Causal && Causal->isa(Attribute::Kind::Int) &&
                          Causal->getInt() != 0 && Sq == Skv
                      ? 1 / 1.75
                      : 1.0;
    C.FwdSeconds = Kernel(Work * (QK + PV), IO);
    if (Grad) {
      // The backward recomputes Q K^T (Dao et al. 2022, section 3.1): time,
      // not model FLOPs (those exclude recomputation).
      C.BwdBytes = 2 * IO;
      C.BwdSeconds = Kernel(Work * (QK + DV + DP + DQ + DK), C.BwdBytes);
    }
    return;
  }
  // Materialized: Q K^T writes the scores S; one kernel scales, masks and
  // normalizes them (reads S and the mask, writes the probabilities); P V
  // reads them. Backward: dV and dP read P and write dP, the softmax's
  // backward reads P and dP and writes dS, dQ and dK read dS. A dropout is
  // its own kernel each way (Megatron-LM's: the fused scale-mask-softmax
  // does not drop): forward it reads P and writes the dropped P and a byte
  // of mask per score, backward it reads dP and the mask and writes dP.
  double S = double(Batch) * Sq * Skv * getPrecisionBytes(P);
  double Q = In[0], K = In[1], V = In[2], Mask = In[3];
  double DropPass =
      getAttentionDropout(N) > 0 ? 2 * S + double(Batch) * Sq * Skv : 0;
  C.FwdBytes = IO + 4 * S + DropPass;
  C.FwdSeconds = Kernel(QK, Q + K + S) + Kernel(0, 2 * S + Mask) +
                 (DropPass > 0 ? Kernel(0, DropPass) : 0) +
                 Kernel(PV, S + V + Out);
  if (!Grad)
    return;
  C.BwdBytes = 2 * (S + Out + V) + 3 * S + 2 * (S + Q + K) + DropPass;
  C.BwdSeconds = Kernel(DV, S + Out + V) + Kernel(DP, S + Out + V) +
                 (DropPass > 0 ? Kernel(0, DropPass) : 0) + Kernel(0, 3 * S) +
                 Kernel(DQ, S + Q + K) + Kernel(DK, S + Q + K);
}

} // namespace

/// The node's cost at its kernels' isolated rates.
/// The bytes the body of an Opaque Loop, Scan or If moves over all its runs,
/// floats at the plan's precision; 0 without a measured body.
static double getOpaqueBodyBytes(const Node &N, const CostSettings &S) {
  auto Int = [&](StringRef Name) -> double {
    const Attribute *A = N.getAttr(Name);
    return A && A->isa(Attribute::Kind::Int) ? double(A->getInt()) : 0;
  };
  return Int("body_runs") *
         (Int("body_float_elements") * getPrecisionBytes(S.Compute) +
          Int("body_other_bytes"));
}

static NodeCost getIsolatedCost(const Node &N,
                                const std::optional<OpLoops> &Loops,
                                LoopSplit Split, const DeviceSpec &Device,
                                const CostSettings &Settings,
                                const GradientFlow &Flow) {
  NodeCost C;
  if (!Loops)
    Split = LoopSplit();
  bool ReadsActivation = false, AnyGrad = false;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    ReadsActivation |= Flow.isActivation(N.getOperand(I));
    AnyGrad |= Flow.needsGrad(N, I);
  }
  if (runsNoKernel(N.getOp()) || !ReadsActivation)
    return C;

  C.FwdFlops = double(getForwardFlops(N).value_or(0)) / Split.Degree;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
    if (const Value *O = N.getOperand(I))
      C.FwdBytes += localElements(*O,
                                  Loops ? ArrayRef<int>(Loops->Operands[I])
                                        : ArrayRef<int>(),
                                  Split) *
                    trainingElementBytes(*O, Settings);
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    if (const Value *R = N.getResult(I))
      C.FwdBytes += localElements(*R,
                                  Loops ? ArrayRef<int>(Loops->Results[I])
                                        : ArrayRef<int>(),
                                  Split) *
                    trainingElementBytes(*R, Settings);

  // A loop or branch not unrolled moves what its body's kernels read and
  // write, each run (frontend/LoopImporters.cpp measured one).
  if (N.getOp() == OpId::Opaque)
    C.FwdBytes = std::max(C.FwdBytes, getOpaqueBodyBytes(N, Settings));
  if (Loops && N.getOp() == OpId::Attention && Loops->getNumLoops() == 6) {
    costAttention(N, *Loops, Split, Device, Settings, Flow, C);
    return C;
  }
  if (getOpFacts(N.getOp()).Flops == FlopRule::Recurrent &&
      getRecurrentShape(N)) {
    costRecurrent(N, Device, Settings, Flow, C);
    return C;
  }
  double FwdCompute = 0, BwdCompute = 0;
  double VectorRate = Device.PeakFlops(Precision::FP32);
  std::optional<GemmShape> Shape;
  if (Loops && isProduct(N))
    Shape = getGemmShape(N, *Loops, Split);
  if (Shape) {
    costProduct(N, *Shape, Device, Settings.Compute, Flow, C, FwdCompute,
                BwdCompute);
  } else if (getOpFacts(N.getOp()).Flops == FlopRule::QuantizedMatMul) {
    costQuantizedMatMul(N, Device, Settings.Compute, Flow, C.FwdBytes,
                        FwdCompute, BwdCompute);
    if (AnyGrad)
      C.BwdFlops = C.FwdFlops;
  } else {
    FwdCompute = VectorRate > 0 ? C.FwdFlops / VectorRate : 0;
    if (AnyGrad) {
      C.BwdFlops = N.getOp() == OpId::Gather ? C.FwdFlops : 2 * C.FwdFlops;
      if (N.getOp() == OpId::Gather && Flow.needsGrad(N.getOperand(0)))
        C.BwdFlops = localElements(
            *N.getResult(0),
            Loops ? ArrayRef<int>(Loops->Results[0]) : ArrayRef<int>(), Split);
      BwdCompute = VectorRate > 0 ? C.BwdFlops / VectorRate : 0;
    }
  }
  if (AnyGrad)
    C.BwdBytes = 2 * C.FwdBytes;

  double Bandwidth = Device.achievableHbmBytesPerSec();
  auto Time = [&](double Compute, double Bytes) {
    double Memory = Bandwidth > 0 ? Bytes / Bandwidth : 0;
    return std::max(Compute, Memory) + Device.KernelLaunchSec;
  };
  C.FwdSeconds = Time(FwdCompute, C.FwdBytes);
  if (AnyGrad)
    C.BwdSeconds = Time(BwdCompute, C.BwdBytes);
  return C;
}

NodeCost autopar::getNodeCost(const Node &N,
                              const std::optional<OpLoops> &Loops,
                              LoopSplit Split, const DeviceSpec &Device,
                              const CostSettings &Settings,
                              const GradientFlow &Flow) {
  NodeCost C = getIsolatedCost(N, Loops, Split, Device, Settings, Flow);
  C.FwdSeconds = Device.inStepSeconds(C.FwdSeconds);
  C.BwdSeconds = Device.inStepSeconds(C.BwdSeconds);
  return C;
}
