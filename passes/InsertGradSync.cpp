//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// `insert-grad-sync` makes data parallelism's gradient reduction explicit in
// a training graph (after `autodiff`): the gradients (outputs named
// `grad.<param>`) are packed, in the order the backward pass produces them,
// into buckets of at most `bucket-mib` MiB (PyTorch DDP's `bucket_cap_mb`,
// 25 by default; a larger gradient is a bucket of its own). Each bucket is
// flattened into one buffer (Reshape + Concat) and reduced over the `axis`
// of `mesh` with one collective placed right after the node that produces
// its last gradient, so it overlaps the rest of the backward pass:
//   - zero=0 or 1: AllReduce (sum); the bucket is split back into the
//     gradients, which replace the graph's gradient outputs;
//   - zero=2 or 3: ReduceScatter along the flat dimension; each rank keeps
//     its shard of the bucket, which replaces the bucket's gradients among
//     the outputs as `grad.bucket<K>` (the optimizer steps on flat shards,
//     as DeepSpeed's partitioned optimizer does).
// The reduction is a sum: the loss is already divided by the global token
// count (autodiff's `loss-tokens`). The `loss` output is all-reduced too,
// right after it is computed, so every rank reports the global mean. Assumes
// static shapes and a mesh with the axis (a pass option error names what is
// missing).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct InsertGradSyncOptions {
  /// Largest bucket, in MiB (DDP's default bucket_cap_mb).
  double BucketMiB = 25;
  /// ZeRO stage: 0/1 all-reduce, 2/3 reduce-scatter.
  int64_t Zero = 0;
  /// The mesh and its data-parallel axis.
  std::string Mesh = "cluster";
  std::string Axis = "dp";

  Error validate() const {
    if (BucketMiB <= 0)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: bucket-mib must be > 0");
    if (Zero < 0 || Zero > 3)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: zero must be 0, 1, 2 or 3");
    return Error::success();
  }
};

class InsertGradSyncPass : public Pass {
public:
  InsertGradSyncPass() {
    Options.bind("bucket-mib", &Opts.BucketMiB,
                 "Largest gradient bucket in MiB (default 25)");
    Options.bind("zero", &Opts.Zero,
                 "ZeRO stage: 0/1 all-reduce, 2/3 reduce-scatter");
    Options.bind("mesh", &Opts.Mesh, "Mesh of the collectives");
    Options.bind("axis", &Opts.Axis, "Data-parallel axis of the mesh");
  }

  StringRef getArgument() const override { return "insert-grad-sync"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "insert-grad-sync: graph @" + G->getName() +
                                    ": " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);
  Error syncBucket(Graph &G, ArrayRef<Value *> Grads, unsigned Index,
                   DenseMap<Value *, Value *> &Replacement);

  InsertGradSyncOptions Opts;
};

} // namespace

/// The node after which every gradient in Grads exists.
static Node *lastProducer(ArrayRef<Value *> Grads,
                          const DenseMap<const Node *, unsigned> &Order) {
  Node *Last = nullptr;
  for (Value *G : Grads) {
    Node *N = G->getDefiningNode();
    if (N && (!Last || Order.lookup(N) > Order.lookup(Last)))
      Last = N;
  }
  return Last;
}

Error InsertGradSyncPass::syncBucket(Graph &G, ArrayRef<Value *> Grads,
                                     unsigned Index,
                                     DenseMap<Value *, Value *> &Replacement) {
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  SmallVector<Value *, 8> Flat;
  SmallVector<int64_t, 8> Sizes;
  for (Value *Grad : Grads) {
    int64_t N = *Grad->getType().getStaticNumElements();
    Sizes.push_back(N);
    Expected<Value *> R = B.reshape(Grad, {N});
    if (!R)
      return R.takeError();
    Flat.push_back(*R);
  }
  AttrDict Axis0;
  Axis0.set("axis", Attribute::getInt(0));
  Value *Bucket = Flat.front();
  if (Flat.size() > 1) {
    Expected<Value *> C = B.emit1(OpId::Concat, Flat, Axis0);
    if (!C)
      return C.takeError();
    Bucket = *C;
  }
  AttrDict CA;
  CA.set("mesh", Attribute::getString(Opts.Mesh));
  CA.set("axis", Attribute::getString(Opts.Axis));
  bool Scatter = Opts.Zero >= 2;
  if (Scatter)
    CA.set("dim", Attribute::getInt(0));
  Expected<Value *> Synced =
      B.emit1(Scatter ? OpId::ReduceScatter : OpId::AllReduce, {Bucket}, CA);
  if (!Synced)
    return Synced.takeError();
  if (Scatter) {
    G.renameValue(*Synced,
                  G.getUniqueName("grad.bucket" + std::to_string(Index)));
    for (Value *Grad : Grads)
      Replacement[Grad] = Grad == Grads.front() ? *Synced : nullptr;
    return Error::success();
  }
  SmallVector<Value *, 8> Parts{*Synced};
  if (Grads.size() > 1) {
    Expected<SmallVector<Value *, 3>> S =
        B.emit(OpId::Split, {*Synced, B.ints(Sizes)}, Axis0, Grads.size());
    if (!S)
      return S.takeError();
    Parts.assign(S->begin(), S->end());
  }
  for (auto [Grad, Part] : zip(Grads, Parts)) {
    Expected<Value *> R = B.reshape(Part, Grad->getType().getStaticSizes());
    if (!R)
      return R.takeError();
    Replacement[Grad] = *R;
  }
  return Error::success();
}

Error InsertGradSyncPass::runOnGraph(Graph &G) {
  const autopar::Mesh *M = G.lookupMesh(Opts.Mesh);
  if (!M || !M->getAxisSize(Opts.Axis))
    return createStringError(inconvertibleErrorCode(),
                             "needs a mesh @" + Opts.Mesh + " with an axis '" +
                                 Opts.Axis + "' (mesh=, axis=)");
  // Gradient outputs in the order their producers run.
  DenseMap<const Node *, unsigned> Order;
  unsigned I = 0;
  for (Node &N : G.getNodes())
    Order[&N] = I++;
  SmallVector<Value *, 32> Grads;
  for (Value *Out : G.getOutputs())
    if (Out->getName().startswith("grad."))
      Grads.push_back(Out);
  if (Grads.empty())
    return createStringError(inconvertibleErrorCode(),
                             "has no gradient outputs (grad.<param>); run "
                             "autodiff first");
  for (Value *Grad : Grads)
    if (!Grad->getType().hasStaticShape())
      return createStringError(inconvertibleErrorCode(),
                               "gradient %" + Grad->getName() +
                                   " has no static shape");
  llvm::stable_sort(Grads, [&](Value *A, Value *B) {
    return Order.lookup(A->getDefiningNode()) <
           Order.lookup(B->getDefiningNode());
  });

  // Buckets, then the nodes of each after its last gradient's producer.
  double Cap = Opts.BucketMiB * 1024 * 1024;
  SmallVector<SmallVector<Value *, 8>, 8> Buckets(1);
  double Bytes = 0;
  for (Value *Grad : Grads) {
    double Size = double(*Grad->getType().getStaticSizeInBytes());
    if (!Buckets.back().empty() && Bytes + Size > Cap) {
      Buckets.emplace_back();
      Bytes = 0;
    }
    Buckets.back().push_back(Grad);
    Bytes += Size;
  }
  DenseMap<Value *, Value *> Replacement;
  for (unsigned K = 0; K != Buckets.size(); ++K) {
    Node *Anchor = lastProducer(Buckets[K], Order);
    Node *OldLast = G.getNodes().empty() ? nullptr : &G.getNodes().back();
    if (Error E = syncBucket(G, Buckets[K], K, Replacement))
      return E;
    // The bucket's nodes were appended; move them right after Anchor.
    if (Anchor && OldLast && Anchor != OldLast) {
      SmallVector<Node *, 16> New;
      for (auto It = std::next(OldLast->getIterator());
           It != G.getNodes().end(); ++It)
        New.push_back(&*It);
      auto Where = std::next(Anchor->getIterator());
      for (Node *N : New)
        G.getNodes().splice(Where, G.getNodes(), N->getIterator());
    }
  }
  // The loss too: every rank reports the global mean.
  Value *Loss = G.getOutputs().front();
  if (Loss->getName() == "loss" && Loss->getDefiningNode()) {
    GradBuilder B(G);
    AttrDict CA;
    CA.set("mesh", Attribute::getString(Opts.Mesh));
    CA.set("axis", Attribute::getString(Opts.Axis));
    Node *Producer = Loss->getDefiningNode();
    Expected<Value *> Sum = B.emit1(OpId::AllReduce, {Loss}, CA);
    if (!Sum)
      return Sum.takeError();
    Node *Reduce = (*Sum)->getDefiningNode();
    G.getNodes().splice(std::next(Producer->getIterator()), G.getNodes(),
                        Reduce->getIterator());
    G.renameValue(Loss, G.getUniqueName("loss.local"));
    G.renameValue(*Sum, "loss");
    Replacement[Loss] = *Sum;
  }
  SmallVector<Value *, 32> Outputs;
  for (Value *Out : G.getOutputs()) {
    auto It = Replacement.find(Out);
    if (It == Replacement.end())
      Outputs.push_back(Out);
    else if (It->second)
      Outputs.push_back(It->second);
  }
  G.setOutputs(Outputs);
  // Synced gradients take the gradient names; the raw ones get `.local`.
  if (Opts.Zero < 2)
    for (Value *Raw : Grads) {
      Value *Synced = Replacement.lookup(Raw);
      std::string Name = Raw->getName().str();
      G.renameValue(Raw, G.getUniqueName(Name + ".local"));
      G.renameValue(Synced, Name);
    }
  return Error::success();
}

std::unique_ptr<Pass> autopar::createInsertGradSyncPass() {
  return std::make_unique<InsertGradSyncPass>();
}
