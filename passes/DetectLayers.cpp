//===- DetectLayers.cpp - Find the repeated blocks of a model -------------===//
//
// Annotates every node with `layer = N`: the repeated blocks of the model
// (transformer layers, ResNet bottleneck blocks) are found from the structure
// of the graph alone, never from value or node names, so graphs whose
// exporter named everything `onnx::MatMul_509` or `n17` work as well.
//
// Numbering: layer 0 is the embedding unit (every compute node before the
// first repeated block; it may be empty), layers 1..L are the blocks in graph
// order (the blocks of every run of repeated blocks, and each stretch of
// compute between two runs, such as the first block of a ResNet stage, as one
// unit of its own), and layer L+1 is the head (every compute node after the
// last block; it may be empty). A graph without repetition gets layer 0 on
// every node.
//
// Algorithm (docs/Layers.md has the details and the limits):
//   1. Nodes that compute only from parameters, constants and shapes
//      (Constant, Shape, shape arithmetic, Slice of a rotary table) are
//      auxiliary; the others, the compute nodes, form a sequence in graph
//      order.
//   2. Each compute node gets a structural signature: op, attributes other
//      than annotations, and per operand whether it is an activation, a
//      parameter-derived or a constant-derived value, with its type, plus the
//      result types. Names never enter it.
//   3. The run of blocks covering the most compute nodes is a maximal stretch
//      of the signature sequence with period P repeated at least
//      `min-repeats` times (P at least `min-block-nodes`, every block using a
//      parameter); ties go to the smaller period, then the earlier run. Its
//      phase is the one whose block boundaries cut the fewest live
//      activations (the residual stream: one value at a true boundary),
//      then the most uses of them (a block starts where the stream forks
//      into the branch and the skip).
//      The stretches before and after the run are searched the same way.
//   4. Auxiliary nodes take the layer of their first user (in graph order);
//      those without a user take the head when returned, else the layer of
//      the compute node before them.
// Equal signature sequences make the blocks of a run isomorphic as sequences:
// same ops, attributes, parameter shapes and activation shapes, in order.
// Assumes verified input whose compute nodes are in execution order, one
// block after another (what exporters write). Deterministic; the search costs
// O(n^2) signature comparisons for n compute nodes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"
#include "ir/OpFlops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace autopar;
using namespace llvm;

namespace {

struct DetectLayersOptions {
  /// Fewest compute nodes in one repeated block.
  int64_t MinBlockNodes = 4;
  /// Fewest consecutive equal blocks that make a run.
  int64_t MinRepeats = 2;
  /// Fewest units: a graph without repeated blocks is cut into this many
  /// pieces (pipeline stages inside one block), or one per compute node
  /// when it has fewer.
  int64_t MinUnits = 1;

  Error validate() const {
    if (MinBlockNodes < 1)
      return createStringError(inconvertibleErrorCode(),
                               "min-block-nodes must be at least 1");
    if (MinRepeats < 2)
      return createStringError(inconvertibleErrorCode(),
                               "min-repeats must be at least 2");
    if (MinUnits < 1 || MinUnits > 1024)
      return createStringError(inconvertibleErrorCode(),
                               "min-units must be 1 to 1024");
    return Error::success();
  }
};

/// Blocks [Start + K * Period, Start + (K + 1) * Period) for K < Count, in
/// indices of the compute-node sequence.
struct Run {
  size_t Start = 0;
  size_t Period = 0;
  size_t Count = 0;
  size_t end() const { return Start + Period * Count; }
};

/// The compute-node sequence of one graph and what the search needs of it.
struct Sequence {
  std::vector<Node *> Nodes;
  /// Interned structural signature of each compute node.
  std::vector<unsigned> Signatures;
  /// UsesParam prefix sums: ParamPrefix[I] = compute nodes before I that use
  /// a parameter-derived value.
  std::vector<size_t> ParamPrefix;
  /// Cost[P]: activations live across the boundary before compute node P
  /// (P in [0, n]).
  std::vector<int64_t> Cost;
  /// Edges[P]: uses (by compute nodes, or as an output) that cross that
  /// boundary: the fan-out of the live activations.
  std::vector<int64_t> Edges;
};

class DetectLayersPass : public Pass {
public:
  DetectLayersPass() {
    Options.bind("min-block-nodes", &Opts.MinBlockNodes,
                 "Fewest compute nodes in one repeated block");
    Options.bind("min-repeats", &Opts.MinRepeats,
                 "Fewest consecutive equal blocks that make a run");
    Options.bind("min-units", &Opts.MinUnits,
                 "Cut a graph without repeated blocks into this many units");
  }

  StringRef getArgument() const override { return "detect-layers"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      detect(*G);
    return success();
  }

private:
  void detect(Graph &G);
  std::optional<Run> findBestRun(const Sequence &S, size_t Lo, size_t Hi);
  void findRuns(const Sequence &S, size_t Lo, size_t Hi,
                std::vector<Run> &Runs);
  std::vector<size_t> cutSequence(Graph &G, const Sequence &S, size_t Pieces);

  DetectLayersOptions Opts;
};

} // namespace

/// Annotation names, which never enter a signature.
static bool isAnnotationName(StringRef Name) {
  return lookupAnnotation(Name) != nullptr;
}

void DetectLayersPass::detect(Graph &G) {
  // Classify values: auxiliary (computed from parameters, constants and
  // shapes only) and, among them, parameter-derived.
  DenseSet<const Value *> Aux, ParamDerived;
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    Aux.insert(P.get());
    ParamDerived.insert(P.get());
  }
  DenseMap<const Node *, size_t> Order;
  Sequence S;
  for (Node &N : G.getNodes()) {
    size_t Index = Order.size();
    Order[&N] = Index;
    bool IsAux = true, FromParam = false;
    if (N.getOp() != OpId::Shape && N.getOp() != OpId::Size) {
      for (Value *V : N.getOperands()) {
        if (!V)
          continue;
        IsAux &= Aux.count(V) != 0;
        FromParam |= ParamDerived.count(V) != 0;
      }
    }
    if (!IsAux) {
      S.Nodes.push_back(&N);
      continue;
    }
    for (Value *R : N.getResults()) {
      Aux.insert(R);
      if (FromParam)
        ParamDerived.insert(R);
    }
  }

  // Signatures, interned in first-seen order (deterministic).
  StringMap<unsigned> Interned;
  size_t NumMain = S.Nodes.size();
  S.ParamPrefix.assign(NumMain + 1, 0);
  DenseMap<const Node *, size_t> MainIndex;
  for (size_t I = 0; I != NumMain; ++I) {
    const Node &N = *S.Nodes[I];
    MainIndex[&N] = I;
    std::string Text;
    raw_string_ostream OS(Text);
    OS << N.getOpName() << '{';
    for (const NamedAttribute &A : N.getAttrs()) {
      if (isAnnotationName(A.first))
        continue;
      OS << A.first << '=';
      A.second.print(OS);
      OS << ',';
    }
    OS << "}(";
    bool UsesParam = false;
    for (Value *V : N.getOperands()) {
      if (!V) {
        OS << "_,";
        continue;
      }
      if (ParamDerived.count(V)) {
        UsesParam = true;
        OS << 'p';
      } else if (Aux.count(V)) {
        OS << 'c';
      } else {
        OS << 'a';
      }
      OS << V->getType() << ',';
    }
    OS << ")->";
    for (Value *R : N.getResults())
      OS << R->getType() << ',';
    OS.flush();
    S.Signatures.push_back(
        Interned.try_emplace(Text, Interned.size()).first->second);
    S.ParamPrefix[I + 1] = S.ParamPrefix[I] + (UsesParam ? 1 : 0);
  }

  // Live activations across each boundary: a value defined by compute node D
  // (or a graph input, D = -1) and last used by compute node U (n when it is
  // returned) is live across boundaries D+1..U.
  // Each use by compute node U (or as an output, U = n) is an edge that
  // crosses boundaries D+1..U.
  std::vector<int64_t> Delta(NumMain + 2, 0), EdgeDelta(NumMain + 2, 0);
  auto AddLiveRange = [&](const Value *V, int64_t Def) {
    int64_t Last = -1;
    auto AddEdge = [&](int64_t Use) {
      Last = std::max(Last, Use);
      if (Use > Def) {
        ++EdgeDelta[Def + 1];
        --EdgeDelta[Use + 1];
      }
    };
    for (const Node *U : V->getUsers()) {
      auto It = MainIndex.find(U);
      if (It != MainIndex.end())
        AddEdge(It->second);
    }
    if (V->getNumOutputUses() != 0)
      AddEdge(NumMain);
    if (Last <= Def)
      return;
    ++Delta[Def + 1];
    --Delta[Last + 1];
  };
  for (const std::unique_ptr<Value> &In : G.getInputs())
    AddLiveRange(In.get(), -1);
  for (size_t I = 0; I != NumMain; ++I)
    for (Value *R : S.Nodes[I]->getResults())
      AddLiveRange(R, I);
  S.Cost.assign(NumMain + 1, 0);
  S.Edges.assign(NumMain + 1, 0);
  int64_t Running = 0, RunningEdges = 0;
  for (size_t P = 0; P <= NumMain; ++P) {
    Running += Delta[P];
    RunningEdges += EdgeDelta[P];
    S.Cost[P] = Running;
    S.Edges[P] = RunningEdges;
  }

  // Runs of repeated blocks, and the layer of each compute node.
  std::vector<Run> Runs;
  findRuns(S, 0, NumMain, Runs);
  std::vector<int64_t> MainLayer(NumMain, 0);
  int64_t Next = 1;
  size_t Pos = Runs.empty() ? NumMain : Runs.front().Start;
  for (const Run &R : Runs) {
    if (Pos < R.Start) {
      // Compute between two runs: one unit of its own.
      for (size_t I = Pos; I != R.Start; ++I)
        MainLayer[I] = Next;
      ++Next;
    }
    for (size_t K = 0; K != R.Count; ++K, ++Next)
      for (size_t I = 0; I != R.Period; ++I)
        MainLayer[R.Start + K * R.Period + I] = Next;
    Pos = R.end();
  }
  if (!Runs.empty())
    for (size_t I = Pos; I != NumMain; ++I)
      MainLayer[I] = Next;
  int64_t HeadLayer = Runs.empty() ? 0 : Next;
  // No repetition: pieces 0..K-1 when asked for K units.
  if (Runs.empty() && Opts.MinUnits > 1 && NumMain > 1) {
    std::vector<size_t> Cuts =
        cutSequence(G, S, std::min(NumMain, size_t(Opts.MinUnits)));
    for (size_t K = 0; K + 1 < Cuts.size(); ++K)
      for (size_t I = Cuts[K]; I != Cuts[K + 1]; ++I)
        MainLayer[I] = int64_t(K);
    HeadLayer = int64_t(Cuts.size()) - 2;
  }

  // Layers of all nodes: compute nodes from MainLayer; auxiliary nodes from
  // their first user, visited in reverse order so that users come first.
  std::vector<Node *> All;
  for (Node &N : G.getNodes())
    All.push_back(&N);
  std::vector<int64_t> Layer(All.size(), -1);
  std::vector<int64_t> Preceding(All.size(), 0);
  int64_t Last = 0;
  for (size_t I = 0; I != All.size(); ++I) {
    auto It = MainIndex.find(All[I]);
    if (It != MainIndex.end()) {
      Layer[I] = MainLayer[It->second];
      Last = Layer[I];
    }
    Preceding[I] = Last;
  }
  for (size_t I = All.size(); I-- != 0;) {
    if (Layer[I] >= 0)
      continue;
    size_t First = All.size();
    bool Returned = false;
    for (Value *R : All[I]->getResults()) {
      for (const Node *U : R->getUsers())
        First = std::min(First, Order.lookup(U));
      Returned |= R->getNumOutputUses() != 0;
    }
    if (First != All.size())
      Layer[I] = Layer[First];
    else
      Layer[I] = Returned ? HeadLayer : Preceding[I];
  }
  for (size_t I = 0; I != All.size(); ++I)
    All[I]->getAttrs().set("layer", Attribute::getInt(Layer[I]));
}

void DetectLayersPass::findRuns(const Sequence &S, size_t Lo, size_t Hi,
                                std::vector<Run> &Runs) {
  std::optional<Run> Best = findBestRun(S, Lo, Hi);
  if (!Best)
    return;
  findRuns(S, Lo, Best->Start, Runs);
  Runs.push_back(*Best);
  findRuns(S, Best->end(), Hi, Runs);
}

std::optional<Run> DetectLayersPass::findBestRun(const Sequence &S, size_t Lo,
                                                 size_t Hi) {
  std::optional<Run> Best;
  size_t BestCoverage = 0;
  size_t MinPeriod = Opts.MinBlockNodes;
  size_t MinCount = Opts.MinRepeats;
  ArrayRef<unsigned> Sig = S.Signatures;
  for (size_t P = MinPeriod; P * MinCount <= Hi - Lo; ++P) {
    size_t I = Lo;
    while (I + P < Hi) {
      if (Sig[I] != Sig[I + P]) {
        ++I;
        continue;
      }
      size_t J = I;
      while (J + P < Hi && Sig[J] == Sig[J + P])
        ++J;
      // [I, J + P) has period P.
      size_t Length = J + P - I, Count = Length / P;
      if (Count >= MinCount && Count * P > BestCoverage) {
        // The phase whose boundaries cut the fewest live activations, then
        // the most uses of them (a block starts where the residual stream
        // forks into the branch and the skip), then the earliest, among
        // those whose every block uses a parameter.
        std::optional<size_t> BestStart;
        std::pair<int64_t, int64_t> BestCost;
        for (size_t Start = I; Start + Count * P <= J + P; ++Start) {
          std::pair<int64_t, int64_t> Cost(0, 0);
          bool AllUseParams = true;
          for (size_t K = 0; K <= Count; ++K) {
            size_t B = Start + K * P;
            Cost.first += S.Cost[B];
            Cost.second -= S.Edges[B];
            if (K != Count)
              AllUseParams &= S.ParamPrefix[B + P] != S.ParamPrefix[B];
          }
          if (AllUseParams && (!BestStart || Cost < BestCost)) {
            BestStart = Start;
            BestCost = Cost;
          }
        }
        if (BestStart) {
          Best = Run{*BestStart, P, Count};
          BestCoverage = Count * P;
        }
      }
      I = J + 1;
    }
  }
  return Best;
}

/// Forward FLOPs of every compute node with each symbolic dimension taken
/// as 1 (the batch is symbolic while planning; FLOPs grow alike with it).
static std::vector<double> flopsAtUnitSymbols(Graph &G, const Sequence &S) {
  std::vector<std::pair<Value *, TensorType>> Saved;
  auto Bind = [&](Value *V) {
    const TensorType &T = V->getType();
    if (llvm::all_of(T.getShape(), [](const Dim &D) { return D.isStatic(); }))
      return;
    Saved.push_back({V, T});
    SmallVector<Dim, 4> Shape;
    for (const Dim &D : T.getShape())
      Shape.push_back(D.isSymbolic()  ? Dim::get(D.getCoefficient())
                      : D.isUnknown() ? Dim::get(1)
                                      : D);
    V->setType(TensorType(T.getElementType(), Shape));
  };
  for (const std::unique_ptr<Value> &V : G.getInputs())
    Bind(V.get());
  for (const std::unique_ptr<Value> &V : G.getParams())
    Bind(V.get());
  for (Node &N : G.getNodes())
    for (Value *R : N.getResults())
      if (R)
        Bind(R);
  std::vector<double> Flops;
  for (const Node *N : S.Nodes)
    Flops.push_back(double(getForwardFlops(*N).value_or(0)));
  for (auto &[V, T] : Saved)
    V->setType(T);
  return Flops;
}

/// Cuts [0, n) into Pieces non-empty stretches: the largest forward FLOPs
/// of a piece as small as it can be; among cuts whose pieces stay within
/// 10% of that, the fewest activations live across the cuts (what a
/// pipeline stage sends), then the best balance, then the earliest. Returns the
/// Pieces + 1 boundaries, from 0 to n. An exact dynamic program: O(n^2) in the
/// worst case, about O(n^2 / Pieces) per piece count when pieces balance.
std::vector<size_t> DetectLayersPass::cutSequence(Graph &G, const Sequence &S,
                                                  size_t Pieces) {
  size_t N = S.Nodes.size();
  std::vector<double> Flops = flopsAtUnitSymbols(G, S);
  // Every node weighs at least one FLOP, so that no piece is empty of work
  // when the graph has no static shapes at all.
  std::vector<double> Prefix(N + 1, 0);
  for (size_t I = 0; I != N; ++I)
    Prefix[I + 1] = Prefix[I] + std::max(1.0, Flops[I]);
  constexpr double Inf = std::numeric_limits<double>::infinity();
  // Best[k][j]: the smallest largest piece of the first j nodes in k pieces.
  std::vector<std::vector<double>> Best(Pieces + 1,
                                        std::vector<double>(N + 1, Inf));
  Best[0][0] = 0;
  // The last piece grows as its start I moves left: once it alone is no
  // better than the best found, no earlier start is.
  for (size_t K = 1; K <= Pieces; ++K)
    for (size_t J = K; J <= N; ++J)
      for (size_t I = J; I-- > K - 1;) {
        if (Prefix[J] - Prefix[I] >= Best[K][J])
          break;
        Best[K][J] = std::min(Best[K][J],
                              std::max(Best[K - 1][I], Prefix[J] - Prefix[I]));
      }
  double Cap = Best[Pieces][N] * 1.1;
  // Live[k][j]: for the first j nodes in k pieces of at most Cap each, the
  // fewest activations live across the cuts, then the smallest largest
  // piece (lexicographic, which the recurrence keeps exact); From[k][j] the
  // last cut.
  using Score = std::pair<int64_t, double>;
  const Score None(std::numeric_limits<int64_t>::max(), Inf);
  std::vector<std::vector<Score>> Live(Pieces + 1,
                                       std::vector<Score>(N + 1, None));
  std::vector<std::vector<size_t>> From(Pieces + 1,
                                        std::vector<size_t>(N + 1, 0));
  Live[0][0] = {0, 0};
  for (size_t K = 1; K <= Pieces; ++K)
    for (size_t J = K; J <= N; ++J)
      for (size_t I = J; I-- > K - 1;) {
        double Piece = Prefix[J] - Prefix[I];
        if (Piece > Cap)
          break;
        if (Live[K - 1][I] == None)
          continue;
        Score Cost(Live[K - 1][I].first + (I == 0 ? 0 : S.Cost[I]),
                   std::max(Live[K - 1][I].second, Piece));
        // Leftwards, so <= keeps the earliest of equal cuts.
        if (Cost <= Live[K][J]) {
          Live[K][J] = Cost;
          From[K][J] = I;
        }
      }
  std::vector<size_t> Cuts(Pieces + 1, N);
  for (size_t K = Pieces; K != 0; --K)
    Cuts[K - 1] = From[K][Cuts[K]];
  return Cuts;
}

std::unique_ptr<Pass> autopar::createDetectLayersPass() {
  return std::make_unique<DetectLayersPass>();
}
