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

Error SingleRankCommunicator::send(const Tensor &In, int DstRank, int,
                                   Duration Timeout) {
  return send(In, DstRank, Timeout);
}

Error SingleRankCommunicator::recv(const Tensor &Out, int SrcRank, int,
                                   Duration Timeout) {
  return recv(Out, SrcRank, Timeout);
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
