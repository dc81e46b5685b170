//===- ShapeFunctionsCollective.cpp - Collectives and stage transfers -----===//
//
// autopar's own communication ops, inserted by insert-collectives. Values
// keep their logical (whole) types; a collective changes how its value lies
// over the mesh, which its result's `sharding` annotation records. So every
// collective's result has its operand's type, and the verifier checks that
// the mesh and axis exist and that the dimensions are in range.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFunctions.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

Error autopar::verifyCollective(const ShapeContext &Ctx) {
  const Node &N = Ctx.getNode();
  if (N.getOp() == OpId::SendRecv) {
    if (Ctx.getIntAttr("src_stage", -1) < 0 ||
        Ctx.getIntAttr("dst_stage", -1) < 0)
      return Ctx.error("'src_stage' and 'dst_stage' must be at least 0");
    return Error::success();
  }
  const Attribute *Mesh = Ctx.getAttr("mesh");
  const Attribute *Axis = Ctx.getAttr("axis");
  const Graph *G = N.getGraph();
  const autopar::Mesh *M = G ? G->lookupMesh(Mesh->getString()) : nullptr;
  if (!M)
    return Ctx.error("unknown mesh '@" + Mesh->getString() + "'");
  if (!M->getAxisSize(Axis->getString()))
    return Ctx.error("mesh '@" + Mesh->getString() + "' has no axis '" +
                     Axis->getString() + "'");
  unsigned Rank = Ctx.getOperandType(0).getRank();
  for (StringRef Name : {"dim", "src_dim", "dst_dim"})
    if (const Attribute *D = Ctx.getAttr(Name))
      if (D->getInt() < 0 || D->getInt() >= int64_t(Rank))
        return Ctx.error("'" + Name + "' " + Twine(D->getInt()) +
                         " is not a dimension of a rank-" + Twine(Rank) +
                         " value");
  return Error::success();
}
