//===- FuseAttention.cpp - Softmax attention into Attention ---------------===//
//
// Rewrites scaled dot-product attention, as PyTorch's exporters spell it on
// 4-D [batch, heads, sequence, head size] tensors, into ONNX's Attention
// (opset 23):
//
//   scores = MatMul(Q', KT')         Q' = Q scaled, KT' = Transpose(K) scaled
//   scores = scores scaled           Div or Mul by scalar constants
//   scores = Add(scores, mask)       optional: an additive float mask, or
//          | Where(c, -inf, scores)  a bool mask that keeps where c is false,
//          | Where(c, scores, -inf)  or where c is true
//   probs  = Softmax(scores, axis = -1)
//   probs  = Dropout(probs, ratio, training_mode)    optional
//   Y      = MatMul(probs, V)
//
// becomes Attention(Q, K, V, mask?) {scale = the product of the factors,
// is_causal?, dropout?}. A Dropout with constant ratio and mode whose mask
// is unused is folded in: in training mode as autopar's `dropout` attribute
// (Megatron-LM's and FlashAttention's attention dropout), in inference mode
// as the identity it is. No-op Casts (to the operand's own type) may sit
// between the steps. The scale may be applied to the scores, to Q, to K before
// or after its Transpose, or to several of them (GPT-2 Megatron divides Q and K
// by the fourth root of the head size); each factor is a scalar constant, and
// the scale always precedes the mask. The Transpose swaps the last two
// dimensions of K; another permutation (K still [batch, sequence, heads, size],
// so that the Transpose also moves the heads) gets a new Transpose that brings
// K to [batch, heads, sequence, size]. K and V repeated for grouped-query
// attention, Reshape(Expand(Unsqueeze(x, 2))) as the llama export writes
// repeat_interleave, are replaced by the unrepeated x, which is the repetition
// Attention itself applies.
//
// Masks: a bool mask is passed as it is when it keeps where true, and through
// its Not otherwise (the Not an exporter already applied is looked through);
// a float mask is passed as it is. Equal(buffer, 0) as a Where's condition
// (masked_fill(bias == 0, -inf)) keeps where the buffer is nonzero, which the
// causal test below looks through to the buffer's values. Its last dimension
// must provably equal the key sequence length, since Attention pads a shorter
// mask instead of broadcasting it. When the mask is a constant (or a parameter
// with inline data, or Slices of either with constant bounds: exporters slice a
// causal buffer to the sequence) that keeps exactly the positions j <= i, or is
// Trilu(ConstantOfShape(true)) {upper = 0} (torch.tril of ones), the
// rewrite sets is_causal instead; a mask whose values are unknown (a buffer
// parameter whose data was not loaded) stays a mask. The Where form fills
// with -inf, or with the scores type's lowest finite value
// (torch.finfo(dtype).min, Hugging Face's GPT-2) when the mask is causal:
// every row keeps its diagonal, so the filled scores' exponentials are 0 as
// with -inf. Under other masks a finite fill differs on rows the mask
// empties, and other finite fills replace rather than add: not rewritten.
//
// Every intermediate value (scores, scaled and masked scores, probabilities,
// the transposed K) must have no other use. A softmax computed in a wider
// float between Casts (Hugging Face's Llama upcasts to f32) becomes
// softmax_precision, ONNX's attribute for exactly that. Batch, heads and head
// sizes of Q, K and V must provably agree, so that the MatMuls did not
// broadcast. The Attention keeps the ONNX node name and the result name of the
// last MatMul; the replaced nodes are erased when nothing else uses them.
// Assumes its input verifies.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMatch.h"
#include "passes/Passes.h"

#include "ir/Graph.h"
#include "ir/ShapeValues.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace autopar;
using namespace llvm;

namespace {

struct FuseAttentionOptions {
  /// Replace K and V repeated for grouped-query attention by the unrepeated
  /// values.
  bool UnrepeatKV = true;
  /// Prove constant causal masks and set is_causal instead.
  bool DetectCausal = true;

  Error validate() const { return Error::success(); }
};

/// What a match found: the operands and attributes of the Attention, and the
/// nodes it replaces (users before producers), erased once dead.
struct AttentionMatch {
  Value *Q = nullptr;
  /// K before its Transpose, in KPerm's layout.
  Value *K = nullptr;
  /// The permutation that brings K to [batch, heads, sequence, size].
  SmallVector<int64_t, 4> KPerm;
  Value *V = nullptr;
  double Scale = 1.0;
  /// The scores are masked where the mask is false (bool) or by adding it.
  Value *Mask = nullptr;
  /// The bool mask keeps where it is false: pass Not(Mask).
  bool InvertMask = false;
  /// The Where fills with the scores type's lowest finite value rather than
  /// -inf (torch.finfo(dtype).min, as Hugging Face's GPT-2 writes it).
  bool LowestFill = false;
  /// The mask keeps exactly the positions j <= i (set by match).
  bool Causal = false;
  /// The softmax ran in a wider float (ONNX's type code), between Casts.
  std::optional<int64_t> SoftmaxPrecision;
  /// The training-mode dropout ratio on the probabilities (0: none).
  double Dropout = 0;
  SetVector<Node *> Replaced;
};

class FuseAttentionPass : public Pass {
public:
  FuseAttentionPass() {
    Options.bind("unrepeat-kv", &Opts.UnrepeatKV,
                 "Pass grouped-query K and V before their repetition");
    Options.bind("detect-causal", &Opts.DetectCausal,
                 "Set is_causal for constant causal masks");
  }

  StringRef getArgument() const override { return "fuse-attention"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      // A rewrite erases nodes before its root only: collect roots first.
      SmallVector<Node *, 16> Roots;
      for (Node &N : G->getNodes())
        if (N.getOp() == OpId::MatMul)
          Roots.push_back(&N);
      for (Node *N : Roots) {
        AttentionMatch Match;
        if (match(*N, Match))
          rewrite(*G, *N, Match);
      }
    }
    return success();
  }

private:
  bool match(Node &Root, AttentionMatch &Match) const;
  bool matchScores(Value *Scores, AttentionMatch &Match) const;
  void unrepeatKV(AttentionMatch &Match) const;
  bool isCausalMask(const AttentionMatch &Match,
                    const TensorType &Scores) const;
  void rewrite(Graph &G, Node &Root, AttentionMatch &Match) const;

  FuseAttentionOptions Opts;
};

} // namespace

/// Dimensions that are provably equal.
static bool sameDim(const Dim &A, const Dim &B) {
  return !A.isUnknown() && A == B;
}

/// The data of a Constant or of a parameter with inline data.
static const DenseTensor *getKnownData(const Value *V) {
  if (const DenseTensor *T = getConstantValue(V))
    return T;
  if (V->isParam() && V->getWeightSource() && V->getWeightSource()->Data)
    return &*V->getWeightSource()->Data;
  return nullptr;
}

/// The integers of constant operand I of N (absent: nullopt).
static std::optional<ArrayRef<int64_t>> getConstantInts(const Node &N,
                                                        unsigned I) {
  if (I >= N.getNumOperands() || !N.getOperand(I))
    return std::nullopt;
  const DenseTensor *T = getConstantValue(N.getOperand(I));
  if (!T || T->isFloat())
    return std::nullopt;
  return T->getInts();
}

/// The data of V when it is known data (getKnownData) or Slices of it with
/// constant bounds and unit steps, as exporters take a causal buffer's first
/// rows and columns (`bias[:, :, :s, :s]`); nullopt otherwise.
static std::optional<DenseTensor> getSlicedKnownData(const Value *V,
                                                     unsigned Depth = 0) {
  if (const DenseTensor *T = getKnownData(V))
    return *T;
  const Node *S = V->getDefiningNode();
  if (Depth == 4 || !S || S->getOp() != OpId::Slice)
    return std::nullopt;
  std::optional<DenseTensor> In =
      getSlicedKnownData(S->getOperand(0), Depth + 1);
  std::optional<ArrayRef<int64_t>> Starts = getConstantInts(*S, 1),
                                   Ends = getConstantInts(*S, 2),
                                   Axes = getConstantInts(*S, 3),
                                   Steps = getConstantInts(*S, 4);
  bool HasAxes = S->getNumOperands() > 3 && S->getOperand(3);
  bool HasSteps = S->getNumOperands() > 4 && S->getOperand(4);
  if (!In || !Starts || !Ends || Starts->size() != Ends->size() ||
      (HasAxes && (!Axes || Axes->size() != Starts->size())) ||
      (HasSteps &&
       (!Steps || any_of(*Steps, [](int64_t X) { return X != 1; }))))
    return std::nullopt;
  SmallVector<int64_t, 4> Sizes = In->getType().getStaticSizes();
  int64_t Rank = Sizes.size();
  SmallVector<int64_t, 4> Begin(Rank, 0), Count(Sizes.begin(), Sizes.end());
  for (size_t I = 0, E = Starts->size(); I != E; ++I) {
    int64_t Axis = HasAxes ? (*Axes)[I] : int64_t(I);
    if (Axis < 0)
      Axis += Rank;
    if (Axis < 0 || Axis >= Rank)
      return std::nullopt;
    auto Clamp = [&](int64_t X) {
      if (X < 0)
        X = std::max<int64_t>(X, -Sizes[Axis]) + Sizes[Axis];
      return std::min(X, Sizes[Axis]);
    };
    int64_t B = Clamp((*Starts)[I]), End = Clamp((*Ends)[I]);
    Begin[Axis] = B;
    Count[Axis] = std::max<int64_t>(End - B, 0);
  }
  // Row-major copy of the selected block.
  int64_t Total = 1;
  for (int64_t C : Count)
    Total *= C;
  std::vector<int64_t> Ints;
  std::vector<double> Floats;
  SmallVector<int64_t, 4> Index(Rank, 0);
  for (int64_t Out = 0; Out != Total; ++Out) {
    int64_t Flat = 0;
    for (int64_t D = 0; D != Rank; ++D)
      Flat = Flat * Sizes[D] + Begin[D] + Index[D];
    if (In->isFloat())
      Floats.push_back(In->getFloats()[Flat]);
    else
      Ints.push_back(In->getInts()[Flat]);
    for (int64_t D = Rank - 1; D >= 0 && ++Index[D] == Count[D]; --D)
      Index[D] = 0;
  }
  TensorType Type = TensorType::get(In->getType().getElementType(), Count);
  if (In->isFloat())
    return DenseTensor(Type, std::move(Floats));
  return DenseTensor(Type, std::move(Ints));
}

/// Entry I of a Slice's integer operand (starts, ends, axes, steps) as
/// evaluateShapeValue knows it.
static std::optional<ShapeEntry> getSliceEntry(const Node &S, unsigned Operand,
                                               size_t I) {
  if (Operand >= S.getNumOperands() || !S.getOperand(Operand))
    return std::nullopt;
  std::optional<ShapeValue> V = evaluateShapeValue(S.getOperand(Operand));
  if (!V || I >= V->size())
    return std::nullopt;
  return (*V)[I];
}

/// When V is Slices with unit steps of known data (getKnownData) that take
/// rows and columns [0, E) of the last two dimensions, with the same E on
/// both (a constant or one symbolic size: `bias[:, :, :s, :s]` where s is
/// the sequence), and nothing of the others: that data. A leading square
/// block of a lower triangle is a lower triangle, whatever E is.
static const DenseTensor *getLeadingBlockSource(const Value *V) {
  std::optional<ShapeEntry> RowEnd, ColEnd;
  unsigned Rank = V->getType().getRank();
  for (unsigned Depth = 0; Depth != 4; ++Depth) {
    if (const DenseTensor *T = getKnownData(V))
      return RowEnd && ColEnd && T->getType().getRank() == Rank ? T : nullptr;
    const Node *S = V->getDefiningNode();
    if (!S || S->getOp() != OpId::Slice)
      return nullptr;
    std::optional<ShapeValue> Starts = evaluateShapeValue(S->getOperand(1));
    if (!Starts)
      return nullptr;
    for (size_t I = 0, E = Starts->size(); I != E; ++I) {
      std::optional<ShapeEntry> Axis = getSliceEntry(*S, 3, I),
                                Step = getSliceEntry(*S, 4, I),
                                End = getSliceEntry(*S, 2, I);
      int64_t A = S->getNumOperands() > 3 && S->getOperand(3)
                      ? (Axis && Axis->Int ? *Axis->Int : -1000)
                      : int64_t(I);
      if (A < 0)
        A += Rank;
      bool UnitStep = !(S->getNumOperands() > 4 && S->getOperand(4)) ||
                      (Step && Step->Int == 1);
      if (A < int64_t(Rank) - 2 || A >= int64_t(Rank) || !UnitStep || !End ||
          (*Starts)[I].Int != 0)
        return nullptr;
      std::optional<ShapeEntry> &Slot =
          A == int64_t(Rank) - 2 ? RowEnd : ColEnd;
      if (Slot)
        return nullptr;
      Slot = End;
    }
    if (RowEnd && ColEnd &&
        !(RowEnd->Int == ColEnd->Int &&
          (RowEnd->Int || (!RowEnd->Symbolic.isUnknown() &&
                           RowEnd->Symbolic == ColEnd->Symbolic))))
      return nullptr;
    V = S->getOperand(0);
  }
  return nullptr;
}

/// The value of a float constant with one element.
static std::optional<double> getScalarFloat(const Value *V) {
  const DenseTensor *T = getConstantValue(V);
  if (!T || !T->isFloat() || T->size() != 1)
    return std::nullopt;
  return T->getFloats()[0];
}

/// A Cast to its operand's own type.
static bool isNoOpCast(const Node *N) {
  return N && N->getOp() == OpId::Cast &&
         N->getResult(0)->getType() == N->getOperand(0)->getType();
}

/// Walks back from V through single-use no-op Casts; records them.
static Value *skipCasts(Value *V, SetVector<Node *> &Replaced) {
  while (isSingleUse(V) && isNoOpCast(V->getDefiningNode())) {
    Replaced.insert(V->getDefiningNode());
    V = V->getDefiningNode()->getOperand(0);
  }
  return V;
}

/// Walks back from V through single-use no-op Casts and multiplications and
/// divisions by finite non-zero scalar constants that do not broadcast;
/// multiplies Scale by their factors and records the nodes.
static Value *skipScale(Value *V, double &Scale, SetVector<Node *> &Replaced) {
  while (isSingleUse(V)) {
    Node *D = V->getDefiningNode();
    if (isNoOpCast(D)) {
      Replaced.insert(D);
      V = D->getOperand(0);
      continue;
    }
    if (!D || (D->getOp() != OpId::Mul && D->getOp() != OpId::Div))
      break;
    unsigned ConstIndex = 1;
    std::optional<double> C = getScalarFloat(D->getOperand(1));
    if (!C && D->getOp() == OpId::Mul) {
      ConstIndex = 0;
      C = getScalarFloat(D->getOperand(0));
    }
    Value *Other = D->getOperand(1 - ConstIndex);
    if (!C || !std::isfinite(*C) || *C == 0.0 ||
        Other->getType() != V->getType())
      break;
    Scale = D->getOp() == OpId::Mul ? Scale * *C : Scale / *C;
    Replaced.insert(D);
    V = Other;
  }
  return V;
}

static bool isIdentityPerm(ArrayRef<int64_t> Perm) {
  for (unsigned I = 0, E = Perm.size(); I != E; ++I)
    if (Perm[I] != static_cast<int64_t>(I))
      return false;
  return true;
}

/// Transpose's permutation (absent: reversed dimensions).
static SmallVector<int64_t, 4> getPerm(const Node &Transpose) {
  unsigned Rank = Transpose.getResult(0)->getType().getRank();
  if (const Attribute *A = Transpose.getAttr("perm"))
    return SmallVector<int64_t, 4>(A->getIntList().begin(),
                                   A->getIntList().end());
  SmallVector<int64_t, 4> Perm(Rank);
  std::iota(Perm.rbegin(), Perm.rend(), 0);
  return Perm;
}

/// The lowest finite value of a float element type (torch.finfo.min).
static std::optional<double> getLowestFinite(ElementType Ty) {
  switch (Ty) {
  case ElementType::F64:
    return -std::numeric_limits<double>::max();
  case ElementType::F32:
    return -double(std::numeric_limits<float>::max());
  case ElementType::F16:
    return -65504.0;
  case ElementType::BF16:
    return -0x1.fep127; // (2 - 2^-7) * 2^127
  default:
    return std::nullopt;
  }
}

/// Whether V is all true: ConstantOfShape of a nonzero scalar, or known data
/// without a zero.
static bool isAllTrue(const Value *V) {
  if (const DenseTensor *T = getKnownData(V))
    return !T->isFloat() &&
           none_of(T->getInts(), [](int64_t X) { return X == 0; });
  const Node *N = V->getDefiningNode();
  if (!N || N->getOp() != OpId::ConstantOfShape)
    return false;
  const Attribute *A = N->getAttr("value");
  return A && !A->getTensor().isFloat() && A->getTensor().size() == 1 &&
         A->getTensor().getInts()[0] != 0;
}

/// Whether Mask is torch.tril(ones(S, S)) as exporters write it:
/// Trilu(all true) {upper = 0} with no offset, keeping j <= i.
static bool isLowerTriangleOfOnes(const Value *Mask) {
  const Node *T = Mask->getDefiningNode();
  if (!T || T->getOp() != OpId::Trilu || !isAllTrue(T->getOperand(0)))
    return false;
  const Attribute *Upper = T->getAttr("upper");
  if (!Upper || Upper->getInt() != 0)
    return false;
  if (T->getNumOperands() > 1 && T->getOperand(1)) {
    std::optional<ArrayRef<int64_t>> K = getConstantInts(*T, 1);
    if (!K || K->size() != 1 || (*K)[0] != 0)
      return false;
  }
  return true;
}

bool FuseAttentionPass::matchScores(Value *Scores,
                                    AttentionMatch &Match) const {
  Value *Product = skipScale(Scores, Match.Scale, Match.Replaced);
  Node *QK = Product->getDefiningNode();
  if (!isSingleUse(Product) || !QK || QK->getOp() != OpId::MatMul ||
      Product->getType().getRank() != 4)
    return false;
  Match.Replaced.insert(QK);
  Match.Q = skipScale(QK->getOperand(0), Match.Scale, Match.Replaced);
  Value *KT = skipScale(QK->getOperand(1), Match.Scale, Match.Replaced);
  Node *Transpose = KT->getDefiningNode();
  if (!isSingleUse(KT) || !Transpose || Transpose->getOp() != OpId::Transpose ||
      KT->getType().getRank() != 4 || Match.Q->getType().getRank() != 4)
    return false;
  Match.Replaced.insert(Transpose);
  // KT = transpose(K0, P): K = transpose(K0, P with its last two swapped).
  Match.KPerm = getPerm(*Transpose);
  std::swap(Match.KPerm[2], Match.KPerm[3]);
  Match.K = skipScale(Transpose->getOperand(0), Match.Scale, Match.Replaced);
  return true;
}

/// ONNX's data type code of a float element type wider than 16 bits (the
/// values softmax_precision takes); nullopt for others.
static std::optional<int64_t> getWideFloatCode(ElementType Ty) {
  if (Ty == ElementType::F32)
    return 1;
  if (Ty == ElementType::F64)
    return 11;
  return std::nullopt;
}

/// When Probs is Cast(Softmax(Cast(X to W)) back to X's type), W a wider
/// float (Hugging Face's Llama: softmax(x, dtype=float32).to(x.dtype)):
/// records both Casts, sets Code to W's softmax_precision and returns the
/// wide probabilities; Probs otherwise.
static Value *skipWidenedSoftmax(Value *Probs, std::optional<int64_t> &Code,
                                 SetVector<Node *> &Replaced) {
  Node *Back = Probs->getDefiningNode();
  if (!isSingleUse(Probs) || !Back || Back->getOp() != OpId::Cast)
    return Probs;
  Value *Wide = Back->getOperand(0);
  Node *Softmax = Wide->getDefiningNode();
  if (!isSingleUse(Wide) || !Softmax || Softmax->getOp() != OpId::Softmax)
    return Probs;
  Value *WideIn = Softmax->getOperand(0);
  Node *Up = WideIn->getDefiningNode();
  if (!isSingleUse(WideIn) || !Up || Up->getOp() != OpId::Cast)
    return Probs;
  ElementType Narrow = Probs->getType().getElementType(),
              WideTy = Wide->getType().getElementType();
  std::optional<int64_t> WideCode = getWideFloatCode(WideTy);
  if (!WideCode || Up->getOperand(0)->getType() != Probs->getType() ||
      WideIn->getType().getElementType() != WideTy ||
      getElementTypeBits(WideTy) <= getElementTypeBits(Narrow) ||
      !isFloatElementType(Narrow))
    return Probs;
  Replaced.insert(Back);
  Replaced.insert(Up);
  Code = WideCode;
  return Wide;
}

/// When Probs is Dropout(P, ratio, training_mode) whose mask nobody reads,
/// with a constant ratio and mode (ONNX's defaults when absent: 0.5, and
/// inference, where it is the identity): records it, sets Ratio in training
/// mode and returns P; Probs otherwise.
static Value *skipDropout(Value *Probs, double &Ratio,
                          SetVector<Node *> &Replaced) {
  Node *D = Probs->getDefiningNode();
  if (!isSingleUse(Probs) || !D || D->getOp() != OpId::Dropout ||
      (D->getNumResults() > 1 && D->getResult(1) && D->getResult(1)->hasUses()))
    return Probs;
  std::optional<DropoutSetting> S = getDropoutSetting(*D);
  if (!S || !(S->Ratio >= 0 && S->Ratio < 1))
    return Probs;
  Replaced.insert(D);
  Ratio = S->Training ? S->Ratio : 0;
  return D->getOperand(0);
}

bool FuseAttentionPass::match(Node &Root, AttentionMatch &Match) const {
  Match.V = Root.getOperand(1);
  Value *Probs = skipWidenedSoftmax(
      skipCasts(skipDropout(skipCasts(Root.getOperand(0), Match.Replaced),
                            Match.Dropout, Match.Replaced),
                Match.Replaced),
      Match.SoftmaxPrecision, Match.Replaced);
  Node *Softmax = Probs->getDefiningNode();
  if (!isSingleUse(Probs) || !Softmax || Softmax->getOp() != OpId::Softmax ||
      Probs->getType().getRank() != 4 || Match.V->getType().getRank() != 4 ||
      Root.getResult(0)->getType().getRank() != 4)
    return false;
  const Attribute *Axis = Softmax->getAttr("axis");
  if (Axis && Axis->getInt() != -1 && Axis->getInt() != 3)
    return false;
  Match.Replaced.insert(Softmax);

  Value *Masked = Softmax->getOperand(0);
  if (Match.SoftmaxPrecision)
    Masked = Masked->getDefiningNode()->getOperand(0); // The widening Cast.
  Masked = skipCasts(Masked, Match.Replaced);
  const TensorType &ScoresType = Masked->getType();
  Node *MaskNode = Masked->getDefiningNode();
  Value *Scores = Masked;
  bool ScoresMatched = false;
  if (isSingleUse(Masked) && MaskNode && MaskNode->getOp() == OpId::Add) {
    // Either operand may be the scores; the other is the mask.
    for (unsigned I : {0u, 1u}) {
      // Only V and the replaced nodes are set so far: start from them.
      AttentionMatch Try = Match;
      Try.Replaced.insert(MaskNode);
      if (MaskNode->getOperand(I)->getType() != ScoresType ||
          !matchScores(MaskNode->getOperand(I), Try))
        continue;
      Try.Mask = MaskNode->getOperand(1 - I);
      Match = std::move(Try);
      ScoresMatched = true;
      break;
    }
    if (!Match.Mask)
      return false;
  } else if (isSingleUse(Masked) && MaskNode &&
             MaskNode->getOp() == OpId::Where) {
    Value *Cond = MaskNode->getOperand(0);
    std::optional<double> Fill1 = getScalarFloat(MaskNode->getOperand(1));
    std::optional<double> Fill2 = getScalarFloat(MaskNode->getOperand(2));
    std::optional<double> Lowest = getLowestFinite(ScoresType.getElementType());
    // The lowest value up to the text form's rounding (f32's prints as
    // -3.4028235e+38).
    auto IsFill = [&](std::optional<double> F) {
      return F && ((std::isinf(*F) && *F < 0) ||
                   (Lowest && *F <= *Lowest * (1 - 1e-6)));
    };
    bool FillFirst = IsFill(Fill1);
    bool FillSecond = IsFill(Fill2);
    if (FillFirst == FillSecond ||
        Cond->getType().getElementType() != ElementType::Bool)
      return false;
    Match.LowestFill = !std::isinf(FillFirst ? *Fill1 : *Fill2);
    Scores = MaskNode->getOperand(FillFirst ? 2 : 1);
    if (Scores->getType() != ScoresType)
      return false;
    Match.Replaced.insert(MaskNode);
    Match.Mask = Cond;
    // Where(c, -inf, s) keeps where c is false. Look through the Not (and
    // no-op Casts) that exporters put on a keep-where-true buffer.
    Match.InvertMask = FillFirst;
    while (true) {
      Node *D = Match.Mask->getDefiningNode();
      if (isNoOpCast(D)) {
        Match.Replaced.insert(D);
        Match.Mask = D->getOperand(0);
      } else if (D && D->getOp() == OpId::Not) {
        Match.Replaced.insert(D);
        Match.Mask = D->getOperand(0);
        Match.InvertMask = !Match.InvertMask;
      } else {
        break;
      }
    }
  }
  if (!ScoresMatched && !matchScores(Scores, Match))
    return false;

  // A causal mask is not passed; any other must not be padded by Attention:
  // its last dimension is the key sequence length. (The masking node's
  // result type being the scores' type already rules out a mask that
  // broadcasts the scores.)
  Match.Causal =
      Match.Mask && Opts.DetectCausal && isCausalMask(Match, ScoresType);
  if (Match.Mask && !Match.Causal) {
    const TensorType &M = Match.Mask->getType();
    if (M.getRank() == 0 || M.getRank() > 4 ||
        !sameDim(M.getDim(M.getRank() - 1), ScoresType.getDim(3)))
      return false;
  }

  // Shapes: no broadcasting in either MatMul.
  const TensorType &Q = Match.Q->getType(), &K0 = Match.K->getType(),
                   &V = Match.V->getType();
  if (Q.getElementType() != K0.getElementType() ||
      Q.getElementType() != V.getElementType())
    return false;
  auto KDim = [&](unsigned I) -> const Dim & {
    return K0.getDim(Match.KPerm[I]);
  };
  if (!sameDim(Q.getDim(0), KDim(0)) || !sameDim(Q.getDim(1), KDim(1)) ||
      !sameDim(Q.getDim(3), KDim(3)) || !sameDim(V.getDim(0), Q.getDim(0)) ||
      !sameDim(V.getDim(1), Q.getDim(1)) || !sameDim(V.getDim(2), KDim(2)))
    return false;
  // A finite fill equals -inf only on rows that keep a position: the masked
  // scores' exponentials round to zero next to the kept maximum. A causal
  // mask keeps every row's diagonal; any other mask stays unfused.
  if (Match.LowestFill && !Match.Causal)
    return false;
  if (Opts.UnrepeatKV)
    unrepeatKV(Match);
  return true;
}

/// When V is Reshape(Expand(Unsqueeze(x, axis 2))) that repeats each head of
/// x [b, kv, s, d] Rep times consecutively into [b, kv * Rep, s, d] (what
/// repeat_interleave on the heads gives), returns x and records the nodes.
static Value *getUnrepeated(Value *V, int64_t &Rep,
                            SmallVectorImpl<Node *> &Nodes) {
  Node *Reshape = V->getDefiningNode();
  if (!Reshape || Reshape->getOp() != OpId::Reshape)
    return nullptr;
  Node *Expand = Reshape->getOperand(0)->getDefiningNode();
  if (!Expand || Expand->getOp() != OpId::Expand)
    return nullptr;
  Node *Unsqueeze = Expand->getOperand(0)->getDefiningNode();
  if (!Unsqueeze || Unsqueeze->getOp() != OpId::Unsqueeze)
    return nullptr;
  SmallVector<int64_t, 1> Axes;
  if (const Attribute *A = Unsqueeze->getAttr("axes"))
    Axes.assign(A->getIntList().begin(), A->getIntList().end());
  else if (Unsqueeze->getNumOperands() > 1 && Unsqueeze->getOperand(1))
    if (const DenseTensor *T = getConstantValue(Unsqueeze->getOperand(1)))
      Axes.assign(T->getInts().begin(), T->getInts().end());
  if (Axes.size() != 1 || (Axes[0] != 2 && Axes[0] != -3))
    return nullptr;
  Value *X = Unsqueeze->getOperand(0);
  const TensorType &XT = X->getType();
  const TensorType &ET = Expand->getResult(0)->getType();
  const TensorType &RT = V->getType();
  if (XT.getRank() != 4 || ET.getRank() != 5 || RT.getRank() != 4 ||
      !ET.getDim(2).isStatic())
    return nullptr;
  // Expand only replicates along the new axis, and Reshape merges it into
  // the heads, the kv head being the major index.
  Rep = ET.getDim(2).getSize();
  static const unsigned Kept[][2] = {{0, 0}, {1, 1}, {2, 3}, {3, 4}};
  for (const auto &P : Kept)
    if (!sameDim(XT.getDim(P[0]), ET.getDim(P[1])))
      return nullptr;
  if (!sameDim(RT.getDim(0), XT.getDim(0)) ||
      !sameDim(RT.getDim(1), XT.getDim(1) * Dim::get(Rep)) ||
      !sameDim(RT.getDim(2), XT.getDim(2)) ||
      !sameDim(RT.getDim(3), XT.getDim(3)))
    return nullptr;
  Nodes.append({Reshape, Expand, Unsqueeze});
  return X;
}

void FuseAttentionPass::unrepeatKV(AttentionMatch &Match) const {
  // Only K that needs no new Transpose can be looked through.
  if (!isIdentityPerm(Match.KPerm))
    return;
  int64_t KRep = 0, VRep = 0;
  SmallVector<Node *, 6> Nodes;
  Value *K = getUnrepeated(Match.K, KRep, Nodes);
  Value *V = getUnrepeated(Match.V, VRep, Nodes);
  if (!K || !V || KRep != VRep || KRep < 1 ||
      !sameDim(K->getType().getDim(1), V->getType().getDim(1)))
    return;
  Match.K = K;
  Match.V = V;
  for (Node *N : Nodes)
    Match.Replaced.insert(N);
}

bool FuseAttentionPass::isCausalMask(const AttentionMatch &Match,
                                     const TensorType &Scores) const {
  const TensorType &MaskType = Match.Mask->getType();
  if (!Match.InvertMask && isLowerTriangleOfOnes(Match.Mask))
    return MaskType.getRank() >= 2 &&
           sameDim(MaskType.getDim(MaskType.getRank() - 2), Scores.getDim(2)) &&
           sameDim(MaskType.getDim(MaskType.getRank() - 1), Scores.getDim(3));
  // masked_fill(bias == 0, -inf) on a float or integer buffer: the mask is
  // Equal(bias, 0), which keeps where the buffer is nonzero.
  const Value *Source = Match.Mask;
  bool Invert = Match.InvertMask, Nonzero = false;
  if (const Node *Eq = Source->getDefiningNode();
      Eq && Eq->getOp() == OpId::Equal) {
    for (unsigned I : {0u, 1u}) {
      const DenseTensor *Zero = getConstantValue(Eq->getOperand(1 - I));
      if (!Zero || Zero->size() != 1 ||
          (Zero->isFloat() ? Zero->getFloats()[0] != 0.0
                           : Zero->getInts()[0] != 0))
        continue;
      Source = Eq->getOperand(I);
      Invert = !Invert;
      Nonzero = true;
      break;
    }
  }
  std::optional<DenseTensor> Known = getSlicedKnownData(Source);
  const DenseTensor *Data = Known ? &*Known : nullptr;
  if (Data) {
    const TensorType &T = Data->getType();
    unsigned Rank = T.getRank();
    if (Rank < 2 || !T.getDim(Rank - 2).isStatic() ||
        !sameDim(T.getDim(Rank - 2), Scores.getDim(2)) ||
        !sameDim(T.getDim(Rank - 1), Scores.getDim(3)))
      return false;
  } else {
    // A leading square block of a buffer, of a size not known here (the
    // symbolic sequence): causal when the whole buffer is, as the scores
    // are square too.
    Data = getLeadingBlockSource(Source);
    const TensorType *T = Data ? &Data->getType() : nullptr;
    if (!T || T->getRank() < 2 ||
        !sameDim(Scores.getDim(2), Scores.getDim(3)) ||
        !sameDim(T->getDim(T->getRank() - 2), T->getDim(T->getRank() - 1)))
      return false;
  }
  const TensorType &T = Data->getType();
  unsigned Rank = T.getRank();
  int64_t Rows = T.getDim(Rank - 2).getSize();
  int64_t Cols = T.getDim(Rank - 1).getSize();
  bool IsBool = T.getElementType() == ElementType::Bool;
  for (size_t Index = 0, E = Data->size(); Index != E; ++Index) {
    int64_t I = (Index / Cols) % Rows, J = Index % Cols;
    bool Keep;
    if (IsBool || Nonzero) {
      bool IsNonzero = Data->isFloat() ? Data->getFloats()[Index] != 0.0
                                       : Data->getInts()[Index] != 0;
      Keep = IsNonzero != Invert;
    } else {
      double F = Data->getFloats()[Index];
      if (F != 0.0 && !(std::isinf(F) && F < 0))
        return false;
      Keep = F == 0.0;
    }
    if (Keep != (J <= I))
      return false;
  }
  return true;
}

void FuseAttentionPass::rewrite(Graph &G, Node &Root,
                                AttentionMatch &Match) const {
  Value *Old = Root.getResult(0);
  std::string Name = Old->getName().str();

  Value *K = Match.K;
  if (!isIdentityPerm(Match.KPerm)) {
    const TensorType &KT = K->getType();
    SmallVector<Dim, 4> Shape;
    for (int64_t P : Match.KPerm)
      Shape.push_back(KT.getDim(P));
    AttrDict Attrs;
    Attrs.set("perm", Attribute::getIntList(std::vector<int64_t>(
                          Match.KPerm.begin(), Match.KPerm.end())));
    K = G.createNode(OpId::Transpose, {K},
                     {TensorType(KT.getElementType(), Shape)}, std::move(Attrs),
                     {G.getUniqueName(Name + ".key")}, &Root)
            ->getResult(0);
  }

  AttrDict Attrs;
  Attrs.set("scale", Attribute::getFloat(Match.Scale));
  if (Match.SoftmaxPrecision)
    Attrs.set("softmax_precision", Attribute::getInt(*Match.SoftmaxPrecision));
  if (Match.Dropout > 0)
    Attrs.set("dropout", Attribute::getFloat(Match.Dropout));
  SmallVector<Value *, 4> Operands = {Match.Q, K, Match.V};
  if (Match.Causal) {
    Attrs.set("is_causal", Attribute::getInt(1));
  } else if (Match.Mask) {
    Value *Mask = Match.Mask;
    if (Match.InvertMask)
      Mask = G.createNode(OpId::Not, {Mask}, {Mask->getType()}, AttrDict(),
                          {G.getUniqueName(Name + ".keep")}, &Root)
                 ->getResult(0);
    Operands.push_back(Mask);
  }
  Node *Attention =
      G.createNode(OpId::Attention, Operands, {Old->getType()},
                   std::move(Attrs), {G.getUniqueName(Name + ".attn")}, &Root);
  Attention->setName(Root.getName());
  Old->replaceAllUsesWith(Attention->getResult(0));
  Root.erase();
  G.renameValue(Attention->getResult(0), Name);

  // Erase what became dead, users first (one sweep suffices in that order,
  // a second one catches producers recorded before their users).
  SmallVector<Node *, 16> Dead(Match.Replaced.begin(), Match.Replaced.end());
  for (int Sweep = 0; Sweep != 2; ++Sweep)
    for (Node *&N : Dead) {
      if (!N || any_of(N->getResults(), [](Value *R) { return R->hasUses(); }))
        continue;
      N->erase();
      N = nullptr;
    }
}

std::unique_ptr<Pass> autopar::createFuseAttentionPass() {
  return std::make_unique<FuseAttentionPass>();
}
