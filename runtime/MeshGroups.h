//===- MeshGroups.h - Ranks, coordinates and groups on a mesh ---*- C++ -*-===//
//
// A job's world ranks lie on a graph's mesh in row-major order over its
// axes (listed outer to inner, so the last axis, `tp` in `[pp, dp, tp]`, is
// innermost: Megatron's order). The group of (mesh, axis) for a rank is the
// ranks that share all its other coordinates, in the order of their
// coordinate on the axis. Used by every communicator, and by the loading of
// parameter shards (ParamInit.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MESHGROUPS_H
#define AUTOPAR_RUNTIME_MESHGROUPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace autopar {

struct Mesh;

/// "mesh @cluster = [dp = 2, tp = 2]".
std::string describeMesh(const Mesh &M);
/// "ranks [0, 2]" (or "rank 0" for one).
std::string describeGroup(llvm::ArrayRef<int> Group);

/// Rank's coordinates on M, one per axis (Rank in [0, devices)).
llvm::SmallVector<int64_t, 4> getMeshCoordinates(const Mesh &M, int Rank);
/// How Axes (axes of M, major to minor) split a dimension: into Parts, of
/// which the rank at Coords (getMeshCoordinates) holds part Index,
/// row-major over its coordinates on the axes. Axes M lacks count as one
/// part. What a sharding's dimension, or a batch_split, gives one rank.
struct AxesPart {
  int64_t Parts = 1, Index = 0;
};
AxesPart getAxesPart(const Mesh &M, llvm::ArrayRef<std::string> Axes,
                     llvm::ArrayRef<int64_t> Coords);
/// The group of (M, Axis) that Rank belongs to, in axis order. An error
/// when the mesh has no such axis or its device count is not NumRanks.
llvm::Expected<llvm::SmallVector<int, 8>>
getMeshGroup(const Mesh &M, llvm::StringRef Axis, int Rank, int NumRanks);
/// The rank with Rank's coordinates except Coordinate on Axis (a pipeline
/// stage on `pp`). Errors as getMeshGroup's, and when Coordinate is not on
/// the axis.
llvm::Expected<int> getMeshPeer(const Mesh &M, llvm::StringRef Axis,
                                int64_t Coordinate, int Rank, int NumRanks);
/// An error unless M's device count is NumRanks.
llvm::Error checkMeshSize(const Mesh &M, int NumRanks);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_MESHGROUPS_H
