//===- ShardGraph.cpp - Tensor-parallel layout of a whole graph -----------===//

#include "passes/ShardGraph.h"

#include "ir/Graph.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/StringMap.h"

#include <limits>
#include <set>

using namespace autopar;
using namespace llvm;

namespace {

using Pins = std::map<const Value *, int>;

class GraphSharder {
public:
  GraphSharder(ArrayRef<LayerUnit> Units, const GraphShardingOptions &O,
               GraphSharding &Out)
      : Units(Units), O(O), Out(Out) {}

  Error run(const Graph &G);

private:
  ShardingProblem problem(const LayerUnit &U, int In, int Out) const;
  Expected<const ShardingSolution *> solve(unsigned I, const Pins &Pinned);
  Error chooseBoundary();
  Error pinSharedParams(const Graph &G);

  ArrayRef<LayerUnit> Units;
  const GraphShardingOptions &O;
  GraphSharding &Out;
  std::map<const Value *, std::map<unsigned, int>> UsedBy;
};

ShardingProblem GraphSharder::problem(const LayerUnit &U, int In,
                                      int OutLayout) const {
  ShardingProblem P;
  P.Nodes = U.Nodes;
  P.Group = O.Group;
  P.SplitTokens = O.SplitTokens;
  P.InputLayout = In;
  P.OutputLayout = OutLayout;
  P.MicroBatches = O.MicroBatches;
  P.OutputsFeedLoss = O.OutputsFeedLoss;
  P.Exhaustive = O.Exhaustive;
  P.Cl = O.Cl;
  P.Settings = O.Settings;
  P.Flow = O.Flow;
  return P;
}

Expected<const ShardingSolution *> GraphSharder::solve(unsigned I,
                                                       const Pins &Pinned) {
  int In = I == 0 ? LayoutReplicated : Out.Boundary;
  int Last = I + 1 == Units.size() ? LayoutReplicated : Out.Boundary;
  std::string Key = Units[I].Signature + "|" + std::to_string(In) + "|" +
                    std::to_string(Last);
  ShardingProblem P = problem(Units[I], In, Last);
  for (const auto &[V, L] : Pinned) {
    P.PinnedParams[V] = L;
    Key += "|" + V->getName().str() + "=" + std::to_string(L);
  }
  auto It = Out.Solved.find(Key);
  if (It == Out.Solved.end()) {
    Expected<ShardingSolution> S = solveSharding(P);
    if (!S)
      return S.takeError();
    It = Out.Solved.emplace(Key, std::move(*S)).first;
  }
  return &It->second;
}

Error GraphSharder::chooseBoundary() {
  if (Units.size() <= 2)
    return Error::success();
  StringMap<unsigned> Count;
  for (unsigned I = 1; I + 1 < Units.size(); ++I)
    ++Count[Units[I].Signature];
  double Best = std::numeric_limits<double>::infinity();
  for (int B : getBoundaryLayouts(Units[1].Nodes, O.SplitTokens)) {
    double Total = 0;
    StringMap<bool> Done;
    for (unsigned I = 1; I + 1 < Units.size(); ++I) {
      if (!Done.insert({Units[I].Signature, true}).second)
        continue;
      // Cached under the key solve() uses for a block with this boundary.
      std::string Key = Units[I].Signature + "|" + std::to_string(B) + "|" +
                        std::to_string(B);
      auto It = Out.Solved.find(Key);
      if (It == Out.Solved.end()) {
        Expected<ShardingSolution> S = solveSharding(problem(Units[I], B, B));
        if (!S)
          return S.takeError();
        It = Out.Solved.emplace(Key, std::move(*S)).first;
      }
      Total += It->second.totalSeconds() * Count[Units[I].Signature];
    }
    if (Total < Best) {
      Best = Total;
      Out.Boundary = B;
    }
  }
  return Error::success();
}

Error GraphSharder::pinSharedParams(const Graph &G) {
  for (unsigned I = 0; I != Units.size(); ++I) {
    Expected<const ShardingSolution *> S = solve(I, {});
    if (!S)
      return S.takeError();
    for (const auto &[V, L] : (*S)->ParamLayouts)
      UsedBy[V][I] = L;
  }
  // In parameter order, so that the result does not depend on pointers.
  for (const std::unique_ptr<Value> &Param : G.getParams()) {
    auto Uses = UsedBy.find(Param.get());
    if (Uses == UsedBy.end() || Uses->second.size() < 2)
      continue;
    std::set<int> Candidates;
    for (const auto &[Unit, L] : Uses->second)
      Candidates.insert(L);
    if (Candidates.size() < 2)
      continue;
    int BestLayout = *Candidates.begin();
    double Best = std::numeric_limits<double>::infinity();
    for (int C : Candidates) {
      Pins Try = Out.PinnedParams;
      Try[Param.get()] = C;
      double Total = 0;
      for (const auto &[Unit, L] : Uses->second) {
        Expected<const ShardingSolution *> S = solve(Unit, Try);
        if (!S) {
          consumeError(S.takeError());
          Total = std::numeric_limits<double>::infinity();
          break;
        }
        Total += (*S)->totalSeconds();
      }
      if (Total < Best) {
        Best = Total;
        BestLayout = C;
      }
    }
    Out.PinnedParams[Param.get()] = BestLayout;
  }
  return Error::success();
}

Error GraphSharder::run(const Graph &G) {
  if (Error E = chooseBoundary())
    return E;
  if (Error E = pinSharedParams(G))
    return E;
  for (unsigned I = 0; I != Units.size(); ++I) {
    Pins Mine;
    for (const auto &[V, L] : Out.PinnedParams)
      if (UsedBy[V].count(I))
        Mine[V] = L;
    Expected<const ShardingSolution *> S = solve(I, Mine);
    if (!S)
      return S.takeError();
    Out.Units.push_back(*S);
  }
  return Error::success();
}

} // namespace

Expected<std::unique_ptr<GraphSharding>>
autopar::shardGraph(const Graph &G, ArrayRef<LayerUnit> Units,
                    const GraphShardingOptions &Options) {
  auto Out = std::make_unique<GraphSharding>();
  GraphSharder S(Units, Options, *Out);
  if (Error E = S.run(G))
    return E;
  return Out;
}

void autopar::annotateSharding(Graph &G, ArrayRef<LayerUnit> Units,
                               const GraphSharding &Sharding, StringRef Mesh,
                               StringRef Axis) {
  std::map<const Value *, int> ParamLayouts;
  for (unsigned I = 0; I != Units.size(); ++I) {
    const LayerUnit &U = Units[I];
    const ShardingSolution &Sol = *Sharding.Units[I];
    // Units of one class share a solution, node by node.
    for (unsigned K = 0; K != U.Nodes.size(); ++K) {
      Node &N = const_cast<Node &>(*U.Nodes[K]);
      LoopSplit Split = Sol.Splits[K];
      std::optional<OpLoops> L = getOpLoops(N);
      std::vector<Attribute> Results;
      for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
        int Layout = LayoutReplicated;
        if (Split.Degree > 1 && L) {
          auto Pos = find(L->Results[R], Split.Loop);
          Layout = Pos != L->Results[R].end() ? int(Pos - L->Results[R].begin())
                                              : LayoutPartial;
        }
        unsigned Rank =
            N.getResult(R) ? N.getResult(R)->getType().getRank() : 0;
        Results.push_back(makeSharding(Layout, Rank, Mesh, Axis));
      }
      if (Results.size() == 1)
        N.getAttrs().set("sharding", Results[0]);
      else if (!Results.empty())
        N.getAttrs().set("sharding", Attribute::getList(Results));
      // Parameters take the layout of their split users.
      for (unsigned Op = 0, E = N.getNumOperands(); Op != E; ++Op) {
        Value *O = N.getOperand(Op);
        if (!O || !O->isParam())
          continue;
        int Layout = LayoutReplicated;
        if (Split.Degree > 1 && L) {
          auto Pos = find(L->Operands[Op], Split.Loop);
          if (Pos != L->Operands[Op].end())
            Layout = int(Pos - L->Operands[Op].begin());
        }
        auto [It, New] = ParamLayouts.insert({O, Layout});
        if (!New && Layout != LayoutReplicated)
          It->second = Layout;
      }
    }
  }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    auto It = ParamLayouts.find(P.get());
    if (It != ParamLayouts.end())
      P->getAttrs().set(
          "sharding",
          makeSharding(It->second, P->getType().getRank(), Mesh, Axis));
  }
}

int autopar::getAnnotatedLayout(const Attribute *A, unsigned Result,
                                StringRef Axis, std::string &Mesh) {
  if (!A)
    return LayoutReplicated;
  if (A->isa(Attribute::Kind::List)) {
    ArrayRef<Attribute> L = A->getList();
    if (Result >= L.size())
      return LayoutReplicated;
    A = &L[Result];
  }
  if (!A->isa(Attribute::Kind::Sharding))
    return LayoutReplicated;
  const Sharding &S = A->getSharding();
  Mesh = S.Mesh;
  if (is_contained(S.PartialAxes, Axis))
    return LayoutPartial;
  for (unsigned D = 0; D != S.DimAxes.size(); ++D)
    if (is_contained(S.DimAxes[D], Axis))
      return int(D);
  return LayoutReplicated;
}

Attribute autopar::makeSharding(int Layout, unsigned Rank, StringRef Mesh,
                                StringRef Axis) {
  Sharding S;
  S.Mesh = Mesh.str();
  S.DimAxes.resize(Rank);
  if (Layout >= 0)
    S.DimAxes[Layout] = {Axis.str()};
  if (Layout == LayoutPartial)
    S.PartialAxes = {Axis.str()};
  return Attribute::getSharding(std::move(S));
}

int autopar::getAnnotatedSplitLoop(const Node &N, const OpLoops &L,
                                   StringRef Axis) {
  std::string Mesh;
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
    int Layout = getAnnotatedLayout(N.getAttr("sharding"), R, Axis, Mesh);
    if (Layout >= 0 && unsigned(Layout) < L.Results[R].size())
      return L.Results[R][Layout];
    if (Layout == LayoutPartial)
      for (unsigned Loop = 0; Loop != L.getNumLoops(); ++Loop)
        if (L.Kinds[Loop] == LoopKind::Reduction &&
            !is_contained(L.Results[R], int(Loop)))
          return int(Loop);
  }
  return OpLoops::NoLoop;
}

LoopSplit autopar::getAnnotatedSplit(const Node &N,
                                     const std::optional<OpLoops> &L,
                                     StringRef Axis) {
  if (!L || !N.getNumResults())
    return {};
  int Loop = getAnnotatedSplitLoop(N, *L, Axis);
  std::string MeshName;
  getAnnotatedLayout(N.getAttr("sharding"), 0, Axis, MeshName);
  const Mesh *M = N.getGraph()->lookupMesh(MeshName);
  std::optional<int64_t> Degree = M ? M->getAxisSize(Axis) : std::nullopt;
  if (Loop == OpLoops::NoLoop || !Degree)
    return {};
  return {Loop, *Degree};
}
