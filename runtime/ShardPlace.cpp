//===- ShardPlace.cpp - A rank's block of an op split over a mesh ---------===//

#include "runtime/ShardPlace.h"
#include "runtime/MeshGroups.h"
#include "runtime/OpShapes.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

bool autopar::isShardedKernel(const Node &N) {
  OpId Op = N.getOp();
  if (Op == OpId::ShardSlice)
    return true;
  bool MeshAxisSplits = Op == OpId::Gather || Op == OpId::GatherGrad ||
                        Op == OpId::CrossEntropyLoss ||
                        Op == OpId::CrossEntropyLossGrad;
  return MeshAxisSplits && N.getAttr("mesh_axis") != nullptr;
}

Expected<ShardPlace> autopar::getMeshAxisPlace(const KernelArgs &A,
                                               const Communicator &Comm,
                                               StringRef Axis, bool WholeMesh) {
  StringRef MeshName = A.stringAttr("mesh", "");
  const Graph *G = A.N.getGraph();
  const Mesh *M = G ? G->lookupMesh(MeshName) : nullptr;
  if (!M)
    return A.error("unknown mesh '@" + MeshName + "'");
  ShardPlace P;
  P.Label =
      ("axis '" + Axis + "' of mesh @" + MeshName + ", " + describeNode(A.N))
          .str();
  if (Comm.getNumRanks() == 1 && !WholeMesh) {
    P.Ranks.push_back(0);
    return P;
  }
  Expected<SmallVector<int, 8>> Ranks =
      getMeshGroup(*M, Axis, Comm.getRank(), Comm.getNumRanks());
  if (!Ranks)
    return A.error(toString(Ranks.takeError()));
  P.Ranks = std::move(*Ranks);
  P.Index = find(P.Ranks, Comm.getRank()) - P.Ranks.begin();
  return P;
}

Expected<ShardPlace> autopar::getCollectivePlace(const KernelArgs &A,
                                                 const Communicator &Comm) {
  return getMeshAxisPlace(A, Comm, A.stringAttr("axis", ""),
                          A.intAttr("local", 0) != 0);
}

Expected<ShardPlace> autopar::getShardPlace(const KernelArgs &A,
                                            const Communicator &Comm) {
  if (!A.has(0) || !A.hasResult(0))
    return A.error("needs its operands and a result");
  return getMeshAxisPlace(
      A, Comm,
      A.stringAttr(A.N.getOp() == OpId::ShardSlice ? "axis" : "mesh_axis", ""));
}

Expected<ShardSlicePlan> autopar::planShardSlice(const KernelArgs &A,
                                                 const ShardPlace &P) {
  const Tensor &In = A.In[0];
  int64_t Dim = A.intAttr("dim", -1);
  if (Dim < 0 || Dim >= int64_t(In.getRank()))
    return A.error("'dim' " + Twine(Dim) + " is not a dimension of " +
                   In.getTypeString());
  int64_t Parts = P.Ranks.size();
  if (In.getDim(Dim) % Parts)
    return A.error("dimension " + Twine(Dim) + " of " + In.getTypeString() +
                   " does not split " + Twine(Parts) + " ways");
  Shape Local = toShape(In.getShape());
  Local[Dim] /= Parts;
  if (Error E = A.checkShape(0, Local))
    return E;
  ShardSlicePlan Plan;
  Plan.Outer = getNumElements(In.getShape().take_front(Dim));
  Plan.Run = size_t(getNumElements(ArrayRef<int64_t>(Local).drop_front(Dim))) *
             getElementSize(In.getElementType());
  return Plan;
}

Expected<ShardedGatherPlan> autopar::planShardedGather(const KernelArgs &A,
                                                       const ShardPlace &P) {
  bool Grad = A.N.getOp() == OpId::GatherGrad;
  if (A.intAttr("axis", 0) != 0)
    return A.error(Grad ? "a vocabulary-parallel GatherGrad scatters along "
                          "axis 0"
                        : "a vocabulary-parallel Gather gathers along axis 0");
  const Tensor &Data = A.In[0], &Idx = A.In[1];
  if (Data.getRank() == 0)
    return A.error("data must have a rank of at least 1");
  ShardedGatherPlan Plan;
  Plan.Rows = Data.getDim(0);
  Plan.Offset = P.Index * Plan.Rows;
  Plan.Total = Plan.Rows * int64_t(P.Ranks.size());
  Plan.Inner = getNumElements(Data.getShape().drop_front());
  Plan.Count = Idx.getNumElements();
  if (Grad) {
    if (Error E = A.checkShape(0, Data.getShape()))
      return E;
    const Tensor &DY = A.In[2];
    if (DY.getNumElements() != Plan.Count * Plan.Inner)
      return A.error("dY " + DY.getTypeString() +
                     " is not the shape of Gather(data, indices)");
    return Plan;
  }
  Shape Out = toShape(Idx.getShape());
  Out.append(Data.getShape().begin() + 1, Data.getShape().end());
  if (Error E = A.checkShape(0, Out))
    return E;
  return Plan;
}
