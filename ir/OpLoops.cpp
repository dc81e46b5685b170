//===- OpLoops.cpp - The iteration space of each op -----------------------===//
//
// One builder per op family; getOpLoops dispatches on the op. Builders read
// only types and attributes (and constant axes), never data.
//
//===----------------------------------------------------------------------===//

#include "ir/OpLoops.h"
#include "ir/OpFacts.h"

#include "ir/Graph.h"
#include "ir/ShapeValues.h"

#include <numeric>

using namespace autopar;
using namespace llvm;

namespace {

using DimMap = SmallVector<int, 4>;

unsigned rankOf(const Value *V) { return V ? V->getType().getRank() : 0; }

const Dim &dimOf(const Value *V, unsigned I) { return V->getType().getDim(I); }

bool isStaticOne(const Dim &D) { return D.isStatic() && D.getSize() == 1; }

/// A map of every operand and result to no loop.
OpLoops unmapped(const Node &N) {
  OpLoops L;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
    L.Operands.push_back(DimMap(rankOf(N.getOperand(I)), OpLoops::NoLoop));
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    L.Results.push_back(DimMap(rankOf(N.getResult(I)), OpLoops::NoLoop));
  return L;
}

/// Normalizes an axis attribute against Rank; nullopt when out of range.
std::optional<unsigned> normalizeAxis(int64_t Axis, unsigned Rank) {
  if (Axis < 0)
    Axis += Rank;
  if (Axis < 0 || Axis >= int64_t(Rank))
    return std::nullopt;
  return unsigned(Axis);
}

std::optional<int64_t> intAttr(const Node &N, StringRef Name) {
  const Attribute *A = N.getAttr(Name);
  if (!A || !A->isa(Attribute::Kind::Int))
    return std::nullopt;
  return A->getInt();
}

/// Integer list from an attribute, else from a constant operand.
std::optional<SmallVector<int64_t, 4>>
constantInts(const Node &N, StringRef AttrName, unsigned Operand) {
  if (const Attribute *A = N.getAttr(AttrName)) {
    if (!A->isa(Attribute::Kind::IntList))
      return std::nullopt;
    ArrayRef<int64_t> V = A->getIntList();
    return SmallVector<int64_t, 4>(V.begin(), V.end());
  }
  if (Operand >= N.getNumOperands() || !N.getOperand(Operand))
    return std::nullopt;
  std::optional<ShapeValue> SV = evaluateShapeValue(N.getOperand(Operand));
  if (!SV)
    return std::nullopt;
  SmallVector<int64_t, 4> Out;
  for (const ShapeEntry &E : *SV) {
    if (!E.Int)
      return std::nullopt;
    Out.push_back(*E.Int);
  }
  return Out;
}

/// Loops = the dimensions of result 0; every operand and result broadcasts
/// against it from the right (numpy rules). Axes in Fixed are not split.
OpLoops broadcastLoops(const Node &N, ArrayRef<unsigned> DataOperands,
                       ArrayRef<unsigned> FixedAxes = {}) {
  OpLoops L = unmapped(N);
  const Value *Out = N.getResult(0);
  unsigned Rank = rankOf(Out);
  for (unsigned I = 0; I != Rank; ++I)
    L.addLoop(is_contained(FixedAxes, I) ? LoopKind::Fixed
                                         : LoopKind::Parallel);
  auto MapInto = [&](DimMap &M, const Value *V) {
    unsigned R = rankOf(V);
    if (R > Rank)
      return;
    for (unsigned J = 0; J != R; ++J) {
      unsigned Loop = Rank - R + J;
      const Dim &D = dimOf(V, J);
      if (isStaticOne(D) && !isStaticOne(dimOf(Out, Loop)))
        continue; // Broadcast along this loop.
      M[J] = Loop;
    }
  };
  for (unsigned I : DataOperands)
    if (I < N.getNumOperands() && N.getOperand(I))
      MapInto(L.Operands[I], N.getOperand(I));
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    MapInto(L.Results[I], N.getResult(I));
  return L;
}

SmallVector<unsigned, 4> allOperands(const Node &N) {
  SmallVector<unsigned, 4> Ops(N.getNumOperands());
  std::iota(Ops.begin(), Ops.end(), 0);
  return Ops;
}

/// Axes where the sizes of In and Out differ (sliced, tiled, concatenated).
SmallVector<unsigned, 4> changedAxes(const Value *In, const Value *Out) {
  SmallVector<unsigned, 4> Axes;
  if (rankOf(In) != rankOf(Out))
    return Axes;
  for (unsigned I = 0, E = rankOf(Out); I != E; ++I)
    if (dimOf(In, I) != dimOf(Out, I))
      Axes.push_back(I);
  return Axes;
}

/// Reshape-like ops: input and output dimensions are grouped where their
/// running products meet; the leading dimensions of each group (that is not
/// size 1) share one loop, the other dimensions of the group map none.
std::optional<OpLoops> reshapeLoops(const Node &N) {
  const Value *In = N.getOperand(0), *Out = N.getResult(0);
  OpLoops L = unmapped(N);
  unsigned RI = rankOf(In), RO = rankOf(Out);
  unsigned I = 0, J = 0;
  auto SkipOnes = [&] {
    while (I < RI && isStaticOne(dimOf(In, I)))
      ++I;
    while (J < RO && isStaticOne(dimOf(Out, J)))
      ++J;
  };
  SkipOnes();
  while (I < RI && J < RO) {
    unsigned GI = I, GJ = J;
    Dim PI = dimOf(In, I++), PO = dimOf(Out, J++);
    if (PI.isUnknown() || PO.isUnknown())
      return std::nullopt;
    // Grow the side with the smaller product until they meet; symbolic
    // products compare as monomials.
    for (unsigned Steps = 0; PI != PO; ++Steps) {
      if (Steps > RI + RO)
        return std::nullopt;
      bool GrowIn = PO.divide(PI) && I < RI;
      if (GrowIn)
        PI = PI * dimOf(In, I++);
      else if (J < RO)
        PO = PO * dimOf(Out, J++);
      else
        return std::nullopt;
      if (PI.isUnknown() || PO.isUnknown())
        return std::nullopt;
    }
    unsigned Loop = L.addLoop(LoopKind::Parallel);
    L.Operands[0][GI] = Loop;
    L.Results[0][GJ] = Loop;
    SkipOnes();
  }
  return L;
}

std::optional<OpLoops> transposeLoops(const Node &N) {
  const Value *In = N.getOperand(0);
  unsigned Rank = rankOf(In);
  SmallVector<int64_t, 4> Perm;
  if (const Attribute *A = N.getAttr("perm"))
    Perm.assign(A->getIntList().begin(), A->getIntList().end());
  else
    for (unsigned I = 0; I != Rank; ++I)
      Perm.push_back(Rank - 1 - I);
  if (Perm.size() != Rank || rankOf(N.getResult(0)) != Rank)
    return std::nullopt;
  OpLoops L = unmapped(N);
  for (unsigned I = 0; I != Rank; ++I) {
    L.addLoop(LoopKind::Parallel);
    L.Operands[0][I] = I;
  }
  for (unsigned I = 0; I != Rank; ++I) {
    if (Perm[I] < 0 || Perm[I] >= int64_t(Rank))
      return std::nullopt;
    L.Results[0][I] = Perm[I];
  }
  return L;
}

/// MatMul with operands of rank >= 2: batch loops broadcast, then M, N, K.
std::optional<OpLoops> matmulLoops(const Node &N) {
  const Value *A = N.getOperand(0), *B = N.getOperand(1), *Y = N.getResult(0);
  unsigned RA = rankOf(A), RB = rankOf(B), RY = rankOf(Y);
  if (RA < 2 || RB < 2 || RY < 2)
    return std::nullopt;
  OpLoops L = unmapped(N);
  unsigned Batch = RY - 2;
  for (unsigned I = 0; I != Batch; ++I)
    L.addLoop(LoopKind::Parallel);
  unsigned M = L.addLoop(LoopKind::Parallel);
  unsigned NL = L.addLoop(LoopKind::Parallel);
  unsigned K = L.addLoop(LoopKind::Reduction);
  auto MapBatch = [&](DimMap &Map, const Value *V, unsigned R) {
    for (unsigned J = 0; J + 2 < R; ++J) {
      unsigned Loop = Batch - (R - 2) + J;
      if (!(isStaticOne(dimOf(V, J)) && !isStaticOne(dimOf(Y, Loop))))
        Map[J] = Loop;
    }
  };
  MapBatch(L.Operands[0], A, RA);
  MapBatch(L.Operands[1], B, RB);
  for (unsigned J = 0; J != Batch; ++J)
    L.Results[0][J] = J;
  L.Operands[0][RA - 2] = M;
  L.Operands[0][RA - 1] = K;
  L.Operands[1][RB - 2] = K;
  L.Operands[1][RB - 1] = NL;
  L.Results[0][RY - 2] = M;
  L.Results[0][RY - 1] = NL;
  // MatMulInteger's zero points per row of A ([M] or [..., M, 1]) and per
  // column of B ([N] or [..., 1, N]) follow those loops.
  for (unsigned I : {2u, 3u}) {
    const Value *Z = I < N.getNumOperands() ? N.getOperand(I) : nullptr;
    unsigned RZ = rankOf(Z), Along = I == 2 ? M : NL;
    if (!Z || RZ == 0 || (RZ == 1 && isStaticOne(dimOf(Z, 0))))
      continue;
    if (RZ == 1) {
      L.Operands[I][0] = Along;
      continue;
    }
    MapBatch(L.Operands[I], Z, RZ);
    L.Operands[I][I == 2 ? RZ - 2 : RZ - 1] = Along;
  }
  return L;
}

/// Linear: X [..., K] x W [K, N] (+ B [N]) -> [..., N].
std::optional<OpLoops> linearLoops(const Node &N) {
  const Value *X = N.getOperand(0), *W = N.getOperand(1);
  unsigned RX = rankOf(X);
  if (RX < 1 || rankOf(W) != 2 || rankOf(N.getResult(0)) != RX)
    return std::nullopt;
  OpLoops L = unmapped(N);
  for (unsigned I = 0; I + 1 < RX; ++I) {
    L.addLoop(LoopKind::Parallel);
    L.Operands[0][I] = I;
    L.Results[0][I] = I;
  }
  unsigned NL = L.addLoop(LoopKind::Parallel);
  unsigned K = L.addLoop(LoopKind::Reduction);
  L.Operands[0][RX - 1] = K;
  L.Operands[1][0] = K;
  L.Operands[1][1] = NL;
  if (N.getNumOperands() > 2 && N.getOperand(2) && rankOf(N.getOperand(2)))
    L.Operands[2][rankOf(N.getOperand(2)) - 1] = NL;
  L.Results[0][RX - 1] = NL;
  return L;
}

std::optional<OpLoops> gemmLoops(const Node &N) {
  if (rankOf(N.getOperand(0)) != 2 || rankOf(N.getOperand(1)) != 2)
    return std::nullopt;
  OpLoops L = unmapped(N);
  unsigned M = L.addLoop(LoopKind::Parallel);
  unsigned NL = L.addLoop(LoopKind::Parallel);
  unsigned K = L.addLoop(LoopKind::Reduction);
  bool TA = intAttr(N, "transA").value_or(0),
       TB = intAttr(N, "transB").value_or(0);
  L.Operands[0] = TA ? DimMap{int(K), int(M)} : DimMap{int(M), int(K)};
  L.Operands[1] = TB ? DimMap{int(NL), int(K)} : DimMap{int(K), int(NL)};
  L.Results[0] = {int(M), int(NL)};
  if (N.getNumOperands() > 2 && N.getOperand(2)) {
    const Value *C = N.getOperand(2);
    const Value *Y = N.getResult(0);
    unsigned RC = rankOf(C);
    for (unsigned J = 0; J != RC && RC <= 2; ++J) {
      unsigned YDim = 2 - RC + J;
      if (!(isStaticOne(dimOf(C, J)) && !isStaticOne(dimOf(Y, YDim))))
        L.Operands[2][J] = YDim == 0 ? M : NL;
    }
  }
  return L;
}

std::optional<OpLoops> einsumLoops(const Node &N) {
  const Attribute *A = N.getAttr("equation");
  if (!A || !A->isa(Attribute::Kind::String))
    return std::nullopt;
  StringRef Eq = A->getString();
  if (Eq.contains('.') || !Eq.contains("->"))
    return std::nullopt;
  std::pair<StringRef, StringRef> Parts = Eq.split("->");
  StringRef Ins = Parts.first, OutTerm = Parts.second;
  SmallVector<StringRef, 4> Terms;
  Ins.split(Terms, ',');
  if (Terms.size() != N.getNumOperands())
    return std::nullopt;
  OutTerm = OutTerm.trim();
  int LoopOf[128];
  std::fill(std::begin(LoopOf), std::end(LoopOf), -1);
  OpLoops L = unmapped(N);
  auto LoopFor = [&](char C) -> int {
    unsigned char U = C;
    if (U >= 128)
      return -1;
    if (LoopOf[U] < 0)
      LoopOf[U] = L.addLoop(OutTerm.contains(C) ? LoopKind::Parallel
                                                : LoopKind::Reduction);
    return LoopOf[U];
  };
  for (char C : OutTerm)
    if (LoopFor(C) < 0)
      return std::nullopt;
  if (OutTerm.size() != rankOf(N.getResult(0)))
    return std::nullopt;
  for (unsigned I = 0; I != OutTerm.size(); ++I)
    L.Results[0][I] = LoopFor(OutTerm[I]);
  for (unsigned I = 0; I != Terms.size(); ++I) {
    StringRef T = Terms[I].trim();
    const Value *V = N.getOperand(I);
    if (T.size() != rankOf(V))
      return std::nullopt;
    for (unsigned J = 0; J != T.size(); ++J) {
      int Loop = LoopFor(T[J]);
      if (Loop < 0)
        return std::nullopt;
      if (!isStaticOne(dimOf(V, J)))
        L.Operands[I][J] = Loop;
    }
  }
  return L;
}

/// Normalizations over the trailing axes from Axis; results beyond the
/// first (Mean, InvStdDev) keep the leading axes.
std::optional<OpLoops> normLoops(const Node &N, int64_t DefaultAxis) {
  const Value *X = N.getOperand(0);
  unsigned Rank = rankOf(X);
  std::optional<unsigned> Axis =
      normalizeAxis(intAttr(N, "axis").value_or(DefaultAxis), Rank);
  if (!Axis)
    return std::nullopt;
  SmallVector<unsigned, 4> Fixed;
  for (unsigned I = *Axis; I != Rank; ++I)
    Fixed.push_back(I);
  OpLoops L = broadcastLoops(N, allOperands(N), Fixed);
  // Mean and InvStdDev have size 1 on the normalized axes: unmapped there by
  // the broadcast rule already.
  return L;
}

/// Operand 0 reduced over Axes (every axis when empty) into result 0, with
/// the reduced axes of kind ReducedKind.
std::optional<OpLoops> reduceAxesLoops(const Node &N, ArrayRef<int64_t> Axes,
                                       LoopKind ReducedKind) {
  const Value *X = N.getOperand(0), *Y = N.getResult(0);
  unsigned Rank = rankOf(X);
  bool KeepDims = intAttr(N, "keepdims").value_or(1);
  SmallVector<bool, 4> Reduced(Rank, Axes.empty());
  for (int64_t A : Axes) {
    std::optional<unsigned> Axis = normalizeAxis(A, Rank);
    if (!Axis)
      return std::nullopt;
    Reduced[*Axis] = true;
  }
  OpLoops L = unmapped(N);
  unsigned OutDim = 0;
  for (unsigned I = 0; I != Rank; ++I) {
    unsigned Loop = L.addLoop(Reduced[I] ? ReducedKind : LoopKind::Parallel);
    L.Operands[0][I] = Loop;
    if (!Reduced[I] || KeepDims) {
      if (OutDim >= rankOf(Y))
        return std::nullopt;
      if (!Reduced[I])
        L.Results[0][OutDim] = Loop;
      ++OutDim;
    }
  }
  return L;
}

std::optional<OpLoops> reduceLoops(const Node &N, LoopKind ReducedKind) {
  std::optional<SmallVector<int64_t, 4>> Axes = constantInts(N, "axes", 1);
  if (!Axes ||
      (Axes->empty() && intAttr(N, "noop_with_empty_axes").value_or(0)))
    return std::nullopt;
  return reduceAxesLoops(N, *Axes, ReducedKind);
}

/// Gather along Axis: data [d0.., V, ..dn] by indices [i..] ->
/// [d0.., i.., ..dn]. Splitting the gathered axis leaves partial sums (each
/// rank fills the rows it holds, zeros elsewhere).
std::optional<OpLoops> gatherLoops(const Node &N) {
  const Value *Data = N.getOperand(0), *Idx = N.getOperand(1);
  unsigned RD = rankOf(Data), RI = rankOf(Idx);
  std::optional<unsigned> Axis =
      normalizeAxis(intAttr(N, "axis").value_or(0), RD);
  if (!Axis || rankOf(N.getResult(0)) != RD - 1 + RI)
    return std::nullopt;
  OpLoops L = unmapped(N);
  unsigned Out = 0;
  for (unsigned I = 0; I != *Axis; ++I) {
    unsigned Loop = L.addLoop(LoopKind::Parallel);
    L.Operands[0][I] = Loop;
    L.Results[0][Out++] = Loop;
  }
  for (unsigned I = 0; I != RI; ++I) {
    unsigned Loop = L.addLoop(LoopKind::Parallel);
    L.Operands[1][I] = Loop;
    L.Results[0][Out++] = Loop;
  }
  for (unsigned I = *Axis + 1; I != RD; ++I) {
    unsigned Loop = L.addLoop(LoopKind::Parallel);
    L.Operands[0][I] = Loop;
    L.Results[0][Out++] = Loop;
  }
  L.Operands[0][*Axis] = L.addLoop(LoopKind::Reduction);
  return L;
}

/// Attention (ONNX opset 23). 4-D: Q [B, Hq, Sq, D], K [B, Hkv, Skv, D],
/// V [B, Hkv, Skv, Dv] -> [B, Hq, Sq, Dv]. 3-D: [B, S, H*D] with the head
/// counts as attributes. Heads and query positions split; keys and head
/// dimensions do not (the softmax runs over the keys).
std::optional<OpLoops> attentionLoops(const Node &N) {
  const Value *Q = N.getOperand(0), *K = N.getOperand(1), *V = N.getOperand(2);
  unsigned R = rankOf(Q);
  if ((R != 3 && R != 4) || rankOf(K) != R || rankOf(V) != R)
    return std::nullopt;
  OpLoops L = unmapped(N);
  int64_t Granule = 0;
  if (R == 3) {
    std::optional<int64_t> QH = intAttr(N, "q_num_heads"),
                           KVH = intAttr(N, "kv_num_heads");
    if (!QH || !KVH || *QH <= 0 || *KVH <= 0)
      return std::nullopt;
    Granule = std::gcd(*QH, *KVH);
  }
  unsigned B = L.addLoop(LoopKind::Parallel);
  unsigned H = L.addLoop(LoopKind::Parallel, Granule);
  unsigned Sq = L.addLoop(LoopKind::Parallel);
  unsigned Skv = L.addLoop(LoopKind::Fixed);
  unsigned Hd = L.addLoop(LoopKind::Fixed);
  unsigned HdV = L.addLoop(LoopKind::Fixed);
  if (R == 4) {
    L.Operands[0] = {int(B), int(H), int(Sq), int(Hd)};
    L.Operands[1] = {int(B), int(H), int(Skv), int(Hd)};
    L.Operands[2] = {int(B), int(H), int(Skv), int(HdV)};
    L.Results[0] = {int(B), int(H), int(Sq), int(HdV)};
  } else {
    L.Operands[0] = {int(B), int(Sq), int(H)};
    L.Operands[1] = {int(B), int(Skv), int(H)};
    L.Operands[2] = {int(B), int(Skv), int(H)};
    L.Results[0] = {int(B), int(Sq), int(H)};
  }
  // The mask [..., Sq, Skv] broadcasts against [B, Hq, Sq, Skv].
  if (N.getNumOperands() > 3 && N.getOperand(3)) {
    const Value *M = N.getOperand(3);
    unsigned RM = rankOf(M);
    int Full[4] = {int(B), int(H), int(Sq), int(Skv)};
    for (unsigned J = 0; J != RM && RM <= 4; ++J)
      if (!isStaticOne(dimOf(M, J)))
        L.Operands[3][J] = Full[4 - RM + J];
  }
  return L;
}

/// RotaryEmbedding: X [B, H, S, D] or [B, S, H*D]; position_ids [B, S].
std::optional<OpLoops> rotaryLoops(const Node &N) {
  const Value *X = N.getOperand(0);
  unsigned R = rankOf(X);
  if (R != 3 && R != 4)
    return std::nullopt;
  OpLoops L = unmapped(N);
  int64_t Granule = 0;
  if (R == 3) {
    std::optional<int64_t> Heads = intAttr(N, "num_heads");
    if (!Heads || *Heads <= 0)
      return std::nullopt;
    Granule = *Heads;
  }
  unsigned B = L.addLoop(LoopKind::Parallel);
  unsigned S = L.addLoop(LoopKind::Parallel);
  unsigned H = L.addLoop(LoopKind::Parallel, Granule);
  if (R == 4) {
    unsigned D = L.addLoop(LoopKind::Fixed);
    L.Operands[0] = {int(B), int(H), int(S), int(D)};
  } else {
    L.Operands[0] = {int(B), int(S), int(H)};
  }
  L.Results[0] = L.Operands[0];
  if (N.getNumOperands() > 3 && N.getOperand(3) && rankOf(N.getOperand(3)) == 2)
    L.Operands[3] = {int(B), int(S)};
  return L;
}

/// Convolution and pooling: [N, C, spatial...]; the window axes are fixed.
std::optional<OpLoops> convLoops(const Node &N, bool Transposed) {
  const Value *X = N.getOperand(0), *W = N.getOperand(1), *Y = N.getResult(0);
  unsigned R = rankOf(X);
  if (R < 3 || rankOf(W) != R || rankOf(Y) != R)
    return std::nullopt;
  bool Grouped = intAttr(N, "group").value_or(1) != 1;
  OpLoops L = unmapped(N);
  unsigned Batch = L.addLoop(LoopKind::Parallel);
  unsigned Out = L.addLoop(Grouped ? LoopKind::Fixed : LoopKind::Parallel);
  unsigned In = L.addLoop(Grouped ? LoopKind::Fixed : LoopKind::Reduction);
  L.Operands[0][0] = Batch;
  L.Operands[0][1] = In;
  L.Operands[1][0] = Transposed ? In : Out;
  L.Operands[1][1] = Transposed ? Out : In;
  L.Results[0][0] = Batch;
  L.Results[0][1] = Out;
  for (unsigned I = 2; I != R; ++I)
    L.Results[0][I] = L.addLoop(LoopKind::Fixed);
  // The bias [M] (ConvInteger: the weights' zero point per output channel,
  // operand 3) follows the output channels.
  unsigned PerChannel = N.getOp() == OpId::ConvInteger ? 3 : 2;
  const Value *C =
      PerChannel < N.getNumOperands() ? N.getOperand(PerChannel) : nullptr;
  if (C && rankOf(C) == 1 && !isStaticOne(dimOf(C, 0)))
    L.Operands[PerChannel][0] = Out;
  return L;
}

/// Ops over [N, C, spatial...] whose per-channel operands are [C]: batch and
/// channels split unless listed in Fixed; spatial axes are fixed.
std::optional<OpLoops> channelLoops(const Node &N, bool ChannelFixed,
                                    bool BatchFixed) {
  const Value *X = N.getOperand(0);
  unsigned R = rankOf(X);
  if (R < 2)
    return std::nullopt;
  SmallVector<unsigned, 4> Fixed;
  if (BatchFixed)
    Fixed.push_back(0);
  if (ChannelFixed)
    Fixed.push_back(1);
  for (unsigned I = 2; I != R; ++I)
    Fixed.push_back(I);
  OpLoops L = broadcastLoops(N, {0}, Fixed);
  for (unsigned I = 1, E = N.getNumOperands(); I != E; ++I)
    if (rankOf(N.getOperand(I)) == 1)
      L.Operands[I][0] = 1;
  // Pooled or resized spatial axes map no loop in the result.
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    for (unsigned J = 2; J < rankOf(N.getResult(I)) && J < R; ++J)
      if (dimOf(N.getResult(I), J) != dimOf(X, J))
        L.Results[I][J] = OpLoops::NoLoop;
  return L;
}

std::optional<OpLoops> axisFixedLoops(const Node &N, int64_t DefaultAxis,
                                      ArrayRef<unsigned> DataOperands) {
  unsigned Rank = rankOf(N.getResult(0));
  std::optional<unsigned> Axis =
      normalizeAxis(intAttr(N, "axis").value_or(DefaultAxis), Rank);
  if (!Axis)
    return std::nullopt;
  return broadcastLoops(N, DataOperands, {*Axis});
}

/// Split and Concat along an axis: the axis splits D ways when every piece
/// does (granule: the gcd of the pieces), as Megatron-LM splits a fused QKV
/// projection: rank r holds the r-th block of each piece, so the whole
/// tensor is blocked piece by piece rather than cut in D contiguous parts.
/// The weights that produce it are permuted to match when they are loaded.
std::optional<OpLoops> pieceLoops(const Node &N, bool IsSplit) {
  const Value *Whole = IsSplit ? N.getOperand(0) : N.getResult(0);
  unsigned Rank = rankOf(Whole);
  std::optional<unsigned> Axis =
      normalizeAxis(intAttr(N, "axis").value_or(0), Rank);
  if (!Axis)
    return std::nullopt;
  SmallVector<const Value *, 4> Pieces;
  if (IsSplit)
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      Pieces.push_back(N.getResult(R));
  else
    for (const Value *O : N.getOperands())
      Pieces.push_back(O);
  int64_t Granule = 0;
  bool Equal = true;
  for (const Value *P : Pieces) {
    if (!P || rankOf(P) != Rank || !dimOf(P, *Axis).isStatic())
      return std::nullopt;
    Granule = std::gcd(Granule, dimOf(P, *Axis).getSize());
    Equal &= dimOf(P, *Axis) == dimOf(Pieces.front(), *Axis);
  }
  // Ranks hold their block of each piece as a [pieces, n / pieces] view
  // (passes/LocalizeTensorParallel.cpp), so the axis splits only when the
  // pieces are equal (fused QKV without grouped KV heads, gate and up);
  // unequal ones (an Inception block's concatenated branches) keep it whole.
  OpLoops L = unmapped(N);
  for (unsigned I = 0; I != Rank; ++I)
    L.addLoop(I == *Axis && !Equal ? LoopKind::Fixed : LoopKind::Parallel,
              I == *Axis ? std::max<int64_t>(Granule, 1) : 0);
  auto MapAll = [&](DimMap &M) {
    for (unsigned I = 0; I != Rank; ++I)
      M[I] = I;
  };
  if (IsSplit) {
    MapAll(L.Operands[0]);
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      MapAll(L.Results[R]);
  } else {
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
      MapAll(L.Operands[I]);
    MapAll(L.Results[0]);
  }
  return L;
}

/// The axes of operand AxesOperand (default: the first, in order) and the
/// values operand ValuesOperand gives each of them, PerAxis in a row
/// (Pad's begins then ends: 2; Slice's steps: 1), axes normalized; nullopt
/// when a value is not known.
std::optional<std::pair<SmallVector<unsigned, 4>, SmallVector<int64_t, 8>>>
valuesByAxis(const Node &N, unsigned ValuesOperand, unsigned AxesOperand,
             unsigned PerAxis) {
  unsigned Rank = rankOf(N.getOperand(0));
  std::optional<SmallVector<int64_t, 4>> Values =
      constantInts(N, "", ValuesOperand);
  if (!Values || Values->size() % PerAxis)
    return std::nullopt;
  std::optional<SmallVector<int64_t, 4>> Axes;
  if (AxesOperand < N.getNumOperands() && N.getOperand(AxesOperand)) {
    Axes = constantInts(N, "", AxesOperand);
  } else {
    Axes.emplace(Values->size() / PerAxis);
    std::iota(Axes->begin(), Axes->end(), 0);
  }
  if (!Axes || Axes->size() * PerAxis != Values->size())
    return std::nullopt;
  SmallVector<unsigned, 4> Normalized;
  for (int64_t Axis : *Axes) {
    if (Axis < 0)
      Axis += Rank;
    if (Axis < 0 || Axis >= int64_t(Rank))
      return std::nullopt;
    Normalized.push_back(unsigned(Axis));
  }
  return std::make_pair(
      Normalized, SmallVector<int64_t, 8>(Values->begin(), Values->end()));
}

/// Every axis of operand 0.
SmallVector<unsigned, 4> allAxes(const Node &N) {
  SmallVector<unsigned, 4> All(rankOf(N.getOperand(0)));
  std::iota(All.begin(), All.end(), 0);
  return All;
}

/// The axes a Pad pads or crops, where a begin and an end that cancel out
/// still move the elements: every axis when its pads or axes are unknown.
SmallVector<unsigned, 4> paddedAxes(const Node &N) {
  auto Pads = valuesByAxis(N, 1, 3, 2);
  if (!Pads)
    return allAxes(N);
  auto &[Axes, Values] = *Pads;
  SmallVector<unsigned, 4> Padded;
  for (size_t I = 0, E = Axes.size(); I != E; ++I)
    if (Values[I] || Values[I + E])
      Padded.push_back(Axes[I]);
  return Padded;
}

/// The axes a Resize resamples, or may once split: all but those it reads
/// at their own index with a relative factor. An axis outside `axes`, or of
/// constant scale 1, is read at its own index by every coordinate
/// transformation except tf_crop_and_resize (its roi) and
/// tf_half_pixel_for_nn (x + 0.5, which some roundings move): under those,
/// and where the scales are not known, every axis. An axis that `sizes`
/// names is fixed even where its size stays: a rank's block would be
/// resized to the whole size.
SmallVector<unsigned, 4> resampledAxes(const Node &N) {
  unsigned Rank = rankOf(N.getOperand(0));
  SmallVector<unsigned, 4> All = allAxes(N);
  const Attribute *Coord = N.getAttr("coordinate_transformation_mode");
  if (Coord && (Coord->getString() == "tf_crop_and_resize" ||
                Coord->getString() == "tf_half_pixel_for_nn"))
    return All;
  SmallVector<unsigned, 4> Axes = All;
  if (const Attribute *A = N.getAttr("axes")) {
    Axes.clear();
    for (int64_t Axis : A->getIntList())
      Axes.push_back(unsigned(Axis < 0 ? Axis + Rank : Axis));
  }
  const DenseTensor *Scales = N.getNumOperands() > 2 && N.getOperand(2)
                                  ? getConstantValue(N.getOperand(2))
                                  : nullptr;
  SmallVector<unsigned, 4> Resampled;
  for (size_t I = 0, E = Axes.size(); I != E; ++I)
    if (!Scales || !Scales->isFloat() || I >= Scales->size() ||
        Scales->getFloats()[I] != 1.0)
      Resampled.push_back(Axes[I]);
  return Resampled;
}

/// The axes a Slice steps through by other than 1 (a reversal keeps the
/// size but moves every element): every axis when the steps or axes are
/// unknown.
SmallVector<unsigned, 4> steppedAxes(const Node &N) {
  if (N.getNumOperands() < 5 || !N.getOperand(4))
    return {};
  auto Steps = valuesByAxis(N, 4, 3, 1);
  if (!Steps)
    return allAxes(N);
  auto &[Axes, Values] = *Steps;
  SmallVector<unsigned, 4> Stepped;
  for (size_t I = 0, E = Axes.size(); I != E; ++I)
    if (Values[I] != 1)
      Stepped.push_back(Axes[I]);
  return Stepped;
}

/// Ops that keep the rank but may resize some axes (Slice, Tile, Pad): the
/// resized axes are fixed, and so are the axes a Pad shifts and those a
/// Slice steps through backwards or by more than one.
std::optional<OpLoops> resizingLoops(const Node &N) {
  const Value *In = N.getOperand(0), *Out = N.getResult(0);
  if (rankOf(In) != rankOf(Out))
    return std::nullopt;
  SmallVector<unsigned, 4> Fixed = changedAxes(In, Out);
  SmallVector<unsigned, 4> Moved;
  if (N.getOp() == OpId::Pad)
    Moved = paddedAxes(N);
  else if (N.getOp() == OpId::Slice)
    Moved = steppedAxes(N);
  else if (N.getOp() == OpId::Resize)
    Moved = resampledAxes(N);
  for (unsigned Axis : Moved)
    if (!is_contained(Fixed, Axis))
      Fixed.push_back(Axis);
  OpLoops L = broadcastLoops(N, {}, Fixed);
  for (unsigned I = 0, E = rankOf(In); I != E; ++I)
    if (L.Kinds[I] != LoopKind::Fixed)
      L.Operands[0][I] = I;
  for (unsigned I = 0, E = rankOf(Out); I != E; ++I)
    if (L.Kinds[I] == LoopKind::Fixed)
      L.Results[0][I] = OpLoops::NoLoop;
  return L;
}

} // namespace

std::optional<OpLoops> autopar::getOpLoops(const Node &N) {
  if (N.getNumResults() == 0 || !N.getResult(0))
    return std::nullopt;
  switch (getOpFacts(N.getOp()).Loops) {
  case LoopRule::None:
    // Constants and shape computations are replicated; Opaque, contrib and
    // backward-only ops have no rule.
    return std::nullopt;
  case LoopRule::Broadcast:
    return broadcastLoops(N, allOperands(N));
  case LoopRule::Unary:
    // Dropout's ratio and training_mode, Expand's shape: read whole.
    return broadcastLoops(N, {0});
  case LoopRule::AxisFixed:
    return axisFixedLoops(N, -1, {0});
  case LoopRule::IndexedAxisFixed:
    return axisFixedLoops(N, 0, allOperands(N));
  case LoopRule::CumSum: {
    std::optional<SmallVector<int64_t, 4>> Axis = constantInts(N, "", 1);
    unsigned Rank = rankOf(N.getResult(0));
    if (!Axis || Axis->size() != 1 || !normalizeAxis((*Axis)[0], Rank))
      return std::nullopt;
    return broadcastLoops(N, {0}, {*normalizeAxis((*Axis)[0], Rank)});
  }
  case LoopRule::Trilu: {
    unsigned Rank = rankOf(N.getResult(0));
    if (Rank < 2)
      return std::nullopt;
    return broadcastLoops(N, {0}, {Rank - 2, Rank - 1});
  }
  case LoopRule::MatMul:
    return matmulLoops(N);
  case LoopRule::Linear:
    return linearLoops(N);
  case LoopRule::Gemm:
    return gemmLoops(N);
  case LoopRule::Einsum:
    return einsumLoops(N);
  case LoopRule::SumReduction:
    return reduceLoops(N, LoopKind::Reduction);
  case LoopRule::MaxReduction:
    return reduceLoops(N, LoopKind::Fixed);
  case LoopRule::ArgReduction:
    return reduceAxesLoops(N, {intAttr(N, "axis").value_or(0)},
                           LoopKind::Fixed);
  case LoopRule::Norm:
    return normLoops(N, -1);
  case LoopRule::Channel:
    // BatchNormalization's statistics are per rank's samples, as data
    // parallelism computes them.
    return channelLoops(N, /*ChannelFixed=*/false, /*BatchFixed=*/false);
  case LoopRule::ChannelFixed:
    return channelLoops(N, /*ChannelFixed=*/true, false);
  case LoopRule::Conv:
    return convLoops(N, /*Transposed=*/false);
  case LoopRule::ConvTranspose:
    return convLoops(N, /*Transposed=*/true);
  case LoopRule::Attention:
    return attentionLoops(N);
  case LoopRule::Rotary:
    return rotaryLoops(N);
  case LoopRule::Reshape:
    return reshapeLoops(N);
  case LoopRule::Transpose:
    return transposeLoops(N);
  case LoopRule::Concat:
    return pieceLoops(N, /*IsSplit=*/false);
  case LoopRule::Split:
    return pieceLoops(N, /*IsSplit=*/true);
  case LoopRule::Resizing:
    return resizingLoops(N);
  case LoopRule::Gather:
    return gatherLoops(N);
  }
  return std::nullopt;
}

bool autopar::canSplitLoop(const Node &N, const OpLoops &Loops, unsigned L,
                           int64_t Degree) {
  if (L >= Loops.getNumLoops() || Degree < 1)
    return false;
  if (Degree == 1)
    return true;
  if (Loops.Kinds[L] == LoopKind::Fixed ||
      (Loops.Granules[L] && Loops.Granules[L] % Degree))
    return false;
  bool Mapped = false;
  auto Check = [&](const Value *V, ArrayRef<int> Map) {
    for (unsigned I = 0, E = Map.size(); I != E; ++I) {
      if (Map[I] != int(L))
        continue;
      const Dim &D = V->getType().getDim(I);
      if (!D.isStatic() || D.getSize() % Degree)
        return false;
      Mapped = true;
    }
    return true;
  };
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
    if (N.getOperand(I) && !Check(N.getOperand(I), Loops.Operands[I]))
      return false;
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    if (N.getResult(I) && !Check(N.getResult(I), Loops.Results[I]))
      return false;
  return Mapped;
}

bool autopar::readsOnlyShape(const Node &N, unsigned I) {
  return I == 0 && (N.getOp() == OpId::Shape || N.getOp() == OpId::Size);
}
