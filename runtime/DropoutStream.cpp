//===- DropoutStream.cpp - Where a node's dropout mask comes from ---------===//

#include "runtime/DropoutStream.h"

#include "ir/Graph.h"
#include "ir/OpRegistry.h"
#include "runtime/MeshGroups.h"

#include <cmath>

using namespace autopar;
using namespace llvm;

bool autopar::drawsDropoutMask(const Node &N) {
  return N.getAttr("rng_stream") != nullptr;
}

DropoutKey autopar::makeDropoutKey(const StepRandom &R, int64_t Stream,
                                   int64_t MicroBatch, double Ratio) {
  DropoutKey K;
  K.Key0 = uint32_t(R.Seed) ^ (uint32_t(Stream) * 0x9E3779B9u);
  K.Key1 = uint32_t(R.Seed >> 32);
  K.Step = uint32_t(R.Step);
  K.MicroBatch = uint32_t(MicroBatch);
  double T = std::round(Ratio * 4294967296.0);
  K.Threshold = uint32_t(std::min(T, 4294967295.0));
  K.Scale = float(1 / (1 - Ratio));
  return K;
}

Expected<const DropoutBlock *>
autopar::getAttentionDropoutBlock(const KernelArgs &A) {
  if (A.floatAttr("dropout", 0) <= 0)
    return nullptr;
  if (!A.Dropout)
    return A.error("attention dropout without a random stream (`rng_stream`: "
                   "run dropout-streams before autodiff)");
  return A.Dropout;
}

/// The sharding of V: its defining node's `sharding` (the entry of V's
/// result when a list), else V's own (inputs, parameters); null when none.
static const Sharding *getLayout(const Value *V) {
  const Attribute *S = nullptr;
  unsigned Index = 0;
  if (const Node *Def = V->getDefiningNode()) {
    S = Def->getAttr("sharding");
    Index = V->getResultIndex();
  } else {
    S = V->getAttrs().get("sharding");
  }
  if (S && S->isa(Attribute::Kind::List))
    S = Index < S->getList().size() ? &S->getList()[Index] : nullptr;
  return S && S->isa(Attribute::Kind::Sharding) ? &S->getSharding() : nullptr;
}

/// Sets dimension D of B (local size Local) from Layout's split of dimension
/// LayoutDim: the whole size and this rank's offset along the axes.
static Error splitDim(const KernelArgs &A, const Communicator &Comm,
                      const Sharding *Layout, unsigned LayoutDim, int D,
                      int64_t Local, DropoutBlock &B) {
  B.Local[D] = B.Global[D] = Local;
  B.Offset[D] = 0;
  if (!Layout || LayoutDim >= Layout->DimAxes.size() ||
      Layout->DimAxes[LayoutDim].empty())
    return Error::success();
  const Graph *G = A.N.getGraph();
  const Mesh *M = G ? G->lookupMesh(Layout->Mesh) : nullptr;
  if (!M)
    return A.error("unknown mesh '@" + Layout->Mesh + "' of its sharding");
  // A job of one rank runs every block at offset 0.
  SmallVector<int64_t, 4> Coords(M->Axes.size(), 0);
  if (Comm.getNumRanks() > 1)
    Coords = getMeshCoordinates(*M, Comm.getRank());
  AxesPart Part = getAxesPart(*M, Layout->DimAxes[LayoutDim], Coords);
  B.Global[D] = Local * Part.Parts;
  B.Offset[D] = Local * Part.Index;
  return Error::success();
}

Expected<DropoutBlock> autopar::getDropoutBlock(const KernelArgs &A,
                                                const Communicator &Comm,
                                                const StepRandom &R) {
  DropoutBlock B;
  double Ratio = 0;
  OpId Op = A.N.getOp();
  if (Op == OpId::Dropout) {
    std::optional<DropoutSetting> Setting = getDropoutSetting(A.N);
    if (!Setting)
      return A.error("a training-mode Dropout needs a constant ratio");
    Ratio = Setting->Ratio;
    if (!A.hasResult(0))
      return A.error("needs its result");
    ArrayRef<int64_t> Shape = A.Out[0].getShape();
    if (Shape.size() > size_t(DropoutBlock::MaxRank))
      return A.error("a dropout mask has at most " +
                     Twine(DropoutBlock::MaxRank) + " dimensions");
    B.Rank = Shape.size();
    const Sharding *Layout = getLayout(A.N.getResult(0));
    for (int D = 0; D != B.Rank; ++D)
      if (Error E = splitDim(A, Comm, Layout, D, D, Shape[D], B))
        return E;
  } else if (Op == OpId::Attention || Op == OpId::AttentionWithProbs ||
             Op == OpId::AttentionGrad) {
    Ratio = A.floatAttr("dropout", 0);
    unsigned QI = Op == OpId::AttentionGrad ? 1 : 0;
    if (!A.has(QI) || !A.has(QI + 1) || A.In[QI].getRank() != 4 ||
        A.In[QI + 1].getRank() != 4)
      return A.error("attention dropout takes 4-D Q and K");
    const Sharding *QLayout = getLayout(A.N.getOperand(QI));
    const Sharding *KLayout = getLayout(A.N.getOperand(QI + 1));
    if (KLayout && KLayout->DimAxes.size() > 2 && !KLayout->DimAxes[2].empty())
      return A.error("attention dropout with the keys split along the "
                     "sequence is not supported");
    B.Rank = 4;
    for (int D = 0; D != 3; ++D)
      if (Error E = splitDim(A, Comm, QLayout, D, D, A.In[QI].getDim(D), B))
        return E;
    if (Error E = splitDim(A, Comm, nullptr, 0, 3, A.In[QI + 1].getDim(2), B))
      return E;
  } else {
    return A.error("draws no dropout mask");
  }
  if (!(Ratio >= 0 && Ratio < 1))
    return A.error("dropout ratio " + std::to_string(Ratio) +
                   " is not in [0, 1)");
  int64_t Stream = A.intAttr("rng_stream", 0);
  int64_t K = A.intAttr("micro_batch", 0), M = A.intAttr("micro_batches", 1);
  B.Key = makeDropoutKey(R, Stream, R.Replica * M + K, Ratio);
  return B;
}
