//===- ShardPlace.cpp - A rank's block of an op split over a mesh ---------===//

#include "runtime/ShardPlace.h"
#include "runtime/MeshGroups.h"

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
