//===- OpFlops.cpp - Forward FLOPs of one node ----------------------------===//
//
// FLOPs per op, 2 per multiply-add (Narayanan et al. 2021, Megatron-LM):
//   MatMul, Linear, Gemm  2*M*N*K, batch dimensions multiply (bias ignored)
//   Einsum                2 * product of every index's size (1x for one
//                         operand: a reduction or a transpose)
//   Conv                  2 * N*M*out_spatial * C/group * kernel
//   ConvTranspose         2 * N*C*in_spatial * M/group * kernel
//   Attention             4*B*H*Sq*Skv*D (QK^T and AV) + 5*B*H*Sq*Skv
//                         (softmax)
//   MsAttention           the QKV projection 2*B*S*hidden*3*hidden plus the
//                         attention as above
//   per output element    FlopsPerElement of the op's row in OpFacts.def:
//                         the scalar operations of its formula (1 for
//                         arithmetic); Sum, Min, Max: operands - 1; Mean:
//                         operands; LRN 2*size+3
//   pools                 FlopsPerElement per window tap per output element:
//                         MaxPool, AveragePool 1 (compare or add); LpPool
//                         2 (|x|^p, add), GlobalLpPool 2 per input element;
//                         the per-result division or root not counted
//   Resize                3 per interpolation tap per output element (the
//                         weight, the multiply, the add): nearest 0, linear
//                         2^r taps, cubic 4^r taps, r the axes whose size
//                         changes (unknown sizes count as changed); the
//                         weights' own arithmetic not counted
//   per input element     FlopsPerElement: 1 for reductions that combine
//                         elements as they are (sum, product, extremum,
//                         ArgMax), TopK, GlobalAveragePool; 2 for ReduceL1,
//                         L2, SumSquare (|x| or x*x, then the add); 4 for
//                         ReduceLogSumExp (max, subtract, exp, add); the
//                         per-result sqrt, log or division not counted
//   the newer ONNX        counted as the scalar operations of the formula
//   functions             in the ONNX operator's spec (onnx.ai/onnx/
//                         operators), each comparison, select or
//                         transcendental function 1, as Exp or Tanh count:
//                         Softplus log(exp(x) + 1) 3, Softsign x/(1 + |x|)
//                         3, Elu 4, Selu 5, Celu 7, HardSigmoid
//                         max(0, min(1, ax + b)) 4, HardSwish 5, Mish
//                         x tanh(softplus(x)) 5, Shrink 3, Clip 2, PRelu 2,
//                         trigonometric and rounding functions 1
//   data movement         0: layouts, gathers, constants, shape ops, Cast;
//                         communication (its cost is the collective model's)
//   Opaque                estimated from its ONNX op type, or from the body
//                         it runs (ir/OpaqueFlops.cpp)
//   unknown               contrib ops without a formula, and the
//                         backward-only ops (priced from the forward)
//
//===----------------------------------------------------------------------===//

#include "ir/OpFlops.h"
#include "ir/OpFacts.h"
#include "ir/ShapeFunctions.h"

#include "ir/Graph.h"

#include "llvm/Support/MathExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

/// A product of int64 factors that becomes unknown when a factor is unknown
/// or the product overflows.
class Count {
public:
  Count(std::optional<int64_t> V = 1)
      : Known(V.has_value()), V(V.value_or(0)) {}
  Count &operator*=(std::optional<int64_t> F) {
    int64_t R = 0;
    Known = Known && F && !MulOverflow(V, *F, R);
    V = Known ? R : 0;
    return *this;
  }
  Count operator*(std::optional<int64_t> F) const {
    Count C = *this;
    C *= F;
    return C;
  }
  Count operator+(Count O) const {
    int64_t R = 0;
    if (!Known || !O.Known || AddOverflow(V, O.V, R))
      return Count(std::nullopt);
    return Count(R);
  }
  std::optional<int64_t> get() const {
    return Known ? std::optional<int64_t>(V) : std::nullopt;
  }

private:
  // A flag and a value rather than std::optional: GCC 12 at -O3 warns that
  // an optional's payload may be used uninitialized (a false positive that
  // -Werror turns into a failed Release build).
  bool Known;
  int64_t V;
};

} // namespace

static std::optional<int64_t> numElements(const Value *V) {
  if (!V)
    return std::nullopt;
  return V->getType().getStaticNumElements();
}

/// Static size of dimension I of V (negative I counts from the end).
static std::optional<int64_t> dimSize(const Value *V, int64_t I) {
  return V ? V->getType().getStaticDimSize(I) : std::nullopt;
}

/// Product of the static dimensions [From, rank) of V.
static Count trailingProduct(const Value *V, unsigned From) {
  Count C;
  for (unsigned I = From, E = V->getType().getRank(); I < E; ++I)
    C *= dimSize(V, I);
  return C;
}

static std::optional<int64_t> intAttr(const Node &N, StringRef Name) {
  const Attribute *A = N.getAttr(Name);
  if (!A || !A->isa(Attribute::Kind::Int))
    return std::nullopt;
  return A->getInt();
}

/// FLOPs of the attention core: QK^T and AV products plus the softmax.
static Count attentionCore(Count BatchHeads, std::optional<int64_t> Sq,
                           std::optional<int64_t> Skv,
                           std::optional<int64_t> DQK,
                           std::optional<int64_t> DV) {
  Count Scores = BatchHeads * Sq * Skv;
  Count Dims = Count(DQK) + Count(DV);
  return Scores * 2 * Dims.get() + Scores * 5;
}

static std::optional<int64_t> attentionFlops(const Node &N) {
  const Value *Q = N.getOperand(0), *K = N.getOperand(1), *V = N.getOperand(2);
  std::optional<int64_t> PastLen = 0;
  if (N.getNumOperands() > 4 && N.getOperand(4))
    PastLen = dimSize(N.getOperand(4), 2);
  if (Q->getType().getRank() == 4) {
    // [B, H, S, D].
    Count Skv = Count(dimSize(K, 2)) + Count(PastLen);
    return attentionCore(Count(dimSize(Q, 0)) * dimSize(Q, 1), dimSize(Q, 2),
                         Skv.get(), dimSize(Q, 3), dimSize(V, 3))
        .get();
  }
  // [B, S, H*D]: the head counts come from the attributes.
  std::optional<int64_t> QHeads = intAttr(N, "q_num_heads"),
                         KVHeads = intAttr(N, "kv_num_heads");
  std::optional<int64_t> QHidden = dimSize(Q, 2), VHidden = dimSize(V, 2);
  if (Q->getType().getRank() != 3 || !QHeads || !KVHeads || !QHidden ||
      !VHidden || *QHeads <= 0 || *KVHeads <= 0 || *QHidden % *QHeads ||
      *VHidden % *KVHeads)
    return std::nullopt;
  Count Skv = Count(dimSize(K, 1)) + Count(PastLen);
  return attentionCore(Count(dimSize(Q, 0)) * QHeads, dimSize(Q, 1), Skv.get(),
                       *QHidden / *QHeads, *VHidden / *KVHeads)
      .get();
}

static std::optional<int64_t> msAttentionFlops(const Node &N) {
  // input [B, S, hidden], weights [hidden, 3*hidden]; no past, equal QKV
  // sizes.
  const Value *X = N.getOperand(0), *W = N.getOperand(1);
  std::optional<int64_t> Heads = intAttr(N, "num_heads");
  if (N.getAttr("qkv_hidden_sizes") ||
      (N.getNumOperands() > 4 && N.getOperand(4)) || !Heads || *Heads <= 0 ||
      X->getType().getRank() != 3 || W->getType().getRank() != 2)
    return std::nullopt;
  std::optional<int64_t> Hidden = dimSize(W, 1);
  if (!Hidden || *Hidden % 3 || (*Hidden / 3) % *Heads)
    return std::nullopt;
  int64_t HeadDim = *Hidden / 3 / *Heads;
  Count Projection = Count(numElements(X)) * 2 * *Hidden;
  Count Core = attentionCore(Count(dimSize(X, 0)) * Heads, dimSize(X, 1),
                             dimSize(X, 1), HeadDim, HeadDim);
  return (Projection + Core).get();
}

/// The shape of a recurrent layer (ir/ShapeFunctionsRecurrent.cpp); nullopt
/// when a size is not static.
std::optional<RecurrentShape> autopar::getRecurrentShape(const Node &N) {
  const Value *X = N.getOperand(0);
  std::optional<int64_t> Hidden = intAttr(N, "hidden_size");
  bool BatchFirst = intAttr(N, "layout").value_or(0) == 1;
  std::optional<int64_t> Seq = dimSize(X, BatchFirst ? 1 : 0),
                         Batch = dimSize(X, BatchFirst ? 0 : 1),
                         Input = dimSize(X, 2),
                         Dirs = dimSize(N.getOperand(1), 0);
  if (!Hidden || !Seq || !Batch || !Input || !Dirs)
    return std::nullopt;
  return RecurrentShape{*Seq,    *Batch, *Input,
                        *Hidden, *Dirs,  getRecurrentGates(N.getOp())};
}

/// Per step and direction, the input and recurrent GEMMs (2 * batch * gates
/// * hidden * (input + hidden)) and the gate equations of the ONNX spec,
/// one FLOP per operation per hidden unit: LSTM 21 (8 bias adds, 4 sums of
/// the two projections, 5 activations, 3 products, 1 sum), GRU 17, RNN 4.
static std::optional<int64_t> recurrentFlops(const Node &N) {
  std::optional<RecurrentShape> S = getRecurrentShape(N);
  if (!S)
    return std::nullopt;
  int64_t PerUnit = S->Gates == 4 ? 21 : S->Gates == 3 ? 17 : 4;
  Count Steps = Count(S->Seq) * S->Batch * S->Dirs;
  Count Gemms = Steps * 2 * (S->Gates * S->Hidden) * (S->Input + S->Hidden);
  return (Gemms + Steps * S->Hidden * PerUnit).get();
}

static std::optional<int64_t> einsumFlops(const Node &N) {
  const Attribute *A = N.getAttr("equation");
  if (!A || !A->isa(Attribute::Kind::String))
    return std::nullopt;
  StringRef Inputs = A->getString().split("->").first;
  if (Inputs.contains('.'))
    return std::nullopt;
  SmallVector<StringRef, 4> Terms;
  Inputs.split(Terms, ',');
  if (Terms.size() != N.getNumOperands())
    return std::nullopt;
  std::optional<int64_t> Sizes[128];
  for (unsigned I = 0; I != Terms.size(); ++I) {
    StringRef Term = Terms[I].trim();
    if (Term.size() != N.getOperand(I)->getType().getRank())
      return std::nullopt;
    for (unsigned J = 0; J != Term.size(); ++J) {
      unsigned char C = Term[J];
      if (C >= 128)
        return std::nullopt;
      std::optional<int64_t> Size = dimSize(N.getOperand(I), J);
      if (!Size)
        return std::nullopt;
      // A broadcast dimension of 1 does not set the index's size.
      if (!Sizes[C] || *Sizes[C] == 1)
        Sizes[C] = Size;
    }
  }
  Count C = Terms.size() > 1 ? Count(2) : Count(1);
  for (const std::optional<int64_t> &S : Sizes)
    if (S)
      C *= S;
  return C.get();
}

/// Resize: 3 per tap, 2^r (linear) or 4^r (cubic) taps over the r axes
/// whose size changes; nearest copies.
static std::optional<int64_t> resizeFlops(const Node &N) {
  const Attribute *Mode = N.getAttr("mode");
  StringRef Name = Mode ? StringRef(Mode->getString()) : "nearest";
  if (Name == "nearest")
    return 0;
  int64_t TapsPerAxis = Name == "cubic" ? 4 : 2;
  const Value *In = N.getOperand(0), *Out = N.getResult(0);
  Count C(numElements(Out));
  C *= 3;
  for (unsigned I = 0, E = Out->getType().getRank(); I != E; ++I) {
    std::optional<int64_t> From = dimSize(In, I), To = dimSize(Out, I);
    if (!From || !To || *From != *To)
      C *= TapsPerAxis;
  }
  return C.get();
}

std::optional<int64_t> autopar::getForwardFlops(const Node &N) {
  const Value *Out = N.getNumResults() ? N.getResult(0) : nullptr;
  auto PerOutput = [&](int64_t PerElement) {
    return (Count(numElements(Out)) * PerElement).get();
  };
  auto PerInput = [&]() { return numElements(N.getOperand(0)); };

  const OpFacts &Facts = getOpFacts(N.getOp());
  switch (Facts.Flops) {
  case FlopRule::Unknown:
    return N.getOp() == OpId::Opaque ? getOpaqueFlops(N) : std::nullopt;
  case FlopRule::Free:
    return 0;
  case FlopRule::PerOutput:
    return PerOutput(Facts.FlopsPerElement);
  case FlopRule::SumOperands:
    return PerOutput(std::max<int64_t>(N.getNumOperands() - 1, 0) +
                     Facts.FlopsPerElement);
  case FlopRule::PerInput:
    return (Count(PerInput()) * Facts.FlopsPerElement).get();
  case FlopRule::MatMul:
    // [..., M, K] x [..., K, N]: 2 * output elements * K. A 1-D left operand
    // is [K].
    return (Count(numElements(Out)) * 2 * dimSize(N.getOperand(0), -1)).get();
  case FlopRule::Linear:
    // X [..., K] times W [K, N].
    return (Count(numElements(Out)) * 2 * dimSize(N.getOperand(1), 0)).get();
  case FlopRule::Gemm: {
    std::optional<int64_t> TransA = intAttr(N, "transA");
    int64_t KDim = TransA && *TransA ? 0 : 1;
    return (Count(numElements(Out)) * 2 * dimSize(N.getOperand(0), KDim)).get();
  }
  case FlopRule::Einsum:
    return einsumFlops(N);
  case FlopRule::Conv:
    // W [M, C/group, k...]: each output element is C/group*kernel MACs.
    return (Count(numElements(Out)) * 2 *
            trailingProduct(N.getOperand(1), 1).get())
        .get();
  case FlopRule::ConvTranspose:
    // W [C, M/group, k...]: each input element scatters M/group*kernel MACs.
    return (Count(numElements(N.getOperand(0))) * 2 *
            trailingProduct(N.getOperand(1), 1).get())
        .get();
  case FlopRule::Window: {
    Count Kernel;
    if (const Attribute *A = N.getAttr("kernel_shape"))
      for (int64_t K : A->getIntList())
        Kernel *= K;
    return (Count(numElements(Out)) * Kernel.get() * Facts.FlopsPerElement)
        .get();
  }
  case FlopRule::Resize:
    return resizeFlops(N);
  case FlopRule::LRN: {
    std::optional<int64_t> Size = intAttr(N, "size");
    if (!Size)
      return std::nullopt;
    return PerOutput(2 * *Size + 3);
  }
  case FlopRule::Attention:
    return attentionFlops(N);
  case FlopRule::MsAttention:
    return msAttentionFlops(N);
  case FlopRule::Recurrent:
    return recurrentFlops(N);
  case FlopRule::QuantizedMatMul:
    // 2 * output elements * K, the dequantization not counted (as a bias).
    return (Count(numElements(Out)) * 2 * intAttr(N, "K")).get();
  }
  return std::nullopt;
}
