//===- ShapeFunctionsAttention.cpp - Attention ---------------------------===//
//
// Shape functions of ONNX's Attention and RotaryEmbedding (opset 23) and of
// the com.microsoft contrib ops Attention, GroupQueryAttention and
// EmbedLayerNormalization. These ops have no verifiers, so the shape
// functions also check the attribute values they depend on.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// ONNX Attention's operand indices.
enum AttentionOperand : unsigned {
  AttnQ,
  AttnK,
  AttnV,
  AttnMask,
  AttnPastKey,
  AttnPastValue
};

/// Q, K or V of ONNX Attention as [batch, heads, sequence, head size].
struct HeadView {
  Dim Batch, Heads, Seq, HeadSize;
};

/// Operand I as a HeadView: a 4-D operand as it is, a 3-D one [batch, seq,
/// heads * head size] split by the NumHeads attribute (named HeadsAttr).
Expected<HeadView> viewHeads(const ShapeContext &Ctx, unsigned I,
                             std::optional<int64_t> NumHeads,
                             StringRef HeadsAttr) {
  const TensorType &T = Ctx.getOperandType(I);
  if (T.getRank() == 4) {
    if (NumHeads && !mayEqual(T.getDim(1), Dim::get(*NumHeads)))
      return Ctx.error("'" + HeadsAttr + "' is " + Twine(*NumHeads) + " but " +
                       describe(Ctx, I) + " has " + dimStr(T.getDim(1)) +
                       " heads");
    return HeadView{T.getDim(0), T.getDim(1), T.getDim(2), T.getDim(3)};
  }
  Expected<Dim> HeadSize =
      splitHeads(Ctx, I, 2, *NumHeads, "'" + HeadsAttr + "'");
  if (!HeadSize)
    return HeadSize.takeError();
  return HeadView{T.getDim(0), Dim::get(*NumHeads), T.getDim(1), *HeadSize};
}

/// The attributes of ONNX Attention that have a fixed set of values.
Error checkAttentionAttrs(const ShapeContext &Ctx) {
  if (Error E = checkFlag(Ctx, "is_causal"))
    return E;
  int64_t Mode = Ctx.getIntAttr("qk_matmul_output_mode", 0);
  if (Mode < 0 || Mode > 3)
    return Ctx.error("'qk_matmul_output_mode' must be 0, 1, 2 or 3, got " +
                     Twine(Mode));
  // ONNX data type codes of float, float16, double and bfloat16.
  if (Ctx.getAttr("softmax_precision")) {
    int64_t P = Ctx.getIntAttr("softmax_precision", 0);
    if (P != 1 && P != 10 && P != 11 && P != 16)
      return Ctx.error("'softmax_precision' must be a float type (1, 10, 11 "
                       "or 16), got " +
                       Twine(P));
  }
  if (const Attribute *Dropout = Ctx.getAttr("dropout")) {
    double Ratio = Dropout->getFloat();
    if (!(Ratio >= 0 && Ratio < 1))
      return Ctx.error("'dropout' must be in [0, 1), got " +
                       Twine(llvm::formatv("{0}", Ratio).str()));
  }
  return Error::success();
}

/// The views of Q, K and V with their shared dimensions merged.
struct AttentionViews {
  HeadView Q, K, V;
};

Expected<AttentionViews> getAttentionViews(const ShapeContext &Ctx) {
  unsigned Rank = Ctx.getOperandType(AttnQ).getRank();
  if (Rank != 3 && Rank != 4)
    return Ctx.error(describe(Ctx, AttnQ) + " must have rank 3 or 4");
  for (unsigned I : {AttnK, AttnV})
    if (Ctx.getOperandType(I).getRank() != Rank)
      return Ctx.error(describe(Ctx, I) + " must have the rank of " +
                       describe(Ctx, AttnQ));
  auto QHeads = getPositiveAttr(Ctx, "q_num_heads");
  if (!QHeads)
    return QHeads.takeError();
  auto KVHeads = getPositiveAttr(Ctx, "kv_num_heads");
  if (!KVHeads)
    return KVHeads.takeError();
  if (Rank == 3 && (!*QHeads || !*KVHeads))
    return Ctx.error("'q_num_heads' and 'kv_num_heads' are required with 3-D " +
                     describe(Ctx, AttnQ));
  Expected<HeadView> Q = viewHeads(Ctx, AttnQ, *QHeads, "q_num_heads");
  if (!Q)
    return Q.takeError();
  Expected<HeadView> K = viewHeads(Ctx, AttnK, *KVHeads, "kv_num_heads");
  if (!K)
    return K.takeError();
  Expected<HeadView> V = viewHeads(Ctx, AttnV, *KVHeads, "kv_num_heads");
  if (!V)
    return V.takeError();
  AttentionViews Views{*Q, *K, *V};
  if (Error E = mergeDim(Ctx, Views.Q.Batch, Views.K.Batch, "batch sizes",
                         AttnQ, AttnK))
    return E;
  if (Error E = mergeDim(Ctx, Views.Q.Batch, Views.V.Batch, "batch sizes",
                         AttnQ, AttnV))
    return E;
  if (Error E = mergeDim(Ctx, Views.K.Heads, Views.V.Heads, "numbers of heads",
                         AttnK, AttnV))
    return E;
  if (Error E = mergeDim(Ctx, Views.K.Seq, Views.V.Seq, "sequence lengths",
                         AttnK, AttnV))
    return E;
  if (Error E = mergeDim(Ctx, Views.Q.HeadSize, Views.K.HeadSize, "head sizes",
                         AttnQ, AttnK))
    return E;
  // Grouped-query attention: each K/V head serves a group of Q heads.
  const Dim &QH = Views.Q.Heads, &KH = Views.K.Heads;
  if (QH.isStatic() && KH.isStatic() && KH.getSize() != 0 &&
      QH.getSize() % KH.getSize() != 0)
    return Ctx.error("the " + dimStr(QH) + " heads of " + describe(Ctx, AttnQ) +
                     " are not a multiple of the " + dimStr(KH) + " heads of " +
                     describe(Ctx, AttnK));
  return Views;
}

/// past_key [batch, kv_heads, past_seq, head_size] and past_value [batch,
/// kv_heads, past_seq, v_head_size], merged into Views; returns past_seq,
/// or nullopt without a past.
Expected<std::optional<Dim>> getPastSequence(const ShapeContext &Ctx,
                                             AttentionViews &Views) {
  bool HasKey = Ctx.hasOperand(AttnPastKey);
  if (HasKey != Ctx.hasOperand(AttnPastValue))
    return Ctx.error("past_key and past_value must be given together");
  if (!HasKey)
    return std::nullopt;
  if (Error E = checkSameElementTypeAs(Ctx, AttnPastKey, AttnQ))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, AttnPastValue, AttnV))
    return E;
  for (unsigned I : {AttnPastKey, AttnPastValue})
    if (Error E = checkRank(Ctx, I, 4))
      return E;
  const TensorType &PK = Ctx.getOperandType(AttnPastKey);
  const TensorType &PV = Ctx.getOperandType(AttnPastValue);
  struct Check {
    Dim &Known;
    const TensorType &Past;
    unsigned Operand, Ref, D;
    const char *What;
  } Checks[] = {
      {Views.Q.Batch, PK, AttnPastKey, AttnQ, 0, "batch sizes"},
      {Views.Q.Batch, PV, AttnPastValue, AttnQ, 0, "batch sizes"},
      {Views.K.Heads, PK, AttnPastKey, AttnK, 1, "numbers of heads"},
      {Views.K.Heads, PV, AttnPastValue, AttnV, 1, "numbers of heads"},
      {Views.Q.HeadSize, PK, AttnPastKey, AttnK, 3, "head sizes"},
      {Views.V.HeadSize, PV, AttnPastValue, AttnV, 3, "head sizes"},
  };
  for (Check &C : Checks)
    if (Error E = mergeDim(Ctx, C.Known, C.Past.getDim(C.D), C.What, C.Ref,
                           C.Operand))
      return E;
  Dim PastSeq = PK.getDim(2);
  if (Error E = mergeDim(Ctx, PastSeq, PV.getDim(2), "past sequence lengths",
                         AttnPastKey, AttnPastValue))
    return E;
  return std::optional<Dim>(PastSeq);
}

/// attn_mask must broadcast to [batch, q_heads, q_seq, total_seq]; its last
/// dimension may also be shorter than total_seq (it is padded).
Error checkAttentionMask(const ShapeContext &Ctx, ArrayRef<Dim> Target) {
  if (!Ctx.hasOperand(AttnMask))
    return Error::success();
  const TensorType &Mask = Ctx.getOperandType(AttnMask);
  if (Mask.getRank() > 4)
    return Ctx.error(describe(Ctx, AttnMask) + " must have rank 4 or less");
  unsigned Skip = 4 - Mask.getRank();
  for (unsigned I = 0, E = Mask.getRank(); I != E; ++I) {
    const Dim &M = Mask.getDim(I), &T = Target[Skip + I];
    bool Fits = Skip + I == 3 ? !M.isStatic() || !T.isStatic() ||
                                    M.getSize() <= T.getSize()
                              : isStaticOne(M) || mayEqual(M, T);
    if (!Fits)
      return Ctx.error(describe(Ctx, AttnMask) + " does not broadcast to " +
                       dimsStr(Target) +
                       " (batch, q heads, q sequence, total sequence)");
  }
  return Error::success();
}

} // namespace

namespace {

/// The types of Attention's results: Y, present_key, present_value and the
/// scores or probabilities (qk_matmul_output).
struct AttentionResultTypes {
  TensorType Y, PresentKey, PresentValue, Scores;
};

Expected<AttentionResultTypes> inferAttentionResults(const ShapeContext &Ctx) {
  for (unsigned I : {AttnQ, AttnV})
    if (Error E = checkFloat(Ctx, I))
      return E;
  if (Error E = checkSameElementTypeAs(Ctx, AttnK, AttnQ))
    return E;
  if (Error E = checkAttentionAttrs(Ctx))
    return E;
  Expected<AttentionViews> Views = getAttentionViews(Ctx);
  if (!Views)
    return Views.takeError();
  Expected<std::optional<Dim>> PastSeq = getPastSequence(Ctx, *Views);
  if (!PastSeq)
    return PastSeq.takeError();
  const HeadView &Q = Views->Q, &K = Views->K, &V = Views->V;
  Dim TotalSeq = *PastSeq ? addDims(**PastSeq, K.Seq) : K.Seq;
  SmallVector<Dim, 4> Scores = {Q.Batch, Q.Heads, Q.Seq, TotalSeq};
  if (Error E = checkAttentionMask(Ctx, Scores))
    return E;

  ElementType QElem = elementTypeOf(Ctx, AttnQ);
  AttentionResultTypes R;
  if (Ctx.getOperandType(AttnQ).getRank() == 4) {
    R.Y = TensorType(QElem, {Q.Batch, Q.Heads, Q.Seq, V.HeadSize});
  } else {
    // q_heads * v_head_size, where v_hidden = kv_heads * v_head_size.
    Dim Hidden = dimOf(Ctx, AttnV, 2) * Q.Heads;
    std::optional<Dim> YHidden = Hidden.divide(K.Heads);
    R.Y = TensorType(QElem, {Q.Batch, Q.Seq, YHidden ? *YHidden : Dim()});
  }
  R.PresentKey = TensorType(QElem, {Q.Batch, K.Heads, TotalSeq, Q.HeadSize});
  R.PresentValue = TensorType(elementTypeOf(Ctx, AttnV),
                              {Q.Batch, K.Heads, TotalSeq, V.HeadSize});
  R.Scores = TensorType(QElem, Scores);
  return R;
}

} // namespace

// ONNX Attention (opset 23): Q, K, V are all 4-D [batch, heads, seq, head
// size] or all 3-D [batch, seq, heads * head size]; V's head size may
// differ from Q's and K's.
InferResult autopar::inferAttention(const ShapeContext &Ctx) {
  Expected<AttentionResultTypes> R = inferAttentionResults(Ctx);
  if (!R)
    return R.takeError();
  Types Results{R->Y};
  unsigned NumResults = Ctx.getNode().getNumResults();
  if (NumResults > 1)
    Results.push_back(R->PresentKey);
  if (NumResults > 2)
    Results.push_back(R->PresentValue);
  if (NumResults > 3)
    Results.push_back(R->Scores);
  return Results;
}

// The training form (4-D, no cache) with the probabilities as result 1.
InferResult autopar::inferAttentionWithProbs(const ShapeContext &Ctx) {
  if (Ctx.getOperandType(AttnQ).getRank() != 4)
    return Ctx.error(describe(Ctx, AttnQ) + " must have rank 4");
  Expected<AttentionResultTypes> R = inferAttentionResults(Ctx);
  if (!R)
    return R.takeError();
  Types Results{R->Y, R->Scores};
  // With dropout: the mask and the dropped probabilities.
  if (Ctx.getNode().getNumResults() > 2) {
    Results.push_back(TensorType(ElementType::Bool, R->Scores.getShape()));
    Results.push_back(R->Scores);
  }
  return Results;
}

namespace {

enum RotaryOperand : unsigned { RopeX, RopeCos, RopeSin, RopePositions };

/// The rotated part of each head: 'rotary_embedding_dim', or the whole head
/// when it is 0 (the default). It must be even and fit in the head.
Expected<Dim> getRotaryDim(const ShapeContext &Ctx, const Dim &HeadSize) {
  int64_t Rotary = Ctx.getIntAttr("rotary_embedding_dim", 0);
  if (Rotary < 0)
    return Ctx.error("'rotary_embedding_dim' must be non-negative, got " +
                     Twine(Rotary));
  if (Rotary == 0) {
    if (HeadSize.isStatic() && HeadSize.getSize() % 2 != 0)
      return Ctx.error("the head size " + dimStr(HeadSize) + " of " +
                       describe(Ctx, RopeX) + " must be even");
    return HeadSize;
  }
  if (Rotary % 2 != 0)
    return Ctx.error("'rotary_embedding_dim' must be even, got " +
                     Twine(Rotary));
  if (HeadSize.isStatic() && Rotary > HeadSize.getSize())
    return Ctx.error("'rotary_embedding_dim' " + Twine(Rotary) +
                     " exceeds the head size " + dimStr(HeadSize) + " of " +
                     describe(Ctx, RopeX));
  return Dim::get(Rotary);
}

/// cos_cache and sin_cache: [max_position, rotary_dim / 2] indexed by
/// position_ids [batch, seq], or [batch, seq, rotary_dim / 2] without them.
Error checkRotaryCaches(const ShapeContext &Ctx, Dim Batch, Dim Seq,
                        const Dim &RotaryDim) {
  for (unsigned I : {RopeCos, RopeSin})
    if (Error E = checkSameElementTypeAs(Ctx, I, RopeX))
      return E;
  const TensorType &Cos = Ctx.getOperandType(RopeCos);
  const TensorType &Sin = Ctx.getOperandType(RopeSin);
  if (!isCompatible(Cos, Sin))
    return Ctx.error(describe(Ctx, RopeCos) + " and " + describe(Ctx, RopeSin) +
                     " must have the same shape");
  bool HasPositions = Ctx.hasOperand(RopePositions);
  if (Error E = checkRank(Ctx, RopeCos, HasPositions ? 2 : 3))
    return E;
  unsigned Indexed = HasPositions ? RopePositions : RopeCos;
  if (HasPositions) {
    if (Error E = checkElementType(Ctx, RopePositions, ElementType::I64))
      return E;
    if (Error E = checkRank(Ctx, RopePositions, 2))
      return E;
  }
  if (Error E = mergeDim(Ctx, Batch, dimOf(Ctx, Indexed, 0), "batch sizes",
                         RopeX, Indexed))
    return E;
  if (Error E = mergeDim(Ctx, Seq, dimOf(Ctx, Indexed, 1), "sequence lengths",
                         RopeX, Indexed))
    return E;
  std::optional<Dim> Half = RotaryDim.divide(Dim::get(2));
  const Dim &CacheHalf = Cos.getDim(Cos.getRank() - 1);
  if (Half && !mayEqual(*Half, CacheHalf))
    return Ctx.error("the last dimension of " + describe(Ctx, RopeCos) +
                     " must be half the rotary dimension " + dimStr(RotaryDim));
  return Error::success();
}

} // namespace

// ONNX RotaryEmbedding (opset 23): X is [batch, heads, seq, head size] or
// [batch, seq, heads * head size] (then 'num_heads' is required); Y is
// like X.
InferResult autopar::inferRotaryEmbedding(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, RopeX))
    return E;
  if (Error E = checkFlag(Ctx, "interleaved"))
    return E;
  const TensorType &X = Ctx.getOperandType(RopeX);
  if (X.getRank() != 3 && X.getRank() != 4)
    return Ctx.error(describe(Ctx, RopeX) + " must have rank 3 or 4");
  auto NumHeads = getPositiveAttr(Ctx, "num_heads");
  if (!NumHeads)
    return NumHeads.takeError();
  Dim HeadSize;
  if (X.getRank() == 4) {
    if (*NumHeads && !mayEqual(X.getDim(1), Dim::get(**NumHeads)))
      return Ctx.error("'num_heads' is " + Twine(**NumHeads) + " but " +
                       describe(Ctx, RopeX) + " has " + dimStr(X.getDim(1)) +
                       " heads");
    HeadSize = X.getDim(3);
  } else {
    if (!*NumHeads)
      return Ctx.error("'num_heads' is required with 3-D " +
                       describe(Ctx, RopeX));
    Expected<Dim> Split = splitHeads(Ctx, RopeX, 2, **NumHeads, "'num_heads'");
    if (!Split)
      return Split.takeError();
    HeadSize = *Split;
  }
  Expected<Dim> RotaryDim = getRotaryDim(Ctx, HeadSize);
  if (!RotaryDim)
    return RotaryDim.takeError();
  const Dim &Seq = X.getDim(X.getRank() == 4 ? 2 : 1);
  if (Error E = checkRotaryCaches(Ctx, X.getDim(0), Seq, *RotaryDim))
    return E;
  return Types{X};
}

namespace {

enum MsAttentionOperand : unsigned {
  MsInput,
  MsWeights,
  MsBias,
  MsMaskIndex,
  MsPast,
  MsAttentionBias,
  MsPastSequenceLength
};

/// The hidden sizes of Q, K and V of com.microsoft Attention.
struct QKVSizes {
  Dim Q, K, V, Total;
};

/// 'qkv_hidden_sizes' when given (Q and K equal, each divisible by
/// 'num_heads'), else three equal parts of the weights' columns.
Expected<QKVSizes> getQKVSizes(const ShapeContext &Ctx, int64_t NumHeads) {
  const Dim &Columns = dimOf(Ctx, MsWeights, 1);
  QKVSizes Sizes;
  if (const Attribute *A = Ctx.getAttr("qkv_hidden_sizes")) {
    ArrayRef<int64_t> L = A->getIntList();
    if (L.size() != 3)
      return Ctx.error("'qkv_hidden_sizes' must have 3 entries, got " +
                       Twine(L.size()));
    if (L[0] != L[1])
      return Ctx.error("'qkv_hidden_sizes' must give Q and K the same size");
    for (int64_t S : L)
      if (S < 1 || S % NumHeads != 0)
        return Ctx.error("'qkv_hidden_sizes' entries must be positive "
                         "multiples of 'num_heads' " +
                         Twine(NumHeads) + ", got " + Twine(S));
    int64_t Total;
    if (AddOverflow(L[0], L[1], Total) || AddOverflow(Total, L[2], Total))
      return Ctx.error("'qkv_hidden_sizes' overflow");
    Sizes = {Dim::get(L[0]), Dim::get(L[1]), Dim::get(L[2]), Dim::get(Total)};
    if (!mayEqual(Columns, Sizes.Total))
      return Ctx.error(describe(Ctx, MsWeights) + " must have " + Twine(Total) +
                       " columns for 'qkv_hidden_sizes'");
    return Sizes;
  }
  Sizes.Total = Columns;
  if (Ctx.hasOperand(MsBias) && Ctx.getOperandType(MsBias).getRank() == 1)
    Sizes.Total = meetDims(Columns, dimOf(Ctx, MsBias, 0));
  std::optional<Dim> Part = Sizes.Total.divide(Dim::get(3));
  if (!Part && Sizes.Total.isStatic())
    return Ctx.error(describe(Ctx, MsWeights) +
                     " must have a multiple of 3 columns without "
                     "'qkv_hidden_sizes'");
  Dim Each = Part ? *Part : Dim();
  if (Each.isStatic() && Each.getSize() % NumHeads != 0)
    return Ctx.error("the hidden size " + dimStr(Each) + " of " +
                     describe(Ctx, MsWeights) +
                     " is not divisible by 'num_heads' " + Twine(NumHeads));
  Sizes.Q = Sizes.K = Sizes.V = Each;
  return Sizes;
}

/// The optional inputs of com.microsoft Attention other than past.
Error checkMsAttentionExtras(const ShapeContext &Ctx, const Dim &Batch,
                             const Dim &Total) {
  if (Ctx.hasOperand(MsBias)) {
    if (Error E = checkSameElementTypeAs(Ctx, MsBias, MsInput))
      return E;
    const TensorType &B = Ctx.getOperandType(MsBias);
    if (B.getRank() != 1 || !mayEqual(B.getDim(0), Total))
      return Ctx.error(describe(Ctx, MsBias) + " must have shape [" +
                       dimStr(Total) + "] like the columns of " +
                       describe(Ctx, MsWeights));
  }
  if (Ctx.hasOperand(MsMaskIndex)) {
    if (Error E = checkElementType(Ctx, MsMaskIndex, ElementType::I32))
      return E;
    const TensorType &M = Ctx.getOperandType(MsMaskIndex);
    if (M.getRank() < 1 || M.getRank() > 4)
      return Ctx.error(describe(Ctx, MsMaskIndex) + " must have rank 1 to 4");
    if (M.getRank() > 1 && !mayEqual(M.getDim(0), Batch))
      return Ctx.error("batch sizes differ: " + describe(Ctx, MsInput) +
                       " and " + describe(Ctx, MsMaskIndex));
  }
  if (Ctx.hasOperand(MsAttentionBias)) {
    if (Error E = checkSameElementTypeAs(Ctx, MsAttentionBias, MsInput))
      return E;
    if (Error E = checkRank(Ctx, MsAttentionBias, 4))
      return E;
  }
  if (Ctx.hasOperand(MsPastSequenceLength))
    if (Error E = checkElementType(Ctx, MsPastSequenceLength, ElementType::I32))
      return E;
  return Error::success();
}

} // namespace

// com.microsoft Attention: input [batch, seq, input_hidden] times weights
// [input_hidden, q + k + v] gives output [batch, seq, v]; present is [2,
// batch, num_heads, past_seq + seq, head_size], or past's shape when past
// and present share a buffer.
InferResult autopar::inferMsAttention(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, MsInput, /*AllowF64=*/false))
    return E;
  if (Error E = checkSameElementTypeAs(Ctx, MsWeights, MsInput))
    return E;
  if (Error E = checkRank(Ctx, MsInput, 3))
    return E;
  if (Error E = checkRank(Ctx, MsWeights, 2))
    return E;
  for (StringRef Flag :
       {"do_rotary", "past_present_share_buffer", "unidirectional"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  auto NumHeads = getPositiveAttr(Ctx, "num_heads");
  if (!NumHeads)
    return NumHeads.takeError();
  const TensorType &In = Ctx.getOperandType(MsInput);
  if (!mayEqual(In.getDim(2), dimOf(Ctx, MsWeights, 0)))
    return Ctx.error("input hidden sizes differ: " + describe(Ctx, MsInput) +
                     " and " + describe(Ctx, MsWeights));
  Expected<QKVSizes> Sizes = getQKVSizes(Ctx, **NumHeads);
  if (!Sizes)
    return Sizes.takeError();
  const Dim &Batch = In.getDim(0), &Seq = In.getDim(1);
  if (Error E = checkMsAttentionExtras(Ctx, Batch, Sizes->Total))
    return E;
  std::optional<Dim> HeadSize = Sizes->Q.divide(Dim::get(**NumHeads));
  SmallVector<Dim, 4> Present = {Dim::get(2), Batch, Dim::get(**NumHeads), Seq,
                                 HeadSize ? *HeadSize : Dim()};
  bool SharedBuffer = Ctx.getIntAttr("past_present_share_buffer", 0);
  if (Ctx.hasOperand(MsPast)) {
    if (Error E = checkSameElementTypeAs(Ctx, MsPast, MsInput))
      return E;
    if (Error E = checkRank(Ctx, MsPast, 5))
      return E;
    if (!mayEqual(Sizes->Q, Sizes->V))
      return Ctx.error("with past, Q, K and V must have the same hidden size");
    if (SharedBuffer && !Ctx.hasOperand(MsPastSequenceLength))
      return Ctx.error("'past_present_share_buffer' needs the "
                       "past_sequence_length operand");
    const TensorType &Past = Ctx.getOperandType(MsPast);
    for (unsigned D : {0u, 1u, 2u, 4u}) {
      if (!mayEqual(Present[D], Past.getDim(D)))
        return Ctx.error(describe(Ctx, MsPast) +
                         " must have shape [2, batch, num_heads, "
                         "past_sequence, head_size] = [2, " +
                         dimStr(Batch) + ", " + Twine(**NumHeads) + ", ?, " +
                         dimStr(Present[4]) + "]");
      Present[D] = meetDims(Present[D], Past.getDim(D));
    }
    Present[3] = SharedBuffer ? Past.getDim(3) : addDims(Past.getDim(3), Seq);
  }
  ElementType Elem = elementTypeOf(Ctx, MsInput);
  // Present[1] is the batch size, merged with past's.
  Types Results = {TensorType(Elem, {Present[1], Seq, Sizes->V})};
  if (Ctx.getNode().getNumResults() > 1)
    Results.push_back(TensorType(Elem, Present));
  return Results;
}

namespace {

enum GQAOperand : unsigned {
  GQAQuery,
  GQAKey,
  GQAValue,
  GQAPastKey,
  GQAPastValue,
  GQASeqLensK,
  GQATotalSeq,
  GQACos,
  GQASin,
  GQAPositions,
  GQAAttentionBias,
  GQAHeadSink
};

/// key and value [batch, kv_seq, kv_heads * head_size], both given or
/// both absent (then query packs Q, K and V).
Error checkGQAKeyValue(const ShapeContext &Ctx, Dim &Batch, Dim &HeadSize,
                       int64_t KVHeads) {
  for (unsigned I : {GQAKey, GQAValue}) {
    if (Error E = checkSameElementTypeAs(Ctx, I, GQAQuery))
      return E;
    if (Error E = checkRank(Ctx, I, 3))
      return E;
    if (Error E =
            mergeDim(Ctx, Batch, dimOf(Ctx, I, 0), "batch sizes", GQAQuery, I))
      return E;
    Expected<Dim> KVHeadSize = splitHeads(Ctx, I, 2, KVHeads, "'kv_num_heads'");
    if (!KVHeadSize)
      return KVHeadSize.takeError();
    if (Error E =
            mergeDim(Ctx, HeadSize, *KVHeadSize, "head sizes", GQAQuery, I))
      return E;
  }
  if (!isCompatible(Ctx.getOperandType(GQAKey), Ctx.getOperandType(GQAValue)))
    return Ctx.error(describe(Ctx, GQAKey) + " and " + describe(Ctx, GQAValue) +
                     " must have the same shape");
  return Error::success();
}

/// past_key and past_value [batch, kv_heads, past_seq, head_size], of one
/// KV cache element type.
Error checkGQAPast(const ShapeContext &Ctx, Dim &Batch, Dim &HeadSize,
                   int64_t KVHeads) {
  if (Ctx.hasOperand(GQAPastKey) != Ctx.hasOperand(GQAPastValue))
    return Ctx.error("past_key and past_value must be given together");
  if (!Ctx.hasOperand(GQAPastKey))
    return Error::success();
  if (Error E = checkSameElementTypeAs(Ctx, GQAPastValue, GQAPastKey))
    return E;
  for (unsigned I : {GQAPastKey, GQAPastValue}) {
    if (Error E = checkRank(Ctx, I, 4))
      return E;
    if (!mayEqual(dimOf(Ctx, I, 1), Dim::get(KVHeads)))
      return Ctx.error("'kv_num_heads' is " + Twine(KVHeads) + " but " +
                       describe(Ctx, I) + " has " + dimStr(dimOf(Ctx, I, 1)) +
                       " heads");
    if (Error E =
            mergeDim(Ctx, Batch, dimOf(Ctx, I, 0), "batch sizes", GQAQuery, I))
      return E;
    if (Error E = mergeDim(Ctx, HeadSize, dimOf(Ctx, I, 3), "head sizes",
                           GQAQuery, I))
      return E;
  }
  if (!isCompatible(Ctx.getOperandType(GQAPastKey),
                    Ctx.getOperandType(GQAPastValue)))
    return Ctx.error(describe(Ctx, GQAPastKey) + " and " +
                     describe(Ctx, GQAPastValue) + " must have the same shape");
  return Error::success();
}

/// seqlens_k, total_sequence_length, the rotary caches and the other
/// optional inputs of GroupQueryAttention.
Error checkGQAExtras(const ShapeContext &Ctx, const Dim &Batch,
                     int64_t NumHeads) {
  for (unsigned I : {GQASeqLensK, GQATotalSeq})
    if (Error E = checkElementType(Ctx, I, ElementType::I32))
      return E;
  // [batch] as ONNX Runtime documents it, or [batch, 1] as exporters that
  // keep the reduction's dimension write it.
  const TensorType &SeqLens = Ctx.getOperandType(GQASeqLensK);
  if (SeqLens.getRank() != 1 &&
      !(SeqLens.getRank() == 2 && mayEqual(SeqLens.getDim(1), Dim::get(1))))
    return Ctx.error(describe(Ctx, GQASeqLensK) +
                     " must be [batch] or [batch, 1]");
  if (!mayEqual(dimOf(Ctx, GQASeqLensK, 0), Batch))
    return Ctx.error("batch sizes differ: " + describe(Ctx, GQAQuery) +
                     " and " + describe(Ctx, GQASeqLensK));
  bool HasCos = Ctx.hasOperand(GQACos);
  if (HasCos != Ctx.hasOperand(GQASin))
    return Ctx.error("cos_cache and sin_cache must be given together");
  if (Ctx.getIntAttr("do_rotary", 0) && !HasCos)
    return Ctx.error("'do_rotary' needs cos_cache and sin_cache");
  if (HasCos) {
    for (unsigned I : {GQACos, GQASin}) {
      if (Error E = checkSameElementTypeAs(Ctx, I, GQAQuery))
        return E;
      if (Error E = checkRank(Ctx, I, 2))
        return E;
    }
    if (!isCompatible(Ctx.getOperandType(GQACos), Ctx.getOperandType(GQASin)))
      return Ctx.error(describe(Ctx, GQACos) + " and " + describe(Ctx, GQASin) +
                       " must have the same shape");
  }
  if (Ctx.hasOperand(GQAPositions)) {
    if (Error E = checkElementType(Ctx, GQAPositions, ElementType::I64))
      return E;
    if (Error E = checkRank(Ctx, GQAPositions, 2))
      return E;
  }
  if (Ctx.hasOperand(GQAAttentionBias)) {
    if (Error E = checkSameElementTypeAs(Ctx, GQAAttentionBias, GQAQuery))
      return E;
    if (Error E = checkRank(Ctx, GQAAttentionBias, 4))
      return E;
  }
  if (Ctx.hasOperand(GQAHeadSink)) {
    if (Error E = checkSameElementTypeAs(Ctx, GQAHeadSink, GQAQuery))
      return E;
    const TensorType &Sink = Ctx.getOperandType(GQAHeadSink);
    if (Sink.getRank() != 1 || !mayEqual(Sink.getDim(0), Dim::get(NumHeads)))
      return Ctx.error(describe(Ctx, GQAHeadSink) + " must have shape [" +
                       Twine(NumHeads) + "], one entry per head");
  }
  return Error::success();
}

} // namespace

// com.microsoft GroupQueryAttention: output [batch, seq, num_heads *
// head_size]; present_key/value [batch, kv_heads, present_seq, head_size].
// present_seq is kv_seq without a past; with one it is past_seq when past
// and present share a buffer, else past_seq + kv_seq, which is only known at
// run time, so it is unknown.
InferResult autopar::inferMsGroupQueryAttention(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, GQAQuery, /*AllowF64=*/false))
    return E;
  if (Error E = checkRank(Ctx, GQAQuery, 3))
    return E;
  for (StringRef Flag : {"do_rotary", "rotary_interleaved"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  int64_t LocalWindow = Ctx.getIntAttr("local_window_size", -1);
  if (LocalWindow < -1 || LocalWindow == 0)
    return Ctx.error("'local_window_size' must be -1 or positive, got " +
                     Twine(LocalWindow));
  auto NumHeads = getPositiveAttr(Ctx, "num_heads");
  if (!NumHeads)
    return NumHeads.takeError();
  auto KVHeads = getPositiveAttr(Ctx, "kv_num_heads");
  if (!KVHeads)
    return KVHeads.takeError();
  int64_t QH = **NumHeads, KVH = **KVHeads;
  if (QH % KVH != 0)
    return Ctx.error("'num_heads' " + Twine(QH) +
                     " is not a multiple of 'kv_num_heads' " + Twine(KVH));
  if (Ctx.hasOperand(GQAKey) != Ctx.hasOperand(GQAValue))
    return Ctx.error("key and value must be given together");
  bool Packed = !Ctx.hasOperand(GQAKey);
  const TensorType &Query = Ctx.getOperandType(GQAQuery);
  Dim Batch = Query.getDim(0);
  const Dim &Seq = Query.getDim(1);
  // Packed: hidden = (num_heads + 2 * kv_num_heads) * head_size.
  int64_t QueryHeads = QH;
  if (Packed && (AddOverflow(QH, KVH, QueryHeads) ||
                 AddOverflow(QueryHeads, KVH, QueryHeads)))
    return Ctx.error("'num_heads' + 2 * 'kv_num_heads' overflows");
  Expected<Dim> HeadSize =
      splitHeads(Ctx, GQAQuery, 2, QueryHeads,
                 Packed ? "'num_heads' + 2 * 'kv_num_heads'" : "'num_heads'");
  if (!HeadSize)
    return HeadSize.takeError();
  if (!Packed)
    if (Error E = checkGQAKeyValue(Ctx, Batch, *HeadSize, KVH))
      return E;
  if (Error E = checkGQAPast(Ctx, Batch, *HeadSize, KVH))
    return E;
  if (Error E = checkGQAExtras(Ctx, Batch, QH))
    return E;

  Dim Hidden = *HeadSize * Dim::get(QH);
  if (!Packed)
    Hidden = meetDims(Query.getDim(2), Hidden);
  Dim PresentSeq;
  ElementType CacheElem = Query.getElementType();
  if (Ctx.hasOperand(GQAPastKey)) {
    CacheElem = elementTypeOf(Ctx, GQAPastKey);
    // The cache holds max(past, total_sequence_length) positions (ONNX
    // Runtime's present_key: the past buffer when it is shared, else the
    // total length, the scalar input).
    const Dim &Past = dimOf(Ctx, GQAPastKey, 2);
    std::optional<SmallVector<Dim, 4>> Total =
        Ctx.hasOperand(GQATotalSeq) ? Ctx.getShapeOperand(GQATotalSeq)
                                    : std::nullopt;
    Dim TotalLen = Total && Total->size() == 1 ? (*Total)[0] : Dim();
    if (Past.isStatic() && TotalLen.isStatic())
      PresentSeq = Dim::get(std::max(Past.getSize(), TotalLen.getSize()));
    else if (!TotalLen.isUnknown() && Past == TotalLen)
      PresentSeq = Past;
    // Otherwise unknown here; the model's declared type fills it in.
  } else if (Packed)
    PresentSeq = Seq;
  else
    PresentSeq = meetDims(dimOf(Ctx, GQAKey, 1), dimOf(Ctx, GQAValue, 1));
  TensorType Present(CacheElem, {Batch, Dim::get(KVH), PresentSeq, *HeadSize});
  return Types{TensorType(Query.getElementType(), {Batch, Seq, Hidden}),
               Present, Present};
}

namespace {

enum EmbedOperand : unsigned {
  EmbedIds,
  EmbedSegmentIds,
  EmbedWord,
  EmbedPosition,
  EmbedSegment,
  EmbedGamma,
  EmbedBeta,
  EmbedMask,
  EmbedPositionIds
};

/// The [batch, seq] id tensors besides input_ids: segment_ids, mask and
/// position_ids (whose batch may also be 1).
Error checkEmbedIds(const ShapeContext &Ctx, const Dim &Batch, const Dim &Seq) {
  for (unsigned I : {EmbedSegmentIds, EmbedMask, EmbedPositionIds}) {
    if (!Ctx.hasOperand(I))
      continue;
    if (Error E = checkIndexType(Ctx, I))
      return E;
    if (Error E = checkRank(Ctx, I, 2))
      return E;
    const Dim &B = dimOf(Ctx, I, 0);
    bool BatchFits =
        mayEqual(B, Batch) || (I == EmbedPositionIds && isStaticOne(B));
    if (!BatchFits || !mayEqual(dimOf(Ctx, I, 1), Seq))
      return Ctx.error(describe(Ctx, I) + " must have the shape of " +
                       describe(Ctx, EmbedIds));
  }
  return Error::success();
}

/// The embedding tables [rows, hidden] and gamma, beta [hidden]; returns
/// hidden.
Expected<Dim> getEmbedHidden(const ShapeContext &Ctx) {
  Dim Hidden;
  for (unsigned I :
       {EmbedWord, EmbedPosition, EmbedSegment, EmbedGamma, EmbedBeta}) {
    if (!Ctx.hasOperand(I))
      continue;
    if (Error E = checkSameElementTypeAs(Ctx, I, EmbedWord))
      return E;
    bool IsTable = I != EmbedGamma && I != EmbedBeta;
    if (Error E = checkRank(Ctx, I, IsTable ? 2 : 1))
      return E;
    if (Error E = mergeDim(Ctx, Hidden, dimOf(Ctx, I, IsTable ? 1 : 0),
                           "hidden sizes", EmbedWord, I))
      return E;
  }
  return Hidden;
}

} // namespace

// com.microsoft EmbedLayerNormalization: input_ids [batch, seq] gives output
// [batch, seq, hidden] of the embeddings' type, mask_index i32 [batch] and
// the optional embedding_sum like output.
InferResult autopar::inferMsEmbedLayerNorm(const ShapeContext &Ctx) {
  if (Error E = checkIndexType(Ctx, EmbedIds))
    return E;
  if (Error E = checkRank(Ctx, EmbedIds, 2))
    return E;
  if (Error E = checkFloat(Ctx, EmbedWord, /*AllowF64=*/false))
    return E;
  if (Error E = checkFlag(Ctx, "mask_index_type"))
    return E;
  if (Ctx.hasOperand(EmbedSegmentIds) != Ctx.hasOperand(EmbedSegment))
    return Ctx.error("segment_ids and segment_embedding must be given "
                     "together");
  const Dim &Batch = dimOf(Ctx, EmbedIds, 0), &Seq = dimOf(Ctx, EmbedIds, 1);
  if (Error E = checkEmbedIds(Ctx, Batch, Seq))
    return E;
  Expected<Dim> Hidden = getEmbedHidden(Ctx);
  if (!Hidden)
    return Hidden.takeError();
  TensorType Output(elementTypeOf(Ctx, EmbedWord), {Batch, Seq, *Hidden});
  Types Results = {Output, TensorType(ElementType::I32, {Batch})};
  if (Ctx.getNode().getNumResults() > 2)
    Results.push_back(Output);
  return Results;
}
