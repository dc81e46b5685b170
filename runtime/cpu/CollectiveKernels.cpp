//===- CollectiveKernels.cpp - Communication nodes on the CPU -------------===//
//
// See CollectiveKernels.h. The IR's AllToAll moves the split of its value
// from `src_dim` to `dst_dim`: each rank cuts its operand along `dst_dim`
// and concatenates what it receives along `src_dim`, which is the
// communicator's allToAll with SrcDim = `dst_dim` and DstDim = `src_dim`.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CollectiveKernels.h"
#include "runtime/ShardPlace.h"
#include "runtime/cpu/CpuCommunicator.h"

#include "ir/Graph.h"

#include <cstring>

using namespace autopar;
using namespace llvm;

/// The ranks a collective node runs among, and its label for messages.
static Expected<ShardPlace> getCollectiveGroup(const KernelArgs &A,
                                               const Communicator &Comm) {
  Expected<ShardPlace> Group = getCollectivePlace(A, Comm);
  if (!Group)
    return Group.takeError();
  if (A.intAttr("local", 0) == 0 && Group->Ranks.size() > 1 &&
      A.N.getOp() != OpId::AllReduce)
    return A.error("has the logical (whole) type, without `local = 1`; in "
                   "a job of " +
                   Twine(Comm.getNumRanks()) +
                   " ranks, programs are per rank and their gathers, "
                   "scatters and all-to-alls set local = 1");
  return Group;
}

/// A dimension attribute, checked against the operand's rank.
static Expected<unsigned> getDimAttr(const KernelArgs &A, StringRef Name) {
  int64_t D = A.intAttr(Name, -1);
  if (D < 0 || D >= int64_t(A.In[0].getRank()))
    return A.error("'" + Name + "' " + Twine(D) + " is not a dimension of " +
                   A.In[0].getTypeString());
  return unsigned(D);
}

static Error runCollective(const KernelArgs &A, Communicator &Comm,
                           Communicator::Duration Timeout) {
  if (!A.has(0) || !A.hasResult(0))
    return A.error("needs an operand and a result");
  Expected<ShardPlace> Group = getCollectiveGroup(A, Comm);
  if (!Group)
    return Group.takeError();
  CommunicationLabel Label(Group->Label);
  const Tensor &In = A.In[0], &Out = A.Out[0];
  // Ops of one family each (ir/OpFacts.def); the caller checked
  // isCommunicationOp.
  OpId Op = A.N.getOp();
  if (Op == OpId::AllReduce)
    return Comm.allReduce(In, Out, Group->Ranks, Timeout);
  if (Op == OpId::AllGather || Op == OpId::ReduceScatter) {
    Expected<unsigned> Dim = getDimAttr(A, "dim");
    if (!Dim)
      return Dim.takeError();
    return Op == OpId::AllGather
               ? Comm.allGather(In, Out, Group->Ranks, *Dim, Timeout)
               : Comm.reduceScatter(In, Out, Group->Ranks, *Dim, Timeout);
  }
  assert(Op == OpId::AllToAll && "not a collective");
  Expected<unsigned> SrcDim = getDimAttr(A, "src_dim");
  if (!SrcDim)
    return SrcDim.takeError();
  Expected<unsigned> DstDim = getDimAttr(A, "dst_dim");
  if (!DstDim)
    return DstDim.takeError();
  return Comm.allToAll(In, Out, Group->Ranks, /*SrcDim=*/*DstDim,
                       /*DstDim=*/*SrcDim, Timeout);
}

/// The rank of pipeline stage `Attr` with this rank's other coordinates.
static Expected<int> getStagePeer(const KernelArgs &A, const Communicator &Comm,
                                  StringRef Attr, std::string &Label) {
  int64_t Stage = A.intAttr(Attr, -1);
  if (Comm.getNumRanks() == 1)
    return A.error("a job of one rank has no pipeline stage " + Twine(Stage) +
                   " (start the job with mpirun, one rank per device)");
  const Graph *G = A.N.getGraph();
  const Mesh *M = nullptr;
  for (const Mesh &Candidate : G->getMeshes())
    if (Candidate.getAxisSize("pp")) {
      M = &Candidate;
      break;
    }
  if (!M)
    return A.error("finding the rank of pipeline stage " + Twine(Stage) +
                   " needs a mesh with a 'pp' axis; the graph has none");
  Expected<int> Peer =
      getMeshPeer(*M, "pp", Stage, Comm.getRank(), Comm.getNumRanks());
  if (!Peer)
    return A.error(toString(Peer.takeError()));
  if (*Peer == Comm.getRank())
    return A.error("pipeline stage " + Twine(Stage) + " is this rank's own");
  Label = ("pipeline stage " + Twine(Stage) + " of mesh @" + M->Name + ", " +
           describeNode(A.N))
              .str();
  return *Peer;
}

Error autopar::runCommunication(const KernelArgs &A, Communicator &Comm,
                                Communicator::Duration Timeout) {
  OpId Op = A.N.getOp();
  if (Op == OpId::SendRecv) {
    if (Comm.getNumRanks() != 1)
      return A.error("moves a value between the stages of a whole-model "
                     "program; per-rank programs use Send and Recv");
    if (!A.has(0) || !A.hasResult(0))
      return A.error("needs an operand and a result");
    if (Error E = A.checkShape(0, A.In[0].getShape()))
      return E;
    if (A.In[0].getData() != A.Out[0].getData() && A.In[0].getSizeInBytes())
      std::memcpy(A.Out[0].getData(), A.In[0].getData(),
                  A.In[0].getSizeInBytes());
    return Error::success();
  }
  if (Op == OpId::Send) {
    if (!A.has(0))
      return A.error("needs an operand");
    std::string Label;
    Expected<int> Peer = getStagePeer(A, Comm, "dst_stage", Label);
    if (!Peer)
      return Peer.takeError();
    CommunicationLabel Scope(Label);
    return Comm.send(A.In[0], *Peer, int(A.intAttr("tag", 0)), Timeout);
  }
  if (Op == OpId::Recv) {
    if (!A.hasResult(0))
      return A.error("needs a result");
    std::string Label;
    Expected<int> Peer = getStagePeer(A, Comm, "src_stage", Label);
    if (!Peer)
      return Peer.takeError();
    CommunicationLabel Scope(Label);
    return Comm.recv(A.Out[0], *Peer, int(A.intAttr("tag", 0)), Timeout);
  }
  return runCollective(A, Comm, Timeout);
}
