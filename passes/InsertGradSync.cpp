//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// `insert-grad-sync` makes data parallelism explicit in a training graph
// (after `autodiff` and `accumulate-micro-batches`): the gradients (outputs
// named `grad.<param>`) are packed, in the order the backward pass produces
// them, into buckets of at most `bucket-elements` elements (the plan's
// grad-bucket) or else `bucket-mib` MiB (PyTorch DDP's `bucket_cap_mb`, 25
// by default; a larger gradient is a bucket of its own;
// all-reduced and reduce-scattered gradients fill buckets of their own),
// and each bucket is reduced over the data-parallel axis with one
// collective placed right after the node that produces its last gradient,
// so that it overlaps the rest of the backward pass. The axis is the one
// the graph's batch inputs are split over (`batch_split`, from
// split-batch), or `axis` of `mesh` when given.
//   - zero=0: each bucket is flattened (Reshape + Concat), all-reduced
//     (sum) and split back into the gradients.
//   - zero=1, 2, 3: the optimizer works on shards (Rajbhandari et al. 2020;
//     Megatron-LM's distributed optimizer). Every trainable parameter with
//     a static dimension 0 is stored as this rank's rows of it: its type
//     becomes the local shard, annotated `sharding` (dimension 0 over the
//     axis) and `local = 1`. Rows the axis does not divide are padded, as
//     FSDP and Megatron-Core pad their flat buffers: each rank holds
//     ceil(rows / ranks) rows, the parameter is annotated `logical_rows`
//     (its real rows: weights, initialization and checkpoints see those),
//     the padding rows are zeros that stay zero, each such gradient gets
//     zero rows appended before its bucket's view, and each gather is
//     sliced back to the logical rows. Its gradient bucket is reduce-
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
//     parameter lives only around its use. A use that casts the parameter
//     to bf16/f16 (mixed-precision) casts the shard instead and the gather
//     moves the 16-bit copy (half the bytes, and no fp32 whole copy);
//     with zero=1 and 2 one such gathered copy serves the step's casts
//     (cast-params-per-use gives zero=3 a cast per use first). A
//     tensor-parallel shard whose rows tensor parallelism splits too and
//     the axis does not divide (padding would lie inside the logical
//     value), or one made of pieces along its rows, stays whole, with
//     all-reduced gradients in buckets of their own. Over several
//     micro-batches, zero=1 reduce-scatters the whole gradients that
//     accumulate-micro-batches (or schedule-pipeline) summed, once per step.
//     zero=2 and 3 keep only gradient shards: a sharded gradient that is such a
//     sum (a tree of Adds whose leaves are the micro-batches' `grad.<p>.mb<k>`)
//     is reduced per micro-batch: micro-batch k's gradients are bucketed as
//     above, each bucket reduce- scattered right after its last producer in k's
//     backward (and after the shard sums it adds to), the shards
//     (`grad.<p>.mb<k>.shard`) summed into `grad.<p>`, and the whole-gradient
//     Adds are erased, so a whole gradient lives only until its bucket's
//     reduction. A sum with other terms (a tied parameter's gradient exchanged
//     between pipeline stages) is reduced once per step.
// The reduction is a sum: the loss is already divided by the global token
// count (autodiff's `loss-tokens`). The `loss` output is all-reduced too,
// right after it is computed, so every rank reports the global mean. Assumes
// static shapes and a mesh with the axis (a pass option error names what is
// missing).
//
//===----------------------------------------------------------------------===//

#include "cost/ModelState.h"
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

/// A gradient that accumulate-micro-batches or schedule-pipeline summed over
/// the micro-batches.
struct MicroBatchSum {
  /// (k, micro-batch k's gradient), by k.
  SmallVector<std::pair<int64_t, Value *>, 8> Terms;
  /// The Adds that sum them, the one defining the sum first.
  SmallVector<Node *, 8> Adds;
};

struct InsertGradSyncOptions {
  /// Largest bucket, in MiB (DDP's default bucket_cap_mb).
  double BucketMiB = GradientBucketBytes / (1024 * 1024);
  /// Largest bucket in gradient elements (the plan's grad-bucket), or 0:
  /// BucketMiB.
  int64_t BucketElements = 0;
  /// ZeRO stage: 0 all-reduce; 1-3 shard parameters (3 gathers per use).
  int64_t Zero = 0;
  /// Largest ZeRO-1/2 parameter-gather bucket, in elements, or 0:
  /// Megatron-Core's default for the data-parallel size
  /// (getDataParallelBucketElements).
  int64_t GatherElements = 0;
  /// The element type buckets of wider float gradients are reduced in
  /// (cast before the collective, back after), or empty: as they are.
  std::string Reduce;
  /// The mesh and its data-parallel axis: the options, or else the split
  /// of the graph's batch inputs (split-batch), resolved per graph.
  std::string Mesh, Axis;

  Error validate() const {
    if (BucketMiB <= 0)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: bucket-mib must be > 0");
    if (BucketElements < 0)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: bucket-elements must be "
                               ">= 0");
    if (GatherElements < 0)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: gather-elements must be "
                               ">= 0");
    if (Zero < 0 || Zero > 3)
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: zero must be 0, 1, 2 or 3");
    if (!Reduce.empty() && Reduce != "f32" && Reduce != "bf16" &&
        Reduce != "f16")
      return createStringError(inconvertibleErrorCode(),
                               "insert-grad-sync: reduce must be f32, bf16 "
                               "or f16, not '" +
                                   Reduce + "'");
    return Error::success();
  }
};

class InsertGradSyncPass : public Pass {
public:
  InsertGradSyncPass() {
    Options.bind("bucket-mib", &Opts.BucketMiB,
                 "Largest gradient bucket in MiB (default 25)");
    Options.bind("bucket-elements", &Opts.BucketElements,
                 "Largest gradient bucket in elements (default 0: "
                 "bucket-mib)");
    Options.bind("zero", &Opts.Zero,
                 "ZeRO stage: 0 all-reduce; 1-3 sharded parameters, "
                 "reduce-scattered gradients");
    Options.bind("gather-elements", &Opts.GatherElements,
                 "Largest ZeRO-1/2 parameter-gather bucket in elements "
                 "(default 0: max(4e7, 1e6 x data-parallel ranks), "
                 "Megatron-Core's)");
    Options.bind("reduce", &Opts.Reduce,
                 "Element type the gradient buckets are reduced in: f32, "
                 "bf16 or f16 (default: the gradients' own)");
    Options.bind("mesh", &GivenMesh,
                 "Mesh of the collectives (default: the batch split's)");
    Options.bind("axis", &GivenAxis,
                 "Data-parallel axis of the mesh (default: the batch "
                 "split's)");
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
  /// Sets Opts.Mesh and Opts.Axis for G.
  Error resolveAxis(const Graph &G);

  std::string GivenMesh, GivenAxis;
  Error syncBucket(Graph &G, ArrayRef<Value *> Grads, bool Scatter,
                   int64_t Ranks, DenseMap<Value *, Value *> &Replacement);
  Error shardParams(Graph &G, ArrayRef<Value *> Params, int64_t Ranks);
  /// ZeRO-1/2: gathers the sharded parameters (or their 16-bit copies) in
  /// buckets, each before the first use of any of its parameters. Uses:
  /// each (parameter, user node) in program order.
  Error gatherInBuckets(Graph &G, ArrayRef<std::pair<Value *, Node *>> Uses,
                        int64_t Ranks);
  /// Grads in buckets of at most bucket-mib, one kind of reduction each.
  SmallVector<SmallVector<Value *, 8>, 8>
  makeBuckets(ArrayRef<Value *> Grads,
              function_ref<bool(Value *)> IsScattered) const;
  /// ZeRO-2/3: reduce-scatters each micro-batch's terms of the sums in
  /// PerMicroBatch, in buckets placed after their producers, and sums the
  /// shards; Replacement maps each sum to its sum of shards.
  Error syncPerMicroBatch(Graph &G, ArrayRef<Value *> Grads,
                          const DenseMap<Value *, MicroBatchSum> &PerMicroBatch,
                          int64_t Ranks,
                          DenseMap<Value *, Value *> &Replacement);
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

/// G with zero rows appended up to a multiple of Ranks rows (the padding
/// of a padded shard), or G itself.
static Expected<Value *> padRows(GradBuilder &B, Value *G, int64_t Ranks) {
  SmallVector<int64_t, 4> Shape = G->getType().getStaticSizes();
  int64_t Extra = (Ranks - Shape[0] % Ranks) % Ranks;
  if (!Extra)
    return G;
  SmallVector<Dim, 4> Dims;
  for (int64_t Size : Shape)
    Dims.push_back(Dim::get(Size));
  Dims[0] = Dim::get(Extra);
  Expected<Value *> Zeros =
      B.zeros(TensorType(G->getType().getElementType(), Dims));
  if (!Zeros)
    return Zeros.takeError();
  AttrDict Rows;
  Rows.set("axis", Attribute::getInt(0));
  return B.emit1(OpId::Concat, {G, *Zeros}, Rows);
}

Error InsertGradSyncPass::syncBucket(Graph &G, ArrayRef<Value *> Grads,
                                     bool Scatter, int64_t Ranks,
                                     DenseMap<Value *, Value *> &Replacement) {
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  SmallVector<Value *, 8> Flat;
  SmallVector<int64_t, 8> Sizes;
  for (Value *Grad : Grads) {
    // Scattered: padded to a multiple of Ranks rows, then [ranks, n /
    // ranks], row block r in row r.
    Value *Rows = Grad;
    if (Scatter) {
      Expected<Value *> Padded = padRows(B, Grad, Ranks);
      if (!Padded)
        return Padded.takeError();
      Rows = *Padded;
    }
    int64_t N = *Rows->getType().getStaticNumElements();
    Sizes.push_back(Scatter ? N / Ranks : N);
    Expected<Value *> R =
        Scatter ? B.reshape(Rows, {Ranks, N / Ranks}) : B.reshape(Rows, {N});
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
  // A narrower reduction type: the bucket travels cast to it and is cast
  // back (Megatron-Core's --grad-reduce-in-bf16).
  ElementType Wide = Bucket->getType().getElementType();
  std::optional<ElementType> Narrow =
      Opts.Reduce.empty() ? std::nullopt : parseElementTypeName(Opts.Reduce);
  bool Cast = Narrow && *Narrow != Wide && isFloatElementType(Wide) &&
              getElementTypeBits(*Narrow) < getElementTypeBits(Wide);
  auto CastTo = [&](Value *V, ElementType To) -> Expected<Value *> {
    AttrDict A;
    A.set("to", Attribute::getString(getElementTypeName(To)));
    return B.emit1(OpId::Cast, {V}, std::move(A));
  };
  if (Cast) {
    Expected<Value *> Down = CastTo(Bucket, *Narrow);
    if (!Down)
      return Down.takeError();
    Bucket = *Down;
  }
  Expected<Value *> Synced =
      B.emit1(Scatter ? OpId::ReduceScatter : OpId::AllReduce, {Bucket},
              collectiveAttrs(Scatter));
  if (!Synced)
    return Synced.takeError();
  if (Cast) {
    Synced = CastTo(*Synced, Wide);
    if (!Synced)
      return Synced.takeError();
  }
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
      Shape[0] = (Shape[0] + Ranks - 1) / Ranks;
    Expected<Value *> R = B.reshape(Part, Shape);
    if (!R)
      return R.takeError();
    Replacement[Grad] = *R;
  }
  return Error::success();
}

/// Whether Sum (`grad.<p>`) is a sum of two or more micro-batches'
/// gradients: a tree of Adds, each result used once, whose leaves are
/// `grad.<p>.mb<k>` (the clones' names), each used once, all of Sum's type.
static bool getMicroBatchTerms(Value *Sum, MicroBatchSum &Out) {
  if (!Sum->getUsers().empty() || Sum->getNumOutputUses() != 1)
    return false;
  StringRef Name = Sum->getName();
  SmallVector<Value *, 16> Work{Sum};
  while (!Work.empty()) {
    Value *V = Work.pop_back_val();
    if (V->getType() != Sum->getType())
      return false;
    if (V != Sum && (V->getUsers().size() != 1 || V->getNumOutputUses()))
      return false;
    StringRef Rest = V->getName();
    int64_t K;
    if (V != Sum && Rest.consume_front(Name) && Rest.consume_front(".mb") &&
        !Rest.getAsInteger(10, K)) {
      Out.Terms.push_back({K, V});
      continue;
    }
    Node *D = V->getDefiningNode();
    if (!D || D->getOp() != OpId::Add || D->getNumOperands() != 2)
      return false;
    Out.Adds.push_back(D);
    Work.push_back(D->getOperand(1));
    Work.push_back(D->getOperand(0));
  }
  llvm::sort(Out.Terms,
             [](const auto &A, const auto &B) { return A.first < B.first; });
  for (unsigned I = 1; I < Out.Terms.size(); ++I)
    if (Out.Terms[I].first == Out.Terms[I - 1].first)
      return false;
  return Out.Terms.size() >= 2;
}

/// Each node's place in G.
static DenseMap<const Node *, unsigned> getProgramOrder(Graph &G) {
  DenseMap<const Node *, unsigned> Order;
  unsigned I = 0;
  for (Node &N : G.getNodes())
    Order[&N] = I++;
  return Order;
}

/// The nodes appended to G after OldLast, in order.
static SmallVector<Node *, 16> getAppended(Graph &G, Node *OldLast) {
  SmallVector<Node *, 16> New;
  for (auto It = std::next(OldLast->getIterator()); It != G.getNodes().end();
       ++It)
    New.push_back(&*It);
  return New;
}

/// Moves the nodes appended after OldLast to right after Anchor.
static void placeAfter(Graph &G, Node *OldLast, Node *Anchor) {
  if (!Anchor || !OldLast || Anchor == OldLast)
    return;
  SmallVector<Node *, 16> New = getAppended(G, OldLast);
  auto Where = std::next(Anchor->getIterator());
  for (Node *N : New)
    G.getNodes().splice(Where, G.getNodes(), N->getIterator());
}

SmallVector<SmallVector<Value *, 8>, 8>
InsertGradSyncPass::makeBuckets(ArrayRef<Value *> Grads,
                                function_ref<bool(Value *)> IsScattered) const {
  // In elements when bucket-elements is given, else in bytes.
  bool ByElements = Opts.BucketElements > 0;
  double Cap =
      ByElements ? double(Opts.BucketElements) : Opts.BucketMiB * 1024 * 1024;
  SmallVector<SmallVector<Value *, 8>, 8> Buckets;
  // One open bucket per kind of reduction (as DDP buckets by dtype), so
  // that gradients of the two kinds interleaved in the backward still fill
  // buckets up to the cap.
  int Open[2] = {-1, -1};
  double Bytes[2] = {0, 0};
  for (Value *Grad : Grads) {
    double Size = ByElements ? double(*Grad->getType().getStaticNumElements())
                             : double(*Grad->getType().getStaticSizeInBytes());
    unsigned Kind = IsScattered(Grad) ? 1 : 0;
    if (Open[Kind] < 0 || Bytes[Kind] + Size > Cap) {
      Buckets.emplace_back();
      Open[Kind] = int(Buckets.size() - 1);
      Bytes[Kind] = 0;
    }
    Buckets[Open[Kind]].push_back(Grad);
    Bytes[Kind] += Size;
  }
  return Buckets;
}

Error InsertGradSyncPass::syncPerMicroBatch(
    Graph &G, ArrayRef<Value *> Grads,
    const DenseMap<Value *, MicroBatchSum> &PerMicroBatch, int64_t Ranks,
    DenseMap<Value *, Value *> &Replacement) {
  SmallVector<int64_t, 8> Ks;
  for (const auto &Entry : PerMicroBatch)
    for (const auto &Term : Entry.second.Terms)
      Ks.push_back(Term.first);
  llvm::sort(Ks);
  Ks.erase(std::unique(Ks.begin(), Ks.end()), Ks.end());
  // Each gradient's sum of shards so far.
  DenseMap<Value *, Value *> Acc;
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  for (int64_t K : Ks) {
    // Micro-batch K's gradients, in the order its backward produces them.
    DenseMap<const Node *, unsigned> Order = getProgramOrder(G);
    SmallVector<Value *, 32> Terms;
    DenseMap<Value *, Value *> GradOf;
    for (Value *Grad : Grads) {
      auto It = PerMicroBatch.find(Grad);
      if (It == PerMicroBatch.end())
        continue;
      for (const auto &[TermK, Term] : It->second.Terms)
        if (TermK == K) {
          Terms.push_back(Term);
          GradOf[Term] = Grad;
        }
    }
    llvm::stable_sort(Terms, [&](Value *A, Value *B) {
      return Order.lookup(A->getDefiningNode()) <
             Order.lookup(B->getDefiningNode());
    });
    for (ArrayRef<Value *> Bucket :
         makeBuckets(Terms, [](Value *) { return true; })) {
      // After the bucket's last gradient and the sums it adds to.
      Node *Anchor = lastProducer(Bucket, Order);
      for (Value *Term : Bucket)
        if (Value *Sum = Acc.lookup(GradOf[Term]))
          if (Node *D = Sum->getDefiningNode())
            if (!Anchor || Order.lookup(D) > Order.lookup(Anchor))
              Anchor = D;
      Node *OldLast = &G.getNodes().back();
      DenseMap<Value *, Value *> Shards;
      if (Error E = syncBucket(G, Bucket, /*Scatter=*/true, Ranks, Shards))
        return E;
      for (Value *Term : Bucket) {
        Value *Shard = Shards.lookup(Term);
        G.renameValue(Shard, G.getUniqueName(Term->getName().str() + ".shard"));
        Value *&Sum = Acc[GradOf[Term]];
        if (!Sum) {
          Sum = Shard;
          continue;
        }
        Expected<Value *> Added = B.add(Sum, Shard);
        if (!Added)
          return Added.takeError();
        Sum = *Added;
      }
      placeAfter(G, OldLast, Anchor);
    }
  }
  for (const auto &Entry : PerMicroBatch)
    Replacement[Entry.first] = Acc.lookup(Entry.first);
  return Error::success();
}

/// Whether N casts P, and only P, to a narrower float (mixed-precision's
/// read of an fp32 parameter).
static bool isNarrowingCastOf(const Node &N, const Value *P) {
  return isNarrowingParamCast(N) && N.getOperand(0) == P;
}

/// Moves node N right before Where.
static void moveBefore(Graph &G, Node *N, Node *Where) {
  G.getNodes().splice(Where->getIterator(), G.getNodes(), N->getIterator());
}

/// The rows of parameter P's whole (logical) value: its `logical_rows`
/// when its shard is padded, else its shard's rows times Ranks.
static int64_t getWholeRows(const Value &P, int64_t Ranks) {
  if (const Attribute *A = P.getAttrs().get("logical_rows"))
    if (A->isa(Attribute::Kind::Int))
      return A->getInt();
  return P.getType().getDim(0).getSize() * Ranks;
}

/// Whole, gathered from padded shards, without its padding rows.
static Expected<Value *> dropPadding(GradBuilder &B, Value *Whole,
                                     int64_t Rows) {
  if (Whole->getType().getDim(0).getSize() == Rows)
    return Whole;
  return B.emit1(OpId::Slice,
                 {Whole, B.ints({0}), B.ints({Rows}), B.ints({0})});
}

/// Makes User read Whole wherever it read P.
static void rewireOperand(Node *User, Value *P, Value *Whole) {
  for (unsigned I = 0, E = User->getNumOperands(); I != E; ++I)
    if (User->getOperand(I) == P)
      User->setOperand(I, Whole);
}

Error InsertGradSyncPass::shardParams(Graph &G, ArrayRef<Value *> Params,
                                      int64_t Ranks) {
  SmallPtrSet<Value *, 32> IsSharded(Params.begin(), Params.end());
  // Each (parameter, user) pair in program order, one per user node.
  SmallVector<std::pair<Value *, Node *>, 64> Uses;
  DenseMap<const Node *, unsigned> Order;
  for (Node &N : G.getNodes())
    Order[&N] = Order.size();
  for (Node &N : G.getNodes()) {
    SmallPtrSet<Value *, 4> Seen;
    for (Value *V : N.getOperands())
      if (V && IsSharded.count(V) && Seen.insert(V).second)
        Uses.push_back({V, &N});
  }
  for (Value *P : Params) {
    TensorType Ty = P->getType();
    SmallVector<Dim, 4> Shape(Ty.getShape().begin(), Ty.getShape().end());
    // Rows that Ranks does not divide are padded to ceil(rows / Ranks)
    // a rank; the value's logical rows stay those of the parameter.
    int64_t Rows = Shape[0].getSize();
    Shape[0] = Dim::get((Rows + Ranks - 1) / Ranks);
    if (Rows % Ranks)
      P->getAttrs().set("logical_rows", Attribute::getInt(Rows));
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
  // Gathers shard P of a value of Rows rows (less than the gathered rows
  // where the shards are padded).
  auto Gather = [&](Value *P, int64_t Rows) -> Expected<Value *> {
    Expected<Value *> Whole =
        B.emit1(OpId::AllGather, {P}, collectiveAttrs(/*Dim0=*/true));
    if (Whole)
      Whole = dropPadding(B, *Whole, Rows);
    if (Whole)
      G.renameValue(*Whole, G.getUniqueName(P->getName().str() + ".whole"));
    return Whole;
  };
  // A user that casts the parameter to a narrower float (mixed-precision)
  // casts the shard instead, and the gather moves the 16-bit copy: half
  // the bytes, and the whole copy in 16 bits only, as DeepSpeed's ZeRO-3
  // and Megatron-LM's distributed optimizer gather their 16-bit weights.
  // Its readers are rewired to the whole copy; returns the node that reads
  // it first (null for none).
  auto GatherNarrowed = [&](Node *Cast) -> Expected<Node *> {
    Value *Copy = Cast->getResult(0);
    SmallVector<Node *, 4> Readers(Copy->getUsers().begin(),
                                   Copy->getUsers().end());
    Copy->setType(TensorType(Copy->getType().getElementType(),
                             Cast->getOperand(0)->getType().getShape()));
    Expected<Value *> Whole =
        Gather(Copy, getWholeRows(*Cast->getOperand(0), Ranks));
    if (!Whole)
      return Whole.takeError();
    for (Node *R : Readers)
      rewireOperand(R, Copy, *Whole);
    Node *First = Readers.empty() ? nullptr : Readers.front();
    for (Node *R : Readers)
      if (Order.lookup(R) < Order.lookup(First))
        First = R;
    return First;
  };
  if (Opts.Zero < 3)
    return gatherInBuckets(G, Uses, Ranks);
  Node *PreviousUser = nullptr;
  for (auto [P, User] : Uses) {
    if (isNarrowingCastOf(*User, P)) {
      Node *OldLast = &G.getNodes().back();
      Expected<Node *> W = GatherNarrowed(User);
      if (!W)
        return W.takeError();
      // The gather (and the slice of its padding), after the cast.
      SmallVector<Node *, 16> New = getAppended(G, OldLast);
      Node *Reader = *W ? *W : User;
      Node *Anchor = PreviousUser ? PreviousUser : Reader;
      moveBefore(G, User, Anchor);
      for (Node *N : New)
        moveBefore(G, N, Anchor);
      PreviousUser = Reader;
      continue;
    }
    Node *OldLast = &G.getNodes().back();
    Expected<Value *> Whole = Gather(P, getWholeRows(*P, Ranks));
    if (!Whole)
      return Whole.takeError();
    // The gather (and the slice of its padding), before the previous use.
    for (Node *N : getAppended(G, OldLast))
      moveBefore(G, N, PreviousUser ? PreviousUser : User);
    rewireOperand(User, P, *Whole);
    PreviousUser = User;
  }
  return Error::success();
}

namespace {
/// What one ZeRO-1/2 gather brings whole: a sharded parameter, or the
/// 16-bit copy that a mixed-precision cast makes of its shard.
struct GatherRequest {
  /// The shard gathered: the parameter, or the cast's result.
  Value *Shard = nullptr;
  /// The cast that makes the 16-bit shard, or null.
  Node *Cast = nullptr;
  /// The nodes that read the whole value (the shard's readers, rewired).
  SmallVector<Node *, 4> Readers;
  /// The reader that runs first: the bucket's gather goes before it.
  Node *First = nullptr;
};
} // namespace

Error InsertGradSyncPass::gatherInBuckets(
    Graph &G, ArrayRef<std::pair<Value *, Node *>> Uses, int64_t Ranks) {
  DenseMap<const Node *, unsigned> Order = getProgramOrder(G);
  auto Before = [&](Node *A, Node *B) {
    return !B || (A && Order.lookup(A) < Order.lookup(B));
  };
  // One request per parameter, and per parameter and compute type for the
  // casts (one 16-bit whole copy serves the step's casts: later casts
  // read the first one's result).
  std::vector<GatherRequest> Requests;
  DenseMap<Value *, unsigned> PlainOf;
  DenseMap<std::pair<Value *, unsigned>, unsigned> NarrowOf;
  for (auto [P, User] : Uses) {
    if (isNarrowingCastOf(*User, P)) {
      Value *Copy = User->getResult(0);
      auto Key = std::make_pair(P, unsigned(Copy->getType().getElementType()));
      auto [It, New] = NarrowOf.try_emplace(Key, Requests.size());
      if (!New) {
        Copy->replaceAllUsesWith(Requests[It->second].Shard);
        User->erase();
        continue;
      }
      GatherRequest R;
      R.Shard = Copy;
      R.Cast = User;
      Requests.push_back(std::move(R));
      continue;
    }
    auto [It, New] = PlainOf.try_emplace(P, Requests.size());
    if (New) {
      GatherRequest R;
      R.Shard = P;
      Requests.push_back(std::move(R));
    }
    Requests[It->second].Readers.push_back(User);
  }
  for (GatherRequest &R : Requests) {
    if (R.Cast)
      R.Readers.assign(R.Shard->getUsers().begin(), R.Shard->getUsers().end());
    for (Node *N : R.Readers)
      if (Before(N, R.First))
        R.First = N;
    // The cast's result becomes its shard's copy.
    if (R.Cast)
      R.Shard->setType(TensorType(R.Shard->getType().getElementType(),
                                  R.Cast->getOperand(0)->getType().getShape()));
  }
  llvm::stable_sort(Requests,
                    [&](const GatherRequest &A, const GatherRequest &B) {
                      return Before(A.First, B.First) && A.First != B.First;
                    });
  // Buckets of at most Cap elements of the whole values, one element type
  // each, filled in first-use order; a larger value is a bucket of its own.
  double Cap = Opts.GatherElements > 0
                   ? double(Opts.GatherElements)
                   : getDataParallelBucketElements(unsigned(Ranks));
  SmallVector<SmallVector<GatherRequest *, 8>, 8> Buckets;
  DenseMap<unsigned, std::pair<unsigned, double>> Open;
  for (GatherRequest &R : Requests) {
    if (!R.First)
      continue;
    double Size = double(*R.Shard->getType().getStaticNumElements()) * Ranks;
    unsigned Ty = unsigned(R.Shard->getType().getElementType());
    // A parameter itself (not a 16-bit copy) is gathered alone, along its
    // own dimension 0, so that the runtime gathers it in place into its
    // home (docs/Runtime.md) instead of through a bucket's copies.
    if (!R.Cast) {
      Buckets.emplace_back();
      Buckets.back().push_back(&R);
      continue;
    }
    auto It = Open.find(Ty);
    if (It == Open.end() || It->second.second + Size > Cap) {
      Buckets.emplace_back();
      Open[Ty] = {unsigned(Buckets.size() - 1), 0.0};
      It = Open.find(Ty);
    }
    Buckets[It->second.first].push_back(&R);
    It->second.second += Size;
  }
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  for (ArrayRef<GatherRequest *> Bucket : Buckets) {
    Node *Where = nullptr;
    for (GatherRequest *R : Bucket)
      if (Before(R->First, Where))
        Where = R->First;
    Node *OldLast = &G.getNodes().back();
    SmallVector<Value *, 8> Wholes;
    // The rows of each request's whole value (its parameter's).
    auto RowsOf = [&](const GatherRequest *R) {
      return getWholeRows(R->Cast ? *R->Cast->getOperand(0) : *R->Shard, Ranks);
    };
    if (Bucket.size() == 1) {
      Expected<Value *> W = B.emit1(OpId::AllGather, {Bucket.front()->Shard},
                                    collectiveAttrs(/*Dim0=*/true));
      if (W)
        W = dropPadding(B, *W, RowsOf(Bucket.front()));
      if (!W)
        return W.takeError();
      Wholes.push_back(*W);
    } else {
      // Each shard viewed as [1, n / ranks], concatenated along dimension
      // 1 and gathered along 0: row r holds rank r's rows of every value,
      // the value's column block of it its rows r, whole in row-major order.
      SmallVector<Value *, 8> Flat;
      SmallVector<int64_t, 8> Sizes;
      for (GatherRequest *R : Bucket) {
        int64_t N = *R->Shard->getType().getStaticNumElements();
        Expected<Value *> V = B.reshape(R->Shard, {1, N});
        if (!V)
          return V.takeError();
        Flat.push_back(*V);
        Sizes.push_back(N);
      }
      AttrDict Along;
      Along.set("axis", Attribute::getInt(1));
      Expected<Value *> Cat = B.emit1(OpId::Concat, Flat, Along);
      if (!Cat)
        return Cat.takeError();
      Expected<Value *> All =
          B.emit1(OpId::AllGather, {*Cat}, collectiveAttrs(/*Dim0=*/true));
      if (!All)
        return All.takeError();
      Expected<SmallVector<Value *, 3>> Parts =
          B.emit(OpId::Split, {*All, B.ints(Sizes)}, Along, Bucket.size());
      if (!Parts)
        return Parts.takeError();
      for (auto [R, Part] : zip(Bucket, *Parts)) {
        SmallVector<int64_t, 4> Shape = R->Shard->getType().getStaticSizes();
        Shape[0] *= Ranks;
        Expected<Value *> W = B.reshape(Part, Shape);
        if (W)
          W = dropPadding(B, *W, RowsOf(R));
        if (!W)
          return W.takeError();
        Wholes.push_back(*W);
      }
    }
    // The casts first, then the bucket's gather, before its first reader.
    SmallVector<Node *, 16> New = getAppended(G, OldLast);
    for (GatherRequest *R : Bucket)
      if (R->Cast)
        moveBefore(G, R->Cast, Where);
    for (Node *N : New)
      moveBefore(G, N, Where);
    for (auto [R, Whole] : zip(Bucket, Wholes)) {
      G.renameValue(Whole,
                    G.getUniqueName(R->Shard->getName().str() + ".whole"));
      for (Node *Reader : R->Readers)
        rewireOperand(Reader, R->Shard, Whole);
    }
  }
  return Error::success();
}

Error InsertGradSyncPass::resolveAxis(const Graph &G) {
  Opts.Mesh = GivenMesh;
  Opts.Axis = GivenAxis;
  if (!Opts.Mesh.empty() && !Opts.Axis.empty())
    return Error::success();
  // The data-parallel split of the batch inputs (split-batch): one axis.
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    const Attribute *Split = In->getAttrs().get("batch_split");
    if (!Split)
      continue;
    const Sharding &S = Split->getSharding();
    std::vector<std::string> Axes;
    for (const std::vector<std::string> &D : S.DimAxes)
      Axes.insert(Axes.end(), D.begin(), D.end());
    if (Axes.size() != 1)
      return createStringError(
          inconvertibleErrorCode(),
          "input %" + In->getName() + " splits its batch over " +
              Twine(Axes.size()) + " axes; name one with axis=");
    if (Opts.Mesh.empty())
      Opts.Mesh = S.Mesh;
    if (Opts.Axis.empty())
      Opts.Axis = Axes.front();
    return Error::success();
  }
  return createStringError(inconvertibleErrorCode(),
                           "finds no data-parallel split (a batch input's "
                           "batch_split, from split-batch); name mesh= and "
                           "axis=");
}

Error InsertGradSyncPass::runOnGraph(Graph &G) {
  if (Error E = resolveAxis(G))
    return E;
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
      // A tensor-parallel shard made of pieces (a fused QKV weight) along
      // its rows stays whole over the data-parallel axis: a block of its
      // rows is no block of each piece (runtime/ParamInit.h's view).
      bool PiecesOnRows = P->getAttrs().get("pieces") && Ty.getRank() &&
                          P->getLogicalType().getShape()[0] != Ty.getShape()[0];
      // Rows that the axis does not divide are padded (logical_rows), but
      // only where no other axis splits them: a tensor-parallel shard's
      // padding would lie inside the logical value.
      const Attribute *Old = P->getAttrs().get("sharding");
      bool RowsSplit = Old && Old->isa(Attribute::Kind::Sharding) &&
                       !Old->getSharding().DimAxes.empty() &&
                       !Old->getSharding().DimAxes[0].empty() &&
                       P->getLogicalType().getShape()[0] != Ty.getShape()[0];
      if (!Grad || Grad->getNumOutputUses() == 0 || Ty.getRank() == 0 ||
          !Ty.getDim(0).isStatic() ||
          (Ty.getDim(0).getSize() % Ranks && RowsSplit) || PiecesOnRows)
        continue;
      ShardedParams.push_back(P.get());
      Scattered.insert(Grad);
    }
  }

  // ZeRO-2/3: a scattered gradient that accumulate-micro-batches or
  // schedule-pipeline summed over the micro-batches is reduce-scattered per
  // micro-batch, its shards summed instead.
  DenseMap<Value *, MicroBatchSum> PerMicroBatch;
  SmallVector<Value *, 32> Whole;
  for (Value *Grad : Grads) {
    MicroBatchSum Sum;
    if (Opts.Zero >= 2 && Scattered.count(Grad) &&
        getMicroBatchTerms(Grad, Sum))
      PerMicroBatch[Grad] = std::move(Sum);
    else
      Whole.push_back(Grad);
  }

  // Buckets (one kind of reduction each) of the gradients reduced once per
  // step, then the nodes of each after its last gradient's producer.
  DenseMap<Value *, Value *> Replacement;
  for (ArrayRef<Value *> Bucket :
       makeBuckets(Whole, [&](Value *V) { return Scattered.count(V) != 0; })) {
    Node *Anchor = lastProducer(Bucket, Order);
    Node *OldLast = G.getNodes().empty() ? nullptr : &G.getNodes().back();
    if (Error E = syncBucket(G, Bucket, Scattered.count(Bucket.front()) != 0,
                             Ranks, Replacement))
      return E;
    placeAfter(G, OldLast, Anchor);
  }
  if (Error E = syncPerMicroBatch(G, Grads, PerMicroBatch, Ranks, Replacement))
    return E;
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
  // The sums of whole gradients over micro-batches are dead when their
  // shards are summed instead.
  for (Value *Raw : Grads) {
    Value *Synced = Replacement.lookup(Raw);
    std::string Name = Raw->getName().str();
    auto It = PerMicroBatch.find(Raw);
    if (It != PerMicroBatch.end())
      for (Node *Add : It->second.Adds)
        Add->erase();
    else
      G.renameValue(Raw, G.getUniqueName(Name + ".local"));
    G.renameValue(Synced, Name);
  }
  return shardParams(G, ShardedParams, Ranks);
}

std::unique_ptr<Pass> autopar::createInsertGradSyncPass() {
  return std::make_unique<InsertGradSyncPass>();
}
