//===- Backend.h - What a runtime backend implements ------------*- C++ -*-===//
//
// A backend owns device memory, runs one node at a time, and talks to the
// other ranks through its Communicator. The executor (Executor.h) drives it:
// it allocates every tensor a node reads or writes, calls runNode, and frees
// tensors after their last use. Kernels check that the result shapes they
// compute are the shapes of the outputs they were given (the program's
// types), and report a failure as an error naming the node and its op.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_BACKEND_H
#define AUTOPAR_RUNTIME_BACKEND_H

#include "runtime/DropoutMask.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <string>

namespace autopar {

class Node;

/// Collective and point-to-point communication among the ranks of a job.
/// Groups are lists of global ranks that include the calling rank; every
/// rank of a group makes the same call with tensors of the same types. Each
/// call fails with an error when it has not completed within Timeout.
class Communicator {
public:
  using Duration = std::chrono::milliseconds;

  virtual ~Communicator();

  /// This process's rank and the number of ranks of the job.
  virtual int getRank() const = 0;
  virtual int getNumRanks() const = 0;

  /// Out = the sum of In over the group (In and Out have one type; they may
  /// be the same tensor).
  virtual llvm::Error allReduce(const Tensor &In, const Tensor &Out,
                                llvm::ArrayRef<int> Group,
                                Duration Timeout) = 0;
  /// Out = the group's In concatenated along Dim in group order.
  virtual llvm::Error allGather(const Tensor &In, const Tensor &Out,
                                llvm::ArrayRef<int> Group, unsigned Dim,
                                Duration Timeout) = 0;
  /// Out = this rank's part (along Dim, in group order) of the group's sum.
  virtual llvm::Error reduceScatter(const Tensor &In, const Tensor &Out,
                                    llvm::ArrayRef<int> Group, unsigned Dim,
                                    Duration Timeout) = 0;
  /// In is split along SrcDim into one part per rank; Out is the parts this
  /// rank receives, concatenated along DstDim in group order.
  virtual llvm::Error allToAll(const Tensor &In, const Tensor &Out,
                               llvm::ArrayRef<int> Group, unsigned SrcDim,
                               unsigned DstDim, Duration Timeout) = 0;
  virtual llvm::Error send(const Tensor &In, int DstRank, Duration Timeout) = 0;
  virtual llvm::Error recv(const Tensor &Out, int SrcRank,
                           Duration Timeout) = 0;
  /// send/recv with a message tag (>= 0): a send matches the receive of the
  /// same tag from the same rank, messages of one tag in order, so that two
  /// ranks can post transfers in orders that differ (interleaved pipeline
  /// schedules). Tag 0 is the untagged transfer above, to which these
  /// default versions forward; other tags need a communicator that
  /// overrides them.
  virtual llvm::Error send(const Tensor &In, int DstRank, int Tag,
                           Duration Timeout);
  virtual llvm::Error recv(const Tensor &Out, int SrcRank, int Tag,
                           Duration Timeout);

  /// `--verify-transfers`: every point-to-point message carries a CRC32C
  /// of its bytes, which the receive checks (an error naming both ranks on
  /// a mismatch). An error where the communicator cannot (the default);
  /// every rank of a job must agree.
  virtual llvm::Error setVerifyTransfers(bool On);
};

class Backend {
public:
  virtual ~Backend();

  /// A short name for messages, e.g. "cpu".
  virtual llvm::StringRef getName() const = 0;

  /// Memory for a tensor of the given type; uninitialised. Never returns a
  /// null data pointer, even for an empty tensor.
  virtual llvm::Expected<Tensor> allocate(ElementType Elem,
                                          llvm::ArrayRef<int64_t> Shape) = 0;
  /// Releases memory from allocate; T must not be used afterwards.
  virtual void deallocate(const Tensor &T) = 0;
  /// The executor brackets each run of a program (Program: which one) with
  /// these, so that a backend can plan its memory from what the runs
  /// allocate and release (CpuBackend: cpu/StepArena.h). By default
  /// nothing.
  virtual void beginRun(const void * /*Program*/) {}
  virtual void endRun() {}
  /// A line on how memory was planned, for autopar-run --profile; empty by
  /// default.
  virtual std::string describeMemoryPlan() const { return {}; }
  /// Copies Bytes (Dst's size exactly, layout of weights/TensorBytes.h) into
  /// Dst, and back.
  virtual llvm::Error copyFromHost(const Tensor &Dst,
                                   llvm::ArrayRef<uint8_t> Bytes) = 0;
  virtual llvm::Error copyToHost(const Tensor &Src,
                                 llvm::MutableArrayRef<uint8_t> Bytes) = 0;
  /// copyFromHost into Dst, a whole buffer from allocate that a later node
  /// reads (an offloaded parameter uploaded one use ahead): the copy may
  /// run alongside the nodes run before that one (CUDA: on its copy
  /// stream), and the nodes that read Dst wait for it. By default
  /// copyFromHost.
  virtual llvm::Error copyFromHostAhead(const Tensor &Dst,
                                        llvm::ArrayRef<uint8_t> Bytes) {
    return copyFromHost(Dst, Bytes);
  }

  /// Runs node N: Inputs has one tensor per operand slot (absent for `_`),
  /// Outputs one per result, allocated with the program's types. Errors
  /// name the node and its op.
  virtual llvm::Error runNode(const Node &N, llvm::ArrayRef<Tensor> Inputs,
                              llvm::ArrayRef<Tensor> Outputs) = 0;
  /// Runs Nodes in order, node K with Inputs[K] and Outputs[K] as runNode
  /// takes them. The executor passes groups of consecutive optimizer steps
  /// of one kind that share their hyper-parameters, so that a backend can
  /// update all of their parameters in one loop (a multi-tensor step:
  /// CpuBackend's AdamW), and a Linear with the Gelu or Add that reads its
  /// result next, so that it can fuse them (CpuBackend: the epilogue on
  /// each block of the GEMM's rows); by default one runNode per node.
  virtual llvm::Error runNodes(llvm::ArrayRef<const Node *> Nodes,
                               llvm::ArrayRef<llvm::ArrayRef<Tensor>> Inputs,
                               llvm::ArrayRef<llvm::ArrayRef<Tensor>> Outputs);

  virtual Communicator &getCommunicator() = 0;

  /// The random state of the step being run, which dropout masks are drawn
  /// from (DropoutStream.h); the driver sets it before each step.
  void setStepRandom(const StepRandom &R) { Random = R; }
  const StepRandom &getStepRandom() const { return Random; }
  /// How long one communication may take before the job is aborted.
  virtual Communicator::Duration getCommTimeout() const = 0;

private:
  StepRandom Random;
};

/// "node 'NAME' (Op)": the node's name from the model, else its first
/// result's (`%x`), as the IR's diagnostics name nodes.
std::string describeNode(const Node &N);
/// An error "node 'NAME' (Op): Message".
llvm::Error createNodeError(const Node &N, const llvm::Twine &Message);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_BACKEND_H
