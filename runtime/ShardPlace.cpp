//===- ShardPlace.cpp - A rank's block of an op split over a mesh ---------===//

#include "runtime/ShardPlace.h"
#include "runtime/MeshGroups.h"
#include "runtime/OpShapes.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

Expected<ShardPlace> autopar::getShardPlace(const KernelArgs &A,
                                            const Communicator &Comm,
                                            StringRef AxisAttr) {
  StringRef MeshName = A.stringAttr("mesh", "");
  StringRef Axis = A.stringAttr(AxisAttr, "");
  const Graph *G = A.N.getGraph();
  const Mesh *M = G ? G->lookupMesh(MeshName) : nullptr;
  if (!M)
    return A.error("unknown mesh '@" + MeshName + "'");
  ShardPlace P;
  P.Label =
      ("axis '" + Axis + "' of mesh @" + MeshName + ", " + describeNode(A.N))
          .str();
  if (Comm.getNumRanks() == 1) {
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
