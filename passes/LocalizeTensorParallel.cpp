//===- LocalizeTensorParallel.cpp - Per-rank types of a split graph -------===//
//
// `localize-tp{axis}` turns a planned forward graph, whose values have
// logical (whole) types and whose `sharding` annotations say how they lie
// over the tensor-parallel mesh axis (shard-tp, insert-collectives), into
// the graph one rank of the axis runs: every value gets this rank's type.
//   - A value split on a dimension has that dimension divided by the axis
//     size; replicated and partial values keep their types. Parameters
//     split by their users become `local = 1` shards (runtime/ParamInit.h
//     loads the rank's block). A parameter whose split dimension feeds a
//     Split or Concat of several pieces (a fused QKV projection, see
//     ir/OpLoops.cpp) is annotated `pieces`: its shard is the rank's block
//     of each piece, as Megatron-LM lays out its fused QKV weights.
//   - A node that reads part of a replicated value (a split loop the value
//     has) reads a ShardSlice of it, the rank's block (no communication).
//   - Collectives get `local = 1`; a Gather of a table split along the
//     gathered axis (a vocabulary-parallel embedding) gets `mesh` and
//     `mesh_axis`, so that the kernel offsets the indices.
//   - Shape operands (Reshape's and Expand's shape, Split's sizes) become
//     constants of the local result types; the shape arithmetic that
//     computed them is erased when nothing else uses it.
//   - Graph outputs that are partial sums are all-reduced.
//   - A Linear, Gemm or Conv whose result is a partial sum drops its bias,
//     which is added once after each collective that sums the result
//     (Megatron-LM's row-parallel layer adds it after the all-reduce; a
//     Conv's [M] bias as [M, 1, ...]).
// Every node's local result types are then checked against its op's shape
// function. The `sharding` annotations stay, with their logical meaning:
// autodiff reads them to find which gradient contributions are partial
// sums. Assumes a verified graph after insert-collectives (and, with
// pipelines, extract-stage): static shapes, annotations consistent with the
// ops' loops, one tensor-parallel axis.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardGraph.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpLoops.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

constexpr int Replicated = LayoutReplicated, Partial = LayoutPartial;

class LocalizeTensorParallelPass : public Pass {
public:
  LocalizeTensorParallelPass() {
    Options.bind("axis", &Axis, "The tensor-parallel mesh axis (tp)");
  }

  StringRef getArgument() const override { return "localize-tp"; }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        std::string Msg = "localize-tp: " + toString(std::move(E));
        if (FailedAt)
          Diag.error(*FailedAt, Msg);
        else
          Diag.error(G->getLoc(), Msg);
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);
  Error localizeNode(Graph &G, Node &N);
  Error moveBias(Graph &G, Node &N);
  void markPieces(Graph &G);
  void tieLoops(const Node &N);
  int64_t getPieces(const Value *V, int Dim);
  void splitPieces(Graph &G, Node &N);
  void eraseDeadShapeArithmetic(Graph &G);

  /// The local type of a value of logical type Ty in Layout.
  TensorType localType(const TensorType &Ty, int Layout) const {
    if (Layout < 0)
      return Ty;
    SmallVector<Dim, 4> Shape(Ty.getShape().begin(), Ty.getShape().end());
    Shape[Layout] = Dim::get(Shape[Layout].getSize() / Size);
    return TensorType(Ty.getElementType(), Shape);
  }
  Error fail(const Node &N, const Twine &Why) {
    FailedAt = &N;
    return createStringError(inconvertibleErrorCode(), Why);
  }
  static std::string describe(const Node &N) {
    if (!N.getName().empty())
      return N.getName().str();
    return N.getNumResults() ? "%" + N.getResult(0)->getName().str() : "";
  }

  std::string Axis = "tp";
  std::string MeshName;
  /// The node an error is about.
  const Node *FailedAt = nullptr;
  int64_t Size = 1;
  /// Every value's layout over the axis.
  DenseMap<const Value *, int> Layouts;
  /// ShardSlices made, per (value, dimension).
  std::map<std::pair<Value *, int>, Value *> Slices;
  /// (value, dimension) pairs that one split loop ties together, and the
  /// piece count of the classes that a Split or Concat cuts.
  EquivalenceClasses<std::pair<const Value *, int>> Tied;
  std::map<std::pair<const Value *, int>, int64_t> PieceCounts;
  DenseMap<const Node *, std::pair<std::optional<OpLoops>, LoopSplit>>
      NodeLoops;
};

} // namespace

/// Gives To the pipeline placement (`layer`, `stage`) of From.
static void copyPlacement(const Node &From, AttrDict &To) {
  for (StringRef Name : {"layer", "stage"})
    if (const Attribute *A = From.getAttr(Name))
      To.set(Name, *A);
}

/// A 1-D i64 Constant of Values named Name, before Before.
static Value *makeShapeConstant(Graph &G, ArrayRef<int64_t> Values,
                                const std::string &Name, Node *Before) {
  TensorType Ty = TensorType::get(ElementType::I64, {int64_t(Values.size())});
  AttrDict A;
  A.set("value", Attribute::getTensor(DenseTensor(
                     Ty, std::vector<int64_t>(Values.begin(), Values.end()))));
  return G.createNode(OpId::Constant, {}, {Ty}, std::move(A), {Name}, Before)
      ->getResult(0);
}

static int gatherAxis(const Node &N) {
  const Attribute *A = N.getAttr("axis");
  int64_t Axis = A ? A->getInt() : 0;
  return int(Axis < 0 ? Axis + N.getOperand(0)->getType().getRank() : Axis);
}

static std::string layoutName(int Layout) {
  if (Layout == Replicated)
    return "replicated";
  if (Layout == Partial)
    return "a partial sum";
  return "split on dimension " + std::to_string(Layout);
}

Error LocalizeTensorParallelPass::runOnGraph(Graph &G) {
  Layouts.clear();
  Slices.clear();
  Tied = {};
  PieceCounts.clear();
  // The mesh: the first with the axis.
  Size = 1;
  for (const Mesh &M : G.getMeshes())
    if (std::optional<int64_t> S = M.getAxisSize(Axis)) {
      MeshName = M.Name;
      Size = *S;
      break;
    }
  if (Size == 1)
    return Error::success();
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    std::string Mesh;
    int L = getAnnotatedLayout(In->getAttrs().get("sharding"), 0, Axis, Mesh);
    Layouts[In.get()] = L;
    In->setType(localType(In->getType(), L));
  }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    std::string Mesh;
    int L = getAnnotatedLayout(P->getAttrs().get("sharding"), 0, Axis, Mesh);
    if (L == Partial)
      return createStringError(inconvertibleErrorCode(),
                               "parameter '" + P->getName() +
                                   "' is annotated as a partial sum");
    Layouts[P.get()] = L;
    if (L >= 0) {
      P->setType(localType(P->getType(), L));
      P->getAttrs().set("local", Attribute::getInt(1));
    }
  }
  // Outputs that are partial sums (logits of a head split over the hidden
  // dimension) are summed: what follows the graph takes whole values.
  for (unsigned I = 0, E = G.getOutputs().size(); I != E; ++I) {
    Value *Out = G.getOutputs()[I];
    Node *Def = Out->getDefiningNode();
    std::string Mesh;
    if (!Def ||
        getAnnotatedLayout(Def->getAttr("sharding"), Out->getResultIndex(),
                           Axis, Mesh) != Partial)
      continue;
    AttrDict A;
    A.set("mesh", Attribute::getString(MeshName));
    A.set("axis", Attribute::getString(Axis));
    copyPlacement(*Def, A);
    A.set("sharding",
          makeSharding(Replicated, Out->getType().getRank(), MeshName, Axis));
    std::string Name = Out->getName().str();
    G.renameValue(Out, G.getUniqueName(Name + ".partial"));
    Node *Sum = G.createNode(OpId::AllReduce, {Out}, {Out->getType()},
                             std::move(A), {Name});
    G.setOutput(I, Sum->getResult(0));
  }
  SmallVector<Node *, 64> Order;
  for (Node &N : G.getNodes())
    Order.push_back(&N);
  for (Node *N : Order)
    if (Error E = moveBias(G, *N))
      return E;
  // Loops from the logical types, before any changes.
  Order.clear();
  NodeLoops.clear();
  for (Node &N : G.getNodes()) {
    Order.push_back(&N);
    std::optional<OpLoops> L = getOpLoops(N);
    NodeLoops[&N] = {L, getAnnotatedSplit(N, L, Axis)};
  }
  for (Node *N : Order)
    tieLoops(*N);
  for (Node *N : Order)
    if (Error E = localizeNode(G, *N))
      return E;
  // Collectives along dimensions made of pieces, as collected now.
  SmallVector<Node *, 16> Moves;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::AllGather || N.getOp() == OpId::ReduceScatter ||
        N.getOp() == OpId::ShardSlice)
      Moves.push_back(&N);
  for (Node *N : Moves)
    splitPieces(G, *N);
  markPieces(G);
  eraseDeadShapeArithmetic(G);
  return Error::success();
}

/// A row-parallel Linear (a Conv split over its input channels, a Gemm
/// over K) adds its bias once, after the sum.
Error LocalizeTensorParallelPass::moveBias(Graph &G, Node &N) {
  bool IsConv = N.getOp() == OpId::Conv;
  if ((N.getOp() != OpId::Linear && N.getOp() != OpId::Gemm && !IsConv) ||
      N.getNumOperands() < 3 || !N.getOperand(2))
    return Error::success();
  std::string Mesh;
  if (getAnnotatedLayout(N.getAttr("sharding"), 0, Axis, Mesh) != Partial)
    return Error::success();
  if (const Attribute *Beta = N.getAttr("beta"))
    if (!Beta->isa(Attribute::Kind::Float) || Beta->getFloat() != 1.0)
      return fail(N, "its partial result adds C scaled by beta != 1; only "
                     "beta = 1 is lowered");
  Value *Y = N.getResult(0), *Bias = N.getOperand(2);
  SmallVector<Node *, 2> Sums(Y->getUsers().begin(), Y->getUsers().end());
  if (Y->getNumOutputUses())
    return fail(N, "its partial result is a graph output");
  for (Node *U : Sums) {
    bool Sums2 =
        U->getOp() == OpId::AllReduce || U->getOp() == OpId::ReduceScatter;
    if (!Sums2)
      return fail(N, "its partial result with a bias is read by '" +
                         describe(*U) + "' (" + U->getOpName() +
                         "); only all-reduces and reduce-scatters are "
                         "lowered");
  }
  N.setOperand(2, nullptr);
  for (Node *U : Sums) {
    Value *Sum = U->getResult(0);
    SmallVector<Node *, 4> Readers(Sum->getUsers().begin(),
                                   Sum->getUsers().end());
    AttrDict Attrs;
    copyPlacement(*U, Attrs);
    if (const Attribute *A = U->getAttr("sharding"))
      Attrs.set("sharding", *A);
    auto It = std::next(U->getIterator());
    Node *Next = It == G.getNodes().end() ? nullptr : &*It;
    Value *Term = Bias;
    if (IsConv) {
      // [M] broadcast over [N, M, spatial...]: as [M, 1, ...].
      SmallVector<int64_t, 4> Sizes(Sum->getType().getRank() - 1, 1);
      Sizes[0] = Bias->getType().getDim(0).getSize();
      Value *Shape = makeShapeConstant(
          G, Sizes, G.getUniqueName(Bias->getName().str() + ".shape"), Next);
      AttrDict RA;
      copyPlacement(*U, RA);
      RA.set("sharding",
             makeSharding(Replicated, unsigned(Sizes.size()), Mesh, Axis));
      Term = G.createNode(
                  OpId::Reshape, {Bias, Shape},
                  {TensorType::get(Bias->getType().getElementType(), Sizes)},
                  std::move(RA),
                  {G.getUniqueName(Bias->getName().str() + ".bcast")}, Next)
                 ->getResult(0);
    }
    Node *Add =
        G.createNode(OpId::Add, {Sum, Term}, {Sum->getType()}, std::move(Attrs),
                     {G.getUniqueName(Sum->getName().str() + ".bias")}, Next);
    for (Node *R : Readers)
      for (unsigned I = 0, E = R->getNumOperands(); I != E; ++I)
        if (R->getOperand(I) == Sum)
          R->setOperand(I, Add->getResult(0));
    for (unsigned I = 0, E = G.getOutputs().size(); I != E; ++I)
      if (G.getOutputs()[I] == Sum)
        G.setOutput(I, Add->getResult(0));
  }
  return Error::success();
}

/// The layout in which a node with split Split (loops L) reads operand I.
static int expectedOperandLayout(const Node &N, unsigned I,
                                 const std::optional<OpLoops> &L,
                                 LoopSplit Split, int ResultLayout) {
  // Collectives read the layout they exist to change.
  OpId Op = N.getOp();
  if (Op == OpId::AllReduce || Op == OpId::ReduceScatter)
    return Partial;
  if (Op == OpId::AllGather)
    return int(N.getAttr("dim")->getInt());
  if (Op == OpId::AllToAll)
    return int(N.getAttr("src_dim")->getInt());
  if (Op == OpId::SendRecv)
    return ResultLayout;
  if (!L || Split.Degree <= 1 || Split.Loop == OpLoops::NoLoop ||
      I >= L->Operands.size())
    return Replicated;
  auto Pos = find(L->Operands[I], Split.Loop);
  return Pos == L->Operands[I].end() ? Replicated
                                     : int(Pos - L->Operands[I].begin());
}

Error LocalizeTensorParallelPass::localizeNode(Graph &G, Node &N) {
  const Attribute *Annotation = N.getAttr("sharding");
  const std::optional<OpLoops> &Loops = NodeLoops[&N].first;
  LoopSplit Split = NodeLoops[&N].second;
  bool Communicates = isCommunicationOp(N.getOp());
  SmallVector<int, 2> ResultLayouts;
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
    std::string Mesh;
    ResultLayouts.push_back(Annotation
                                ? getAnnotatedLayout(Annotation, R, Axis, Mesh)
                                : Replicated);
  }

  // Operands: what the node reads, made of what the producers wrote.
  if (Annotation) {
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
      Value *O = N.getOperand(I);
      if (!O || readsOnlyShape(N, I))
        continue;
      int Have = Layouts.lookup(O);
      int Want = expectedOperandLayout(
          N, I, Loops, Split,
          ResultLayouts.empty() ? Replicated : ResultLayouts[0]);
      if (Have == Want)
        continue;
      // Shape operands are replaced below.
      bool ShapeOperand =
          I == 1 && (N.getOp() == OpId::Reshape || N.getOp() == OpId::Expand ||
                     N.getOp() == OpId::Split);
      if (ShapeOperand)
        continue;
      if (Have != Replicated || Want < 0)
        return fail(N, "reads '" + O->getName().str() + "' " +
                           layoutName(Want) + " but it is " + layoutName(Have) +
                           " (insert-collectives makes these conversions)");
      Value *&Slice = Slices[{O, Want}];
      if (!Slice) {
        AttrDict A;
        A.set("mesh", Attribute::getString(MeshName));
        A.set("axis", Attribute::getString(Axis));
        A.set("dim", Attribute::getInt(Want));
        copyPlacement(N, A);
        A.set("sharding",
              makeSharding(Want, O->getType().getRank(), MeshName, Axis));
        Node *S = G.createNode(
            OpId::ShardSlice, {O}, {localType(O->getType(), Want)},
            std::move(A), {G.getUniqueName(O->getName().str() + ".shard")}, &N);
        Slice = S->getResult(0);
        Layouts[Slice] = Want;
        Tied.unionSets({O, Want}, {Slice, Want});
      }
      N.setOperand(I, Slice);
    }
  } else {
    for (Value *O : N.getOperands())
      if (O && Layouts.lookup(O) == Partial)
        return fail(N, "reads the partial sum '" + O->getName().str() +
                           "' without a collective");
  }

  // Results: the annotated local types (unannotated nodes: inferred).
  SmallVector<TensorType, 2> WantTypes;
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
    WantTypes.push_back(localType(N.getResult(R)->getType(), ResultLayouts[R]));
  if (Communicates) {
    if (N.getOp() != OpId::AllReduce && N.getOp() != OpId::SendRecv)
      N.getAttrs().set("local", Attribute::getInt(1));
  } else if (N.getOp() == OpId::Gather && Annotation &&
             Layouts.lookup(N.getOperand(0)) >= 0 &&
             Layouts.lookup(N.getOperand(0)) == gatherAxis(N)) {
    N.getAttrs().set("mesh", Attribute::getString(MeshName));
    N.getAttrs().set("mesh_axis", Attribute::getString(Axis));
  }
  auto Constant = [&](ArrayRef<int64_t> Values) {
    return makeShapeConstant(
        G, Values,
        G.getUniqueName((N.getResult(0)->getName() + ".local_shape").str()),
        &N);
  };
  bool Changed = any_of(ResultLayouts, [](int L) { return L >= 0; }) ||
                 any_of(N.getOperands(),
                        [&](Value *O) { return O && Layouts.lookup(O) >= 0; });
  if (Annotation && Changed) {
    if (N.getOp() == OpId::Reshape || N.getOp() == OpId::Expand) {
      if (!WantTypes[0].hasStaticShape())
        return fail(N, "needs a static result type");
      SmallVector<int64_t, 4> Sizes = WantTypes[0].getStaticSizes();
      N.setOperand(1, Constant(Sizes));
    } else if (N.getOp() == OpId::Split && N.getNumOperands() > 1 &&
               N.getOperand(1)) {
      int64_t Rank = N.getOperand(0)->getType().getRank();
      const Attribute *AxisAttr = N.getAttr("axis");
      int64_t SplitAxis = AxisAttr ? AxisAttr->getInt() : 0;
      if (SplitAxis < 0)
        SplitAxis += Rank;
      SmallVector<int64_t, 4> Sizes;
      for (const TensorType &T : WantTypes)
        Sizes.push_back(T.getDim(SplitAxis).getSize());
      N.setOperand(1, Constant(Sizes));
    }
  }

  // Check against the op's shape function on the local operand types.
  Expected<SmallVector<TensorType, 1>> Inferred =
      N.getOpInfo().Infer(ShapeContext(N));
  if (!Inferred)
    return fail(N, "on per-rank types: " + toString(Inferred.takeError()));
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
    Value *V = N.getResult(R);
    const TensorType &Local = (*Inferred)[R];
    if (Annotation) {
      if (Local != WantTypes[R])
        return fail(N, "result " + std::to_string(R) + " is " + Local.str() +
                           " on each rank; its sharding says " +
                           WantTypes[R].str());
      Layouts[V] = ResultLayouts[R];
    } else {
      // An unannotated node (weight transposes): the layout its local
      // result type shows.
      int Layout = Replicated;
      const TensorType &Whole = V->getType();
      for (unsigned D = 0; D != Whole.getRank(); ++D)
        if (Local.getDim(D) != Whole.getDim(D))
          Layout = int(D);
      Layouts[V] = Layout;
      for (unsigned I = 0, E2 = N.getNumOperands(); I != E2; ++I)
        if (Value *O = N.getOperand(I))
          if (Layouts.lookup(O) >= 0 && Layout >= 0)
            Tied.unionSets({O, Layouts.lookup(O)}, {V, Layout});
    }
    V->setType(Annotation ? WantTypes[R] : Local);
  }

  return Error::success();
}

/// Pieces: the split loop ties the dimensions it maps; Split and Concat
/// cut their whole side into pieces.
void LocalizeTensorParallelPass::tieLoops(const Node &N) {
  // A pipeline transfer hands its operand on unchanged: a dimension made of
  // pieces on one stage is made of them on the next (a stage cut after a
  // Concat inside a block).
  if (N.getOp() == OpId::SendRecv) {
    for (unsigned D = 0, E = N.getResult(0)->getType().getRank(); D != E; ++D)
      Tied.unionSets({N.getOperand(0), int(D)}, {N.getResult(0), int(D)});
    return;
  }
  const std::optional<OpLoops> &Loops = NodeLoops[&N].first;
  LoopSplit Split = NodeLoops[&N].second;
  if (!N.getAttr("sharding") || !Loops || Split.Loop == OpLoops::NoLoop)
    return;
  bool Cuts = N.getOp() == OpId::Split || N.getOp() == OpId::Concat;
  SmallVector<std::pair<const Value *, int>, 6> Members;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    if (!N.getOperand(I) || I >= Loops->Operands.size())
      continue;
    auto Pos = find(Loops->Operands[I], Split.Loop);
    if (Pos != Loops->Operands[I].end())
      Members.push_back(
          {N.getOperand(I), int(Pos - Loops->Operands[I].begin())});
  }
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
    auto Pos = find(Loops->Results[R], Split.Loop);
    if (Pos != Loops->Results[R].end())
      Members.push_back({N.getResult(R), int(Pos - Loops->Results[R].begin())});
  }
  if (Cuts && !Members.empty()) {
    // Only a split of the cut axis itself cuts the whole into pieces.
    bool IsSplit = N.getOp() == OpId::Split;
    auto Whole = IsSplit ? Members.front() : Members.back();
    const Value *WholeValue = IsSplit ? N.getOperand(0) : N.getResult(0);
    const Attribute *AxisAttr = N.getAttr("axis");
    int64_t CutAxis = AxisAttr ? AxisAttr->getInt() : 0;
    if (CutAxis < 0)
      CutAxis += WholeValue->getType().getRank();
    if (Whole.first == WholeValue && Whole.second == CutAxis) {
      int64_t Pieces = IsSplit ? N.getNumResults() : N.getNumOperands();
      if (Pieces > 1)
        PieceCounts[Whole] = Pieces;
      return;
    }
  }
  for (unsigned I = 1; I < Members.size(); ++I)
    Tied.unionSets(Members[0], Members[I]);
}

int64_t LocalizeTensorParallelPass::getPieces(const Value *V, int Dim) {
  std::pair<const Value *, int> Leader = Tied.getOrInsertLeaderValue({V, Dim});
  for (auto &[Member, Count] : PieceCounts)
    if (Tied.getOrInsertLeaderValue(Member) == Leader)
      return Count;
  return 1;
}

/// A collective or ShardSlice along a dimension made of K pieces works on
/// each piece: the dimension is viewed as [K, n / K] around it.
void LocalizeTensorParallelPass::splitPieces(Graph &G, Node &N) {
  const Attribute *DimAttr = N.getAttr("dim");
  if (!DimAttr)
    return;
  int Dim = int(DimAttr->getInt());
  Value *X = N.getOperand(0), *Y = N.getResult(0);
  const Value *SplitSide = N.getOp() == OpId::AllGather ? X : Y;
  int64_t K = getPieces(SplitSide, Dim);
  if (K <= 1)
    return;
  auto View = [&](const TensorType &T) {
    SmallVector<int64_t, 4> Sizes = T.getStaticSizes();
    Sizes[Dim] /= K;
    Sizes.insert(Sizes.begin() + Dim, K);
    return Sizes;
  };
  auto Reshape = [&](Value *V, ArrayRef<int64_t> Sizes, StringRef Name,
                     Node *Before) {
    Value *Shape = makeShapeConstant(
        G, Sizes, G.getUniqueName((Name + ".shape").str()), Before);
    AttrDict RA;
    copyPlacement(N, RA);
    return G
        .createNode(OpId::Reshape, {V, Shape},
                    {TensorType::get(V->getType().getElementType(), Sizes)},
                    std::move(RA), {G.getUniqueName(Name.str())}, Before)
        ->getResult(0);
  };
  TensorType Whole = Y->getType();
  std::string Name = Y->getName().str();
  N.setOperand(
      0, Reshape(X, View(X->getType()), X->getName().str() + ".pieces", &N));
  N.getAttrs().set("dim", Attribute::getInt(Dim + 1));
  if (const Attribute *Old = N.getAttr("sharding"))
    if (Old->isa(Attribute::Kind::Sharding)) {
      Sharding S = Old->getSharding();
      if (int(S.DimAxes.size()) > Dim)
        S.DimAxes.insert(S.DimAxes.begin() + Dim, std::vector<std::string>());
      N.getAttrs().set("sharding", Attribute::getSharding(std::move(S)));
    }
  Y->setType(TensorType::get(Whole.getElementType(), View(Whole)));
  G.renameValue(Y, G.getUniqueName(Name + ".pieces"));
  SmallVector<Node *, 4> Readers(Y->getUsers().begin(), Y->getUsers().end());
  auto It = std::next(N.getIterator());
  Node *Next = It == G.getNodes().end() ? nullptr : &*It;
  Value *Back = Reshape(Y, Whole.getStaticSizes(), Name, Next);
  for (Node *R : Readers)
    for (unsigned I = 0, E = R->getNumOperands(); I != E; ++I)
      if (R->getOperand(I) == Y)
        R->setOperand(I, Back);
  for (unsigned I = 0, E = G.getOutputs().size(); I != E; ++I)
    if (G.getOutputs()[I] == Y)
      G.setOutput(I, Back);
}

void LocalizeTensorParallelPass::markPieces(Graph &G) {
  std::map<std::pair<const Value *, int>, int64_t> ByLeader;
  for (auto &[Member, Count] : PieceCounts)
    ByLeader[Tied.getOrInsertLeaderValue(Member)] = Count;
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    int L = Layouts.lookup(P.get());
    if (L < 0)
      continue;
    auto It = ByLeader.find(Tied.getOrInsertLeaderValue({P.get(), L}));
    if (It != ByLeader.end())
      P->getAttrs().set("pieces", Attribute::getInt(It->second));
  }
}

/// Shape arithmetic whose Reshape/Expand/Split users now read constants.
void LocalizeTensorParallelPass::eraseDeadShapeArithmetic(Graph &G) {
  bool Erased = true;
  while (Erased) {
    Erased = false;
    SmallVector<Node *, 16> Dead;
    for (Node &N : G.getNodes())
      if (none_of(N.getResults(), [](Value *R) { return R->hasUses(); }) &&
          N.getNumResults() && !isCommunicationOp(N.getOp()))
        Dead.push_back(&N);
    for (Node *N : reverse(Dead)) {
      N->erase();
      Erased = true;
    }
  }
}

std::unique_ptr<Pass> autopar::createLocalizeTensorParallelPass() {
  return std::make_unique<LocalizeTensorParallelPass>();
}
