//===- Executor.h - Runs a program on a backend -----------------*- C++ -*-===//
//
// An Executor binds one graph (a program) to a backend. Creating it checks
// that every value has a static shape and loads the parameters into
// backend memory, where they stay: inline (dense) and external data through
// weights/WeightReader.h, parameters without data by their `init`
// annotation (ParamInit.h). Each run copies the inputs in, runs the nodes in
// order, and copies the outputs back. A tensor is allocated when its node
// runs and freed after its last use (a value no node uses, right after its
// node); kernels check their result shapes against the program's types.
// Parameters can be read back and overwritten between runs (checkpoints).
// Errors name the value or the node.
//
// Offload (docs/Offload.md): given an OffloadStore, a parameter placed on
// `host` or `nvme` (`placement`) is kept in the store, not in backend
// memory. The program says when it moves (passes/Offload.cpp): a node's
// `offload_fetch` parameters are fetched (checked: version and CRC32C)
// and copied to the backend before it runs and freed after it,
// `offload_writeback` ones written back first as the next version (the
// step), and `offload_prefetch` ones fetched on the prefetcher's thread
// from when the node starts. A failed check is an OffloadCheckError.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_EXECUTOR_H
#define AUTOPAR_RUNTIME_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/OffloadStore.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace autopar {

class Graph;
class Node;
class Value;

struct ExecutorOptions {
  /// The folder that external parameter data is relative to.
  std::string WeightsDir = ".";
  /// Mixed into the generator of parameters without data (ParamInit.h).
  uint64_t InitSeed = 0;
  /// Initialise every parameter from the seed, ignoring the model's data.
  bool RandomInit = false;
  /// Parameters must have data or an `init` annotation unless RandomInit
  /// (ParamSource::RequireData).
  bool RequireData = false;
  /// Where offloaded parameters live; null keeps them in backend memory.
  OffloadStore *Offload = nullptr;

  /// The options of a program read from ProgramFile: external data relative
  /// to WeightsDir, or to the program's folder when WeightsDir is empty.
  static ExecutorOptions forProgram(llvm::StringRef ProgramFile,
                                    llvm::StringRef WeightsDir,
                                    uint64_t InitSeed);
};

class Executor {
public:
  /// An error naming the first value of G whose shape is not static.
  static llvm::Error checkStaticShapes(const Graph &G);
  /// Checks G's shapes and loads its parameters into B.
  static llvm::Expected<std::unique_ptr<Executor>>
  create(const Graph &G, Backend &B, const ExecutorOptions &Options);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Runs the graph on Inputs, one per graph input in order, each of that
  /// input's type; returns one tensor per graph output.
  llvm::Expected<std::vector<HostTensor>>
  run(llvm::ArrayRef<HostTensor> Inputs);

  /// Only the graph outputs at Positions are read back by run; the others
  /// come back with their type and no bytes, and are freed after their
  /// last use as any other value is. A training step that returns its
  /// gradients and logits (autodiff's outputs) then neither holds them to
  /// the end of the step nor copies them to the host. By default run reads
  /// every output.
  void setReadOutputs(llvm::ArrayRef<unsigned> Positions);

  /// The groups of nodes that run together (Backend::runNodes: a
  /// multi-tensor step, a GEMM with its epilogue).
  unsigned getStepGroupCount() const;

  /// A copy of parameter P's current data: its initial data as updated by
  /// the runs so far (optimizer steps write into their parameters). An
  /// error naming P unless it is one of the graph's parameters.
  llvm::Expected<HostTensor> readParam(const Value &P) const;
  /// Overwrites parameter P's data with Bytes (the layout of
  /// weights/TensorBytes.h, P's size exactly), e.g. from a checkpoint. An
  /// error naming P unless it is one of the graph's parameters and the size
  /// matches.
  llvm::Error writeParam(const Value &P, llvm::ArrayRef<uint8_t> Bytes);

  /// Called after each node runs with its start and end times (a trace).
  using NodeObserver = std::function<void(
      const Node &, std::chrono::steady_clock::time_point Start,
      std::chrono::steady_clock::time_point End)>;
  void setNodeObserver(NodeObserver O) { Observer = std::move(O); }

  /// The node running now, or the last one run (null before the first);
  /// safe to read from another thread (the heartbeat's).
  const Node *getCurrentNode() const {
    return CurrentNode.load(std::memory_order_relaxed);
  }

  /// Called with each offloaded fetch once it is done (a trace).
  using FetchObserver =
      std::function<void(const OffloadPrefetcher::FetchEvent &)>;
  void setFetchObserver(FetchObserver O) { OnFetch = std::move(O); }

  /// The offload version: the number of steps (runs) that wrote back
  /// offloaded state. Setting it (after a resume) restamps every offloaded
  /// block with it.
  uint64_t getOffloadVersion() const { return OffloadVersion; }
  llvm::Error setOffloadVersion(uint64_t V);
  /// The largest bytes offloaded parameters held in backend memory at once
  /// while fetched for their uses.
  uint64_t getPeakFetchedBytes() const { return PeakFetchedBytes; }
  /// Offloaded parameters of the last run uploaded ahead of their use
  /// (Backend::copyFromHostAhead), not when their node ran.
  uint64_t getUploadsAhead() const { return UploadsAhead; }

  /// Bytes of the resident parameters (model and optimizer state, not the
  /// offloaded ones), a gathered parameter's home whole.
  uint64_t getParamBytes() const;

  /// The peak of the bytes the last run held in computed values:
  /// activations, gradients and outputs (parameters, and the whole copies
  /// of gathered ones, excluded).
  uint64_t getPeakActivationBytes() const { return PeakBytes; }
  /// The peaks of its two parts, each on its own (as a plan predicts them):
  /// gradients (values an optimizer step reads as its gradient, and the
  /// micro-batch sums that build them) and every other computed value.
  uint64_t getPeakGradientBytes() const { return PeakGradientBytes; }
  uint64_t getPeakNonGradientBytes() const { return PeakNonGradientBytes; }
  /// The peak of the whole copies of sharded parameters that ZeRO's
  /// gathers make (AllGather of a parameter, or of its 16-bit cast): model
  /// state the plan counts as weights, so not among the activations.
  uint64_t getPeakGatheredBytes() const { return PeakGatheredBytes; }

  /// With N > 0, runs note the N largest activations (neither gradients nor
  /// gathered parameters) live at their activation peak: what
  /// `--memory-report` names, so that a gap to the plan can be found.
  void setPeakValueCount(unsigned N) { PeakValueCount = N; }
  /// Those of the last run, largest first: bytes and value name.
  llvm::ArrayRef<std::pair<uint64_t, std::string>> getPeakValues() const {
    return PeakValues;
  }

private:
  Executor(const Graph &G, Backend &B) : G(G), B(B) {}
  llvm::Error loadParams(const ExecutorOptions &Options);
  /// The homes of the parameters that ZeRO-1/2 gather once per step.
  void planGatherHomes();
  /// The tier of an offloaded parameter (its `placement`), when there is a
  /// store; else none: it lives in backend memory.
  std::optional<OffloadTier> getStoredTier(const Value &P) const;
  void planFrees();
  /// Whether run reads back the graph output at Position.
  bool isReadOutput(unsigned Position) const {
    return OutputRead.empty() || OutputRead[Position];
  }
  /// Reshape-like nodes whose result can share its operand's bytes.
  void planViews();
  /// An Add whose operand dies there writes into that operand's tensor
  /// (gradient sums over micro-batches grow in place).
  void planInPlaceAdds();
  /// Groups the backend runs at once (Backend::runNodes), none moving
  /// offloaded state: consecutive AdamW nodes with the same
  /// hyper-parameters and step, and a Linear with the Gelu or Add right
  /// after it that reads its result (a fused epilogue).
  void planStepGroups();
  /// Gradients: what optimizer steps read, and the sums over micro-batches
  /// (trees of Adds) that build it. Gathered: whole copies of parameters.
  void findGradients();
  void findGatheredParams();
  /// The nodes' offload_fetch / offload_writeback / offload_prefetch lists.
  llvm::Error readOffloadLists();
  llvm::Expected<std::vector<uint8_t>> fetchBytes(const Value &P);
  /// V's block in the store, checked, as a host tensor.
  llvm::Expected<HostTensor> readStored(const Value &V) const;
  /// Writes T (V's tensor) to V's block on Tier as the next version.
  llvm::Error storeBlock(const Value &V, const Tensor &T, OffloadTier Tier);

  const Graph &G;
  Backend &B;
  std::vector<const Node *> Nodes;
  llvm::DenseMap<const Value *, Tensor> Params;
  /// FreeAfter[I]: the values whose last use is node I.
  std::vector<std::vector<const Value *>> FreeAfter;
  /// GroupEnd[I]: past the last node of the group that starts at node I
  /// (I + 1 when it runs alone); 0 inside a group.
  std::vector<unsigned> GroupEnd;
  /// InPlaceOperand[I]: the operand whose tensor node I's result takes, or
  /// null.
  std::vector<const Value *> InPlaceOperand;
  /// ViewOf[I]: the tensor whose bytes node I's result views (a reshape
  /// without a copy), or null; ViewRoots maps each view to that tensor.
  std::vector<const Value *> ViewOf;
  llvm::DenseMap<const Value *, const Value *> ViewRoots;
  /// Per graph output, whether run reads it back (empty: all).
  std::vector<bool> OutputRead;
  /// Inputs that no node or output uses.
  std::vector<const Value *> UnusedInputs;
  /// The values optimizer steps read as gradients.
  llvm::DenseSet<const Value *> Gradients;
  /// The whole copies of parameters ZeRO's gathers make.
  llvm::DenseSet<const Value *> Gathered;
  /// A parameter sharded over ranks and gathered once per step (ZeRO-1/2)
  /// lives in its home: one buffer of the gathered type in which the
  /// parameter is this rank's block (Index), so that the gather (Result)
  /// fills the other blocks in place and the whole copy is the only one
  /// (Megatron-LM's distributed optimizer keeps its shards in the
  /// contiguous parameter buffer the same way). Keyed by parameter.
  struct GatherHome {
    const Value *Result = nullptr;
    int64_t Index = 0;
    Tensor Whole;
  };
  llvm::DenseMap<const Value *, GatherHome> Homes;
  /// Each home's gather result, with its parameter; HomeAt[I]: the
  /// parameter whose home node I's result is, or null.
  llvm::DenseMap<const Value *, const Value *> HomeOfResult;
  std::vector<const Value *> HomeAt;
  uint64_t PeakBytes = 0, PeakGradientBytes = 0, PeakNonGradientBytes = 0,
           PeakGatheredBytes = 0;
  unsigned PeakValueCount = 0;
  std::vector<std::pair<uint64_t, std::string>> PeakValues;
  NodeObserver Observer;
  std::atomic<const Node *> CurrentNode{nullptr};

  OffloadStore *Offload = nullptr;
  /// The offloaded parameters, their tiers and versions.
  llvm::DenseMap<const Value *, OffloadTier> OffloadTiers;
  llvm::DenseMap<const Value *, uint64_t> Versions;
  /// Per node: what it fetches, writes back and prefetches.
  std::vector<std::vector<const Value *>> FetchAt, WritebackAt, PrefetchAt,
      EvictAt;
  /// The offloaded parameters node I prefetches, each with the node of the
  /// use it is for (uploaded ahead of it).
  std::vector<llvm::SmallVector<std::pair<const Value *, unsigned>, 2>>
      UploadAt;
  /// Offloaded gradients (`offload_evict`), their tiers and last fetches.
  llvm::DenseMap<const Value *, OffloadTier> EvictedTiers;
  llvm::DenseMap<const Value *, unsigned> LastFetch;
  std::unique_ptr<OffloadPrefetcher> Prefetcher;
  uint64_t OffloadVersion = 0, PeakFetchedBytes = 0, UploadsAhead = 0;
  FetchObserver OnFetch;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_EXECUTOR_H
