//===- CpuCommunicator.cpp - Communication in host memory -----------------===//

#include "runtime/cpu/CpuCommunicator.h"

#include "ir/Graph.h"

#include <cstring>

using namespace autopar;
using namespace llvm;

static Error commError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

/// What, followed by the label of the communication in progress if any.
static std::string withLabel(const Twine &What) {
  StringRef Label = CommunicationLabel::current();
  return Label.empty() ? What.str() : (What + " (" + Label + ")").str();
}

Error SingleRankCommunicator::copy(StringRef What, const Tensor &In,
                                   const Tensor &Out, ArrayRef<int> Group) {
  if (Group.size() != 1 || Group[0] != 0)
    return commError(withLabel(What) +
                     ": a single-rank job has only rank 0; the group has " +
                     Twine(Group.size()) + " ranks");
  if (In.getElementType() != Out.getElementType() ||
      In.getShape() != Out.getShape())
    return commError(withLabel(What) + ": operand " + In.getTypeString() +
                     " and result " + Out.getTypeString() + " differ");
  if (In.getData() != Out.getData() && In.getSizeInBytes() != 0)
    std::memcpy(Out.getData(), In.getData(), In.getSizeInBytes());
  return Error::success();
}

Error SingleRankCommunicator::allReduce(const Tensor &In, const Tensor &Out,
                                        ArrayRef<int> Group, Duration) {
  return copy("all-reduce", In, Out, Group);
}

Error SingleRankCommunicator::allGather(const Tensor &In, const Tensor &Out,
                                        ArrayRef<int> Group, unsigned,
                                        Duration) {
  return copy("all-gather", In, Out, Group);
}

Error SingleRankCommunicator::reduceScatter(const Tensor &In, const Tensor &Out,
                                            ArrayRef<int> Group, unsigned,
                                            Duration) {
  return copy("reduce-scatter", In, Out, Group);
}

Error SingleRankCommunicator::allToAll(const Tensor &In, const Tensor &Out,
                                       ArrayRef<int> Group, unsigned, unsigned,
                                       Duration) {
  return copy("all-to-all", In, Out, Group);
}

Error SingleRankCommunicator::send(const Tensor &, int DstRank, Duration) {
  return commError(withLabel("send to rank " + Twine(DstRank)) +
                   ": a single-rank job has no other rank");
}

Error SingleRankCommunicator::recv(const Tensor &, int SrcRank, Duration) {
  return commError(withLabel("receive from rank " + Twine(SrcRank)) +
                   ": a single-rank job has no other rank");
}

//===----------------------------------------------------------------------===//
// Groups from meshes
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Chunk layouts
//===----------------------------------------------------------------------===//

namespace {
/// A shape seen as [Outer, Parts, Chunk bytes] along a dimension.
struct ChunkView {
  int64_t Outer = 1;
  size_t ChunkBytes = 0;

  ChunkView(ArrayRef<int64_t> Shape, size_t ElemSize, unsigned Dim,
            int64_t Parts) {
    for (unsigned I = 0; I != Dim; ++I)
      Outer *= Shape[I];
    int64_t Inner = 1;
    for (unsigned I = Dim + 1; I < Shape.size(); ++I)
      Inner *= Shape[I];
    ChunkBytes = size_t(Shape[Dim] / Parts) * size_t(Inner) * ElemSize;
  }
};
} // namespace

bool autopar::chunksAreContiguous(ArrayRef<int64_t> Shape, unsigned Dim) {
  for (unsigned I = 0; I != Dim; ++I)
    if (Shape[I] != 1)
      return false;
  return true;
}

void autopar::packChunks(const void *Src, void *Dst, ArrayRef<int64_t> Shape,
                         size_t ElemSize, unsigned Dim, int64_t Parts) {
  ChunkView V(Shape, ElemSize, Dim, Parts);
  if (V.ChunkBytes == 0)
    return;
  const char *S = static_cast<const char *>(Src);
  char *D = static_cast<char *>(Dst);
  for (int64_t O = 0; O != V.Outer; ++O)
    for (int64_t P = 0; P != Parts; ++P)
      std::memcpy(D + (P * V.Outer + O) * V.ChunkBytes,
                  S + (O * Parts + P) * V.ChunkBytes, V.ChunkBytes);
}

void autopar::unpackChunks(const void *Src, void *Dst, ArrayRef<int64_t> Shape,
                           size_t ElemSize, unsigned Dim, int64_t Parts) {
  ChunkView V(Shape, ElemSize, Dim, Parts);
  if (V.ChunkBytes == 0)
    return;
  const char *S = static_cast<const char *>(Src);
  char *D = static_cast<char *>(Dst);
  for (int64_t O = 0; O != V.Outer; ++O)
    for (int64_t P = 0; P != Parts; ++P)
      std::memcpy(D + (O * Parts + P) * V.ChunkBytes,
                  S + (P * V.Outer + O) * V.ChunkBytes, V.ChunkBytes);
}

//===----------------------------------------------------------------------===//
// CommunicationLabel
//===----------------------------------------------------------------------===//

static std::string &currentLabel() {
  static std::string Label;
  return Label;
}

CommunicationLabel::CommunicationLabel(std::string Text)
    : Previous(std::move(currentLabel())) {
  currentLabel() = std::move(Text);
}

CommunicationLabel::~CommunicationLabel() {
  currentLabel() = std::move(Previous);
}

StringRef CommunicationLabel::current() { return currentLabel(); }
