//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// `insert-grad-sync` makes data parallelism explicit in a training graph
// (after `autodiff` and `accumulate-micro-batches`): the gradients (outputs
// named `grad.<param>`) are packed, in the order the backward pass produces
// them, into buckets of at most `bucket-mib` MiB (PyTorch DDP's
// `bucket_cap_mb`, 25 by default; a larger gradient is a bucket of its own),
// and each bucket is reduced over the `axis` of `mesh` with one collective
// placed right after the node that produces its last gradient, so that it
// overlaps the rest of the backward pass.
//   - zero=0: each bucket is flattened (Reshape + Concat), all-reduced
//     (sum) and split back into the gradients.
//   - zero=1, 2, 3: the optimizer works on shards (Rajbhandari et al. 2020;
//     Megatron-LM's distributed optimizer). Every trainable parameter whose
//     dimension 0 the axis divides is stored as this rank's rows of it:
//     its type becomes the local shard, annotated `sharding` (dimension 0
//     over the axis) and `local = 1`. Its gradient bucket is reduce-
//     scattered: each gradient is viewed as [ranks, n / ranks] (rank r's
//     rows are row block r), the views are concatenated along dimension 1,
//     one ReduceScatter (dim 0, local) leaves this rank's block of every
//     gradient, and `grad.<param>` becomes the shard, the parameter's local
//     type. Uses of the parameter read an AllGather (dim 0, local) of it:
//     zero=1 and 2 gather each parameter once, before its first use, and
//     keep it for the step (what those stages hold: whole weights); zero=3
//     gathers before every node that uses it, and places each gather
//     before the user of the previous one, so the next shard is fetched
//     while the current op runs (prefetch one ahead) and a gathered
//     parameter lives only around its use. Parameters the axis does not
//     divide stay whole, with all-reduced gradients in buckets of their
//     own. Gradients are accumulated whole over the micro-batches and
//     reduced once per step (ZeRO-2/3's per-micro-batch reduction is not
//     expressed yet).
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
#include "llvm/ADT/SmallPtrSet.h"

using namespace autopar;
using namespace llvm;

namespace {

struct InsertGradSyncOptions {
  /// Largest bucket, in MiB (DDP's default bucket_cap_mb).
  double BucketMiB = 25;
  /// ZeRO stage: 0 all-reduce; 1-3 shard parameters (3 gathers per use).
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
                 "ZeRO stage: 0 all-reduce; 1-3 sharded parameters, "
                 "reduce-scattered gradients");
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
  Error syncBucket(Graph &G, ArrayRef<Value *> Grads, bool Scatter,
                   int64_t Ranks, DenseMap<Value *, Value *> &Replacement);
  Error shardParams(Graph &G, ArrayRef<Value *> Params, int64_t Ranks);
  AttrDict collectiveAttrs(bool Dim0) const {
    AttrDict CA;
    CA.set("mesh", Attribute::getString(Opts.Mesh));
    CA.set("axis", Attribute::getString(Opts.Axis));
    if (Dim0) {
      CA.set("dim", Attribute::getInt(0));
      CA.set("local", Attribute::getInt(1));
    }
    return CA;
  }

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
                                     bool Scatter, int64_t Ranks,
                                     DenseMap<Value *, Value *> &Replacement) {
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  SmallVector<Value *, 8> Flat;
  SmallVector<int64_t, 8> Sizes;
  for (Value *Grad : Grads) {
    int64_t N = *Grad->getType().getStaticNumElements();
    // Scattered: [ranks, n / ranks], row block r in row r.
    Sizes.push_back(Scatter ? N / Ranks : N);
    Expected<Value *> R =
        Scatter ? B.reshape(Grad, {Ranks, N / Ranks}) : B.reshape(Grad, {N});
    if (!R)
      return R.takeError();
    Flat.push_back(*R);
  }
  int64_t Axis = Scatter ? 1 : 0;
  AttrDict Along;
  Along.set("axis", Attribute::getInt(Axis));
  Value *Bucket = Flat.front();
  if (Flat.size() > 1) {
    Expected<Value *> C = B.emit1(OpId::Concat, Flat, Along);
    if (!C)
      return C.takeError();
    Bucket = *C;
  }
  Expected<Value *> Synced =
      B.emit1(Scatter ? OpId::ReduceScatter : OpId::AllReduce, {Bucket},
              collectiveAttrs(Scatter));
  if (!Synced)
    return Synced.takeError();
  SmallVector<Value *, 8> Parts{*Synced};
  if (Grads.size() > 1) {
    Expected<SmallVector<Value *, 3>> S =
        B.emit(OpId::Split, {*Synced, B.ints(Sizes)}, Along, Grads.size());
    if (!S)
      return S.takeError();
    Parts.assign(S->begin(), S->end());
  }
  for (auto [Grad, Part] : zip(Grads, Parts)) {
    SmallVector<int64_t, 4> Shape = Grad->getType().getStaticSizes();
    if (Scatter)
      Shape[0] /= Ranks;
    Expected<Value *> R = B.reshape(Part, Shape);
    if (!R)
      return R.takeError();
    Replacement[Grad] = *R;
  }
  return Error::success();
}

/// Moves node N right before Where.
static void moveBefore(Graph &G, Node *N, Node *Where) {
  G.getNodes().splice(Where->getIterator(), G.getNodes(), N->getIterator());
}

Error InsertGradSyncPass::shardParams(Graph &G, ArrayRef<Value *> Params,
                                      int64_t Ranks) {
  SmallPtrSet<Value *, 32> IsSharded(Params.begin(), Params.end());
  // Each (parameter, user) pair in program order, one per user node.
  SmallVector<std::pair<Value *, Node *>, 64> Uses;
  for (Node &N : G.getNodes()) {
    SmallPtrSet<Value *, 4> Seen;
    for (Value *V : N.getOperands())
      if (V && IsSharded.count(V) && Seen.insert(V).second)
        Uses.push_back({V, &N});
  }
  for (Value *P : Params) {
    TensorType Ty = P->getType();
    SmallVector<Dim, 4> Shape(Ty.getShape().begin(), Ty.getShape().end());
    Shape[0] = Dim::get(Shape[0].getSize() / Ranks);
    P->setType(TensorType(Ty.getElementType(), Shape));
    // A tensor-parallel shard (localize-tp) keeps its split; the data-
    // parallel axis divides its rows within it (minor to the others).
    Sharding S;
    const Attribute *Old = P->getAttrs().get("sharding");
    const Attribute *Local = P->getAttrs().get("local");
    if (Old && Old->isa(Attribute::Kind::Sharding) && Local &&
        Local->getInt() && Old->getSharding().Mesh == Opts.Mesh)
      S = Old->getSharding();
    S.Mesh = Opts.Mesh;
    S.DimAxes.resize(Shape.size());
    S.PartialAxes.clear();
    S.DimAxes[0].push_back(Opts.Axis);
    P->getAttrs().set("sharding", Attribute::getSharding(std::move(S)));
    P->getAttrs().set("local", Attribute::getInt(1));
  }
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  auto Gather = [&](Value *P) -> Expected<Value *> {
    Expected<Value *> Whole =
        B.emit1(OpId::AllGather, {P}, collectiveAttrs(/*Dim0=*/true));
    if (Whole)
      G.renameValue(*Whole, G.getUniqueName(P->getName().str() + ".whole"));
    return Whole;
  };
  auto Rewire = [](Node *User, Value *P, Value *Whole) {
    for (unsigned I = 0, E = User->getNumOperands(); I != E; ++I)
      if (User->getOperand(I) == P)
        User->setOperand(I, Whole);
  };
  if (Opts.Zero < 3) {
    DenseMap<Value *, Value *> Gathered;
    for (auto [P, User] : Uses) {
      Value *&Whole = Gathered[P];
      if (!Whole) {
        Expected<Value *> W = Gather(P);
        if (!W)
          return W.takeError();
        Whole = *W;
        moveBefore(G, Whole->getDefiningNode(), User);
      }
      Rewire(User, P, Whole);
    }
    return Error::success();
  }
  Node *PreviousUser = nullptr;
  for (auto [P, User] : Uses) {
    Expected<Value *> Whole = Gather(P);
    if (!Whole)
      return Whole.takeError();
    moveBefore(G, (*Whole)->getDefiningNode(),
               PreviousUser ? PreviousUser : User);
    Rewire(User, P, *Whole);
    PreviousUser = User;
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

  // ZeRO: the gradients that reduce to shards, and their parameters.
  int64_t Ranks = *M->getAxisSize(Opts.Axis);
  SmallPtrSet<Value *, 32> Scattered;
  SmallVector<Value *, 32> ShardedParams;
  if (Opts.Zero >= 1 && Ranks > 1) {
    for (const std::unique_ptr<Value> &P : G.getParams()) {
      Value *Grad = G.lookupValue(("grad." + P->getName()).str());
      const TensorType &Ty = P->getType();
      // A tensor-parallel shard made of pieces (a fused QKV weight) stays
      // whole over the data-parallel axis.
      if (!Grad || Grad->getNumOutputUses() == 0 || Ty.getRank() == 0 ||
          !Ty.getDim(0).isStatic() || Ty.getDim(0).getSize() % Ranks ||
          P->getAttrs().get("pieces"))
        continue;
      ShardedParams.push_back(P.get());
      Scattered.insert(Grad);
    }
  }

  // Buckets (one kind of reduction each), then the nodes of each after its
  // last gradient's producer.
  double Cap = Opts.BucketMiB * 1024 * 1024;
  SmallVector<SmallVector<Value *, 8>, 8> Buckets(1);
  double Bytes = 0;
  for (Value *Grad : Grads) {
    double Size = double(*Grad->getType().getStaticSizeInBytes());
    if (!Buckets.back().empty() &&
        (Bytes + Size > Cap ||
         Scattered.count(Grad) != Scattered.count(Buckets.back().front()))) {
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
    if (Error E =
            syncBucket(G, Buckets[K], Scattered.count(Buckets[K].front()) != 0,
                       Ranks, Replacement))
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
  // (A pipeline stage before the last receives the loss, already global.)
  Value *Loss = G.getOutputs().front();
  if (Loss->getName() == "loss" && Loss->getDefiningNode() &&
      Loss->getDefiningNode()->getOp() != OpId::Recv) {
    GradBuilder B(G);
    AttrDict CA = collectiveAttrs(false);
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
    // The last pipeline stage sends the global loss on.
    SmallVector<Node *, 4> Senders;
    for (Node *U : Loss->getUsers())
      if (U->getOp() == OpId::Send)
        Senders.push_back(U);
    for (Node *U : Senders)
      U->setOperand(0, *Sum);
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
  for (Value *Raw : Grads) {
    Value *Synced = Replacement.lookup(Raw);
    std::string Name = Raw->getName().str();
    G.renameValue(Raw, G.getUniqueName(Name + ".local"));
    G.renameValue(Synced, Name);
  }
  return shardParams(G, ShardedParams, Ranks);
  return Error::success();
}

std::unique_ptr<Pass> autopar::createInsertGradSyncPass() {
  return std::make_unique<InsertGradSyncPass>();
}
