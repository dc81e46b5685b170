//===- MeshGroups.cpp - Ranks, coordinates and groups on a mesh -----------===//

#include "runtime/MeshGroups.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

static Error commError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

std::string autopar::describeMesh(const Mesh &M) {
  std::string S = "mesh @" + M.Name + " = [";
  for (size_t I = 0; I != M.Axes.size(); ++I)
    S += (I ? ", " : "") + M.Axes[I].first + " = " +
         std::to_string(M.Axes[I].second);
  return S + "]";
}

std::string autopar::describeGroup(ArrayRef<int> Group) {
  if (Group.size() == 1)
    return "rank " + std::to_string(Group[0]);
  std::string S = "ranks [";
  for (size_t I = 0; I != Group.size(); ++I)
    S += (I ? ", " : "") + std::to_string(Group[I]);
  return S + "]";
}

AxesPart autopar::getAxesPart(const Mesh &M, ArrayRef<std::string> Axes,
                              ArrayRef<int64_t> Coords) {
  AxesPart P;
  for (const std::string &Axis : Axes)
    for (unsigned I = 0; I != M.Axes.size(); ++I)
      if (M.Axes[I].first == Axis) {
        P.Parts *= M.Axes[I].second;
        P.Index = P.Index * M.Axes[I].second + Coords[I];
      }
  return P;
}

SmallVector<int64_t, 4> autopar::getMeshCoordinates(const Mesh &M, int Rank) {
  SmallVector<int64_t, 4> Coords(M.Axes.size());
  int64_t R = Rank;
  for (size_t I = M.Axes.size(); I-- != 0;) {
    Coords[I] = R % M.Axes[I].second;
    R /= M.Axes[I].second;
  }
  return Coords;
}

Error autopar::checkMeshSize(const Mesh &M, int NumRanks) {
  int64_t Devices = M.getNumDevices();
  if (Devices != NumRanks)
    return commError(describeMesh(M) + " has " + Twine(Devices) +
                     " devices; the job has " + Twine(NumRanks) +
                     (NumRanks == 1 ? " rank" : " ranks") +
                     " (start it with mpirun -np " + Twine(Devices) + ")");
  return Error::success();
}

/// The index of Axis in M and its stride in rank numbers.
static Expected<std::pair<size_t, int64_t>> findAxis(const Mesh &M,
                                                     StringRef Axis) {
  int64_t Stride = 1;
  for (size_t I = M.Axes.size(); I-- != 0;) {
    if (M.Axes[I].first == Axis)
      return std::make_pair(I, Stride);
    Stride *= M.Axes[I].second;
  }
  return commError(describeMesh(M) + " has no axis '" + Axis + "'");
}

Expected<SmallVector<int, 8>>
autopar::getMeshGroup(const Mesh &M, StringRef Axis, int Rank, int NumRanks) {
  if (Error E = checkMeshSize(M, NumRanks))
    return E;
  Expected<std::pair<size_t, int64_t>> Found = findAxis(M, Axis);
  if (!Found)
    return Found.takeError();
  auto [Index, Stride] = *Found;
  int64_t Coord = getMeshCoordinates(M, Rank)[Index];
  int64_t First = Rank - Coord * Stride;
  SmallVector<int, 8> Group;
  for (int64_t C = 0; C != M.Axes[Index].second; ++C)
    Group.push_back(int(First + C * Stride));
  return Group;
}

Expected<int> autopar::getMeshPeer(const Mesh &M, StringRef Axis,
                                   int64_t Coordinate, int Rank, int NumRanks) {
  if (Error E = checkMeshSize(M, NumRanks))
    return E;
  Expected<std::pair<size_t, int64_t>> Found = findAxis(M, Axis);
  if (!Found)
    return Found.takeError();
  auto [Index, Stride] = *Found;
  int64_t Size = M.Axes[Index].second;
  if (Coordinate < 0 || Coordinate >= Size)
    return commError(Axis + " = " + Twine(Coordinate) + " is not on " +
                     describeMesh(M) + " (" + Axis + " has " + Twine(Size) +
                     ")");
  int64_t Coord = getMeshCoordinates(M, Rank)[Index];
  return int(Rank + (Coordinate - Coord) * Stride);
}
