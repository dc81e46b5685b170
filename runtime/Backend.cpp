//===- Backend.cpp - Tensors, backends and node errors --------------------===//

#include "runtime/Backend.h"

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

Communicator::~Communicator() = default;

Error Communicator::send(const Tensor &In, int DstRank, int Tag,
                         Duration Timeout) {
  if (Tag == 0)
    return send(In, DstRank, Timeout);
  return createStringError(inconvertibleErrorCode(),
                           "send to rank " + Twine(DstRank) + " with tag " +
                               Twine(Tag) +
                               ": this communicator has no tagged messages");
}

Error Communicator::recv(const Tensor &Out, int SrcRank, int Tag,
                         Duration Timeout) {
  if (Tag == 0)
    return recv(Out, SrcRank, Timeout);
  return createStringError(inconvertibleErrorCode(),
                           "receive from rank " + Twine(SrcRank) +
                               " with tag " + Twine(Tag) +
                               ": this communicator has no tagged messages");
}

Error Communicator::setVerifyTransfers(bool On) {
  if (!On)
    return Error::success();
  return createStringError(inconvertibleErrorCode(),
                           "--verify-transfers: this backend's communicator "
                           "does not check its messages (the CPU backend's "
                           "does)");
}

Backend::~Backend() = default;

Error Backend::runNodes(ArrayRef<const Node *> Nodes,
                        ArrayRef<ArrayRef<Tensor>> Inputs,
                        ArrayRef<ArrayRef<Tensor>> Outputs) {
  for (size_t K = 0; K != Nodes.size(); ++K)
    if (Error E = runNode(*Nodes[K], Inputs[K], Outputs[K]))
      return E;
  return Error::success();
}

int64_t autopar::getNumElements(ArrayRef<int64_t> Shape) {
  int64_t N = 1;
  for (int64_t D : Shape)
    N *= D;
  return N;
}

size_t autopar::getElementSize(ElementType Ty) {
  return getElementTypeBits(Ty) / 8;
}

std::string autopar::formatTensorType(ElementType Ty, ArrayRef<int64_t> Shape) {
  std::string S;
  raw_string_ostream OS(S);
  OS << getElementTypeName(Ty) << '[';
  for (size_t I = 0; I != Shape.size(); ++I)
    OS << (I ? ", " : "") << Shape[I];
  OS << ']';
  return OS.str();
}

std::string autopar::describeNode(const Node &N) {
  std::string Name = N.getName().str();
  if (Name.empty() && N.getNumResults() != 0)
    Name = "%" + N.getResult(0)->getName().str();
  // A node without results (Send): the value it takes.
  else if (Name.empty() && N.getNumOperands() != 0 && N.getOperand(0))
    Name = "%" + N.getOperand(0)->getName().str();
  return "node '" + Name + "' (" + N.getOpName().str() + ")";
}

Error autopar::createNodeError(const Node &N, const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           describeNode(N) + ": " + Message.str());
}
