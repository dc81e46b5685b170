//===- CpuCommunicator.cpp - Communication in host memory -----------------===//

#include "runtime/cpu/CpuCommunicator.h"

#include <cstring>

using namespace autopar;
using namespace llvm;

static Error commError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

Error SingleRankCommunicator::copy(StringRef What, const Tensor &In,
                                   const Tensor &Out, ArrayRef<int> Group) {
  if (Group.size() != 1 || Group[0] != 0)
    return commError(What +
                     ": a single-rank job has only rank 0; the group "
                     "has " +
                     Twine(Group.size()) + " ranks");
  if (In.getElementType() != Out.getElementType() ||
      In.getShape() != Out.getShape())
    return commError(What + ": operand " + In.getTypeString() + " and result " +
                     Out.getTypeString() + " differ");
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
  return commError("send to rank " + Twine(DstRank) +
                   ": a single-rank job has no other rank");
}

Error SingleRankCommunicator::recv(const Tensor &, int SrcRank, Duration) {
  return commError("receive from rank " + Twine(SrcRank) +
                   ": a single-rank job has no other rank");
}
