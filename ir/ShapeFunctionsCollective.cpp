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

/// An error unless the graph has mesh Mesh with axis Axis.
static Error checkMeshAxis(const ShapeContext &Ctx, const Attribute &Mesh,
                           const Attribute &Axis) {
  const Graph *G = Ctx.getNode().getGraph();
  const autopar::Mesh *M = G ? G->lookupMesh(Mesh.getString()) : nullptr;
  if (!M)
    return Ctx.error("unknown mesh '@" + Mesh.getString() + "'");
  if (!M->getAxisSize(Axis.getString()))
    return Ctx.error("mesh '@" + Mesh.getString() + "' has no axis '" +
                     Axis.getString() + "'");
  return Error::success();
}

Error autopar::verifyCollective(const ShapeContext &Ctx) {
  const Node &N = Ctx.getNode();
  if (N.getOp() == OpId::SendRecv || N.getOp() == OpId::Send ||
      N.getOp() == OpId::Recv) {
    for (StringRef Name : {"src_stage", "dst_stage", "tag"})
      if (Ctx.getAttr(Name) && Ctx.getIntAttr(Name, -1) < 0)
        return Ctx.error("'" + Name + "' must be at least 0");
    return Error::success();
  }
  if (Error E = checkMeshAxis(Ctx, *Ctx.getAttr("mesh"), *Ctx.getAttr("axis")))
    return E;
  unsigned Rank = Ctx.getOperandType(0).getRank();
  for (StringRef Name : {"dim", "src_dim", "dst_dim"})
    if (const Attribute *D = Ctx.getAttr(Name))
      if (D->getInt() < 0 || D->getInt() >= int64_t(Rank))
        return Ctx.error("'" + Name + "' " + Twine(D->getInt()) +
                         " is not a dimension of a rank-" + Twine(Rank) +
                         " value");
  return Error::success();
}

// Logical types stay; with `local = 1` the per-rank sizes change along the
// gathered, scattered or exchanged dimensions (verifyCollective has checked
// the mesh, the axis and the dimensions).
InferResult autopar::inferCollective(const ShapeContext &Ctx) {
  const TensorType &X = Ctx.getOperandType(0);
  bool Slice = Ctx.getNode().getOp() == OpId::ShardSlice;
  if (!Slice && !Ctx.getIntAttr("local", 0))
    return SmallVector<TensorType, 1>{X};
  const Node &N = Ctx.getNode();
  const Mesh *M = N.getGraph()->lookupMesh(Ctx.getAttr("mesh")->getString());
  int64_t Size = *M->getAxisSize(Ctx.getAttr("axis")->getString());
  SmallVector<Dim, 4> Shape(X.getShape().begin(), X.getShape().end());
  auto Scale = [&](int64_t D, bool Up) -> Error {
    const Dim &Old = Shape[D];
    if (Up) {
      Shape[D] = Old * Dim::get(Size);
      return Error::success();
    }
    std::optional<Dim> Q = Old.divide(Dim::get(Size));
    if (!Q)
      return Ctx.error("dimension " + Twine(D) + " is not divisible by the " +
                       Twine(Size) + " ranks of axis '" +
                       Ctx.getAttr("axis")->getString() + "'");
    Shape[D] = *Q;
    return Error::success();
  };
  bool Gather = N.getOp() == OpId::AllGather;
  bool Scatter = N.getOp() == OpId::ReduceScatter || Slice;
  if (Error E = Gather || Scatter ? Scale(Ctx.getIntAttr("dim", 0), Gather)
                                  : Scale(Ctx.getIntAttr("dst_dim", 0), false))
    return E;
  if (!Gather && !Scatter)
    if (Error E = Scale(Ctx.getIntAttr("src_dim", 0), true))
      return E;
  return SmallVector<TensorType, 1>{TensorType(X.getElementType(), Shape)};
}

// Gather, GatherGrad and the cross-entropy ops over a vocabulary split
// across a mesh axis: `mesh` and `mesh_axis` come together and name an axis
// of a mesh of the graph.
Error autopar::verifyShardedGather(const ShapeContext &Ctx) {
  const Attribute *Mesh = Ctx.getAttr("mesh");
  const Attribute *Axis = Ctx.getAttr("mesh_axis");
  if (!Mesh && !Axis)
    return Error::success();
  if (!Mesh || !Axis)
    return Ctx.error("'mesh' and 'mesh_axis' go together");
  return checkMeshAxis(Ctx, *Mesh, *Axis);
}
