//===- ShardingSolver.cpp - Exact tensor-parallel layout of a layer -------===//
//
// The dynamic program of docs/Planner.md. A state is the frontier: for every
// activation live across the cut, its forward layout, the layouts it has
// been materialized in so far (a value all-reduced once serves every later
// user), and the layouts its users' gradients come back in. A node's
// strategy fixes the layouts it reads, writes and sends gradients in:
//   - an operand that maps the split loop is read split on that dimension,
//     else replicated; its gradient comes back the same way, except that a
//     replicated operand of a split node gets a partial sum (each rank
//     holds its share of the sum over the split loop);
//   - a result that maps the split loop is split, one that does not is a
//     partial sum when the loop is a reduction (else the strategy is
//     invalid);
//   - a parameter that does not map the split loop of a split node is held
//     whole and its gradient is all-reduced once per step.
// When a value's last user is done, its summed gradient is brought back to
// its producer's layout (once for all users). Ties keep the earlier
// strategy (replicated first, then loops in order), so the result is
// deterministic.
//
//===----------------------------------------------------------------------===//

#include "passes/ShardingSolver.h"

#include "cost/ActivationMemory.h"
#include "cost/HeldParams.h"
#include "ir/BackendCapabilities.h"
#include "ir/Graph.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

using namespace autopar;
using namespace llvm;

namespace {

/// Layouts fit a 16-bit mask: R, P and splits of dimensions 0..13.
constexpr int MaxSplitDims = 14;

unsigned layoutBit(int Layout) {
  if (Layout == LayoutReplicated)
    return 1u << 0;
  if (Layout == LayoutPartial)
    return 1u << 1;
  return 1u << (2 + Layout);
}

int layoutOfBit(unsigned Bit) {
  if (Bit == 0)
    return LayoutReplicated;
  if (Bit == 1)
    return LayoutPartial;
  return int(Bit) - 2;
}

/// Memory breaks ties between equally fast strategies: one second per
/// 10^16 bytes, far below any time difference that matters.
constexpr double SecondsPerByte = 1e-16;

struct Breakdown {
  double FwdCompute = 0, BwdCompute = 0, FwdComm = 0, BwdComm = 0;
  double GradSync = 0, Tiebreak = 0;
  unsigned AllReduces = 0, AllGathers = 0, ReduceScatters = 0, AllToAlls = 0;
  /// Where each collective goes, when wanted (the replay of the solution).
  std::vector<PlacedCollective> *Placed = nullptr;

  double total() const {
    return FwdCompute + BwdCompute + FwdComm + BwdComm + GradSync + Tiebreak;
  }
  void count(Collective Kind, unsigned N) {
    switch (Kind) {
    case Collective::AllReduce:
      AllReduces += N;
      break;
    case Collective::ReduceScatter:
      ReduceScatters += N;
      break;
    case Collective::AllGather:
      AllGathers += N;
      break;
    default:
      AllToAlls += N;
      break;
    }
  }
};

/// The node a collective belongs to, and forward or backward.
struct Site {
  unsigned Node;
  bool Backward;
};

struct Entry {
  unsigned Val;
  int8_t Layout;
  uint16_t Avail;
  uint16_t Grad;
};
using Frontier = SmallVector<Entry, 8>;

/// One way to run a node, precomputed.
struct Strategy {
  LoopSplit Split;
  NodeCost Cost;
  /// Per operand: required layout and gradient layout (activations only).
  SmallVector<int, 4> Required, GradLayout;
  SmallVector<int, 2> ResultLayouts;
  double GradSync = 0;
  double Tiebreak = 0;
  double ParamElements = 0;
};

class Solver {
public:
  explicit Solver(const ShardingProblem &P) : P(P) {}
  Expected<ShardingSolution> solve();

private:
  void indexValues();
  void findTokenDims();
  void measureValues();
  void buildStrategies();
  int boundaryFor(const Value *V, int Layout) const;
  std::pair<double, int> reshardCost(unsigned Val, int From, int To) const;
  double reshard(unsigned Val, int From, int To, Breakdown &B, Site At) const;
  /// The cheapest of E's materialized layouts to bring to To: the seconds
  /// and the layout (+infinity when E has none).
  std::pair<double, int> cheapestSource(const Entry &E, int To) const;
  double cheapestReshard(const Entry &E, int To, Breakdown &B, Site At) const;
  void place(Breakdown &B, Site At, unsigned Val, Collective Kind, double Bytes,
             double Seconds, unsigned Count) const;
  void closeGradient(const Entry &E, Breakdown &B, unsigned Reader) const;
  std::optional<Frontier> step(const Frontier &F, unsigned K, unsigned S,
                               Breakdown &B) const;
  Frontier initialFrontier() const;
  void finish(Frontier &F, Breakdown &B) const;
  double lossSeconds(const Entry &E, int Layout, Breakdown &B, Site At) const;
  double conversionBound(const Frontier &A, const Frontier &B,
                         double Limit) const;
  template <typename StateT>
  void pruneConvertible(std::vector<StateT> &States) const;

  const ShardingProblem &P;
  int64_t Degree = 1;
  /// Whether the backend of the cluster's device has the sharded gathers
  /// and the vocabulary-parallel loss (ir/BackendCapabilities.def): without
  /// them no Gather splits its table and the logits reach the loss whole.
  bool VocabParallel = true;
  /// Activation values the problem touches, by id.
  std::vector<const Value *> Values;
  DenseMap<const Value *, unsigned> Ids;
  std::vector<int> Producer; // node index, -1 for live-ins
  std::vector<int> LastUse;  // node index
  std::vector<bool> LiveOut;
  std::vector<uint32_t> TokenDims; // bitmask per value
  std::vector<double> ValueBytes;  // whole tensor, training precision
  /// Per value, the seconds of each resharding collective over the group
  /// (indexed by Collective; all-to-all moves 1/degree of the tensor).
  std::vector<std::array<double, 4>> ReshardSeconds;
  std::vector<std::vector<Strategy>> Strategies;
};

void Solver::indexValues() {
  SmallPtrSet<const Node *, 32> Inside(P.Nodes.begin(), P.Nodes.end());
  auto Add = [&](const Value *V, int Prod) {
    auto [It, New] = Ids.insert({V, Values.size()});
    if (New) {
      Values.push_back(V);
      Producer.push_back(Prod);
      LastUse.push_back(-1);
      LiveOut.push_back(false);
    }
    return It->second;
  };
  for (unsigned K = 0; K != P.Nodes.size(); ++K) {
    const Node &N = *P.Nodes[K];
    for (const Value *O : N.getOperands())
      if (O && P.Flow->isActivation(O))
        LastUse[Add(O, -1)] = K;
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
      const Value *V = N.getResult(R);
      if (!V || !P.Flow->isActivation(V))
        continue;
      unsigned Id = Add(V, K);
      bool Outside = V->getNumOutputUses() != 0;
      for (const Node *U : V->getUsers())
        Outside |= !Inside.count(U);
      LiveOut[Id] = Outside;
    }
  }
}

void Solver::measureValues() {
  for (const Value *V : Values)
    ValueBytes.push_back(
        double(V->getType().getStaticNumElements().value_or(0)) *
        trainingElementBytes(*V, *P.Settings));
  for (double Bytes : ValueBytes) {
    std::array<double, 4> &S = ReshardSeconds.emplace_back();
    for (Collective K : {Collective::AllReduce, Collective::AllGather,
                         Collective::ReduceScatter, Collective::AllToAll})
      S[unsigned(K)] = collectiveSeconds(
          *P.Cl, K, K == Collective::AllToAll ? Bytes / Degree : Bytes,
          P.Group);
  }
}

void Solver::findTokenDims() {
  TokenDims.assign(Values.size(), 0);
  for (unsigned Id = 0; Id != Values.size(); ++Id)
    if (Producer[Id] < 0) {
      unsigned Rank = Values[Id]->getType().getRank();
      TokenDims[Id] = Rank ? ((1u << (Rank - 1)) - 1) : 0;
    }
  for (const Node *N : P.Nodes) {
    std::optional<OpLoops> L = getOpLoops(*N);
    if (!L)
      continue;
    uint64_t TokenLoops = 0;
    for (unsigned I = 0, E = N->getNumOperands(); I != E; ++I) {
      auto It = N->getOperand(I) ? Ids.find(N->getOperand(I)) : Ids.end();
      if (It == Ids.end())
        continue;
      for (unsigned D = 0; D != L->Operands[I].size(); ++D)
        if ((TokenDims[It->second] >> D & 1) &&
            L->Operands[I][D] != OpLoops::NoLoop)
          TokenLoops |= 1ull << L->Operands[I][D];
    }
    for (unsigned R = 0, E = N->getNumResults(); R != E; ++R) {
      auto It = N->getResult(R) ? Ids.find(N->getResult(R)) : Ids.end();
      if (It == Ids.end())
        continue;
      for (unsigned D = 0; D != L->Results[R].size(); ++D)
        if (L->Results[R][D] != OpLoops::NoLoop &&
            (TokenLoops >> L->Results[R][D] & 1))
          TokenDims[It->second] |= 1u << D;
    }
  }
}

void Solver::buildStrategies() {
  Strategies.resize(P.Nodes.size());
  for (unsigned K = 0; K != P.Nodes.size(); ++K) {
    const Node &N = *P.Nodes[K];
    std::optional<OpLoops> L = getOpLoops(N);
    SmallVector<LoopSplit, 4> Splits = {LoopSplit()};
    if (L && Degree > 1) {
      uint64_t TokenLoops = 0;
      for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
        auto It = N.getOperand(I) ? Ids.find(N.getOperand(I)) : Ids.end();
        if (It == Ids.end())
          continue;
        for (unsigned D = 0; D != L->Operands[I].size(); ++D)
          if ((TokenDims[It->second] >> D & 1) &&
              L->Operands[I][D] != OpLoops::NoLoop)
            TokenLoops |= 1ull << L->Operands[I][D];
      }
      for (unsigned Loop = 0; Loop != L->getNumLoops(); ++Loop)
        if (canSplitLoop(N, *L, Loop, Degree) &&
            (P.SplitTokens || !(TokenLoops >> Loop & 1)) &&
            (VocabParallel || N.getOp() != OpId::Gather ||
             L->Kinds[Loop] != LoopKind::Reduction))
          Splits.push_back({int(Loop), Degree});
    }
    for (LoopSplit Split : Splits) {
      Strategy S;
      S.Split = Split;
      bool Valid = true;
      for (unsigned I = 0, E = N.getNumOperands(); I != E && Valid; ++I) {
        const Value *O = N.getOperand(I);
        int Req = LayoutReplicated, Grad = LayoutReplicated;
        if (O && Split.Degree > 1) {
          auto Pos = find(L->Operands[I], Split.Loop);
          if (Pos != L->Operands[I].end()) {
            Req = Grad = int(Pos - L->Operands[I].begin());
            if (Req >= MaxSplitDims)
              Valid = false;
          } else {
            Grad = LayoutPartial;
          }
        }
        S.Required.push_back(Req);
        S.GradLayout.push_back(Grad);
        // Parameters and other values computed once per step.
        if (O && !P.Flow->isActivation(O)) {
          auto [Param, ParamLayout] =
              traceParam(O, Req == LayoutReplicated ? LayoutReplicated : Req);
          auto Pin = Param ? P.PinnedParams.find(Param) : P.PinnedParams.end();
          if (Pin != P.PinnedParams.end() && Pin->second != ParamLayout)
            Valid = false;
          double Elements = localElements(
              *O, L ? ArrayRef<int>(L->Operands[I]) : ArrayRef<int>(), Split);
          double Bytes = trainingElementBytes(*O, *P.Settings);
          S.ParamElements += Elements;
          S.Tiebreak += Elements * Bytes * SecondsPerByte;
          if (Grad == LayoutPartial && P.Flow->needsGrad(O))
            S.GradSync += collectiveSeconds(*P.Cl, Collective::AllReduce,
                                            Elements * Bytes, P.Group) /
                          std::max<int64_t>(P.MicroBatches, 1);
        }
      }
      for (unsigned R = 0, E = N.getNumResults(); R != E && Valid; ++R) {
        int Layout = LayoutReplicated;
        if (Split.Degree > 1 && N.getResult(R)) {
          auto Pos = find(L->Results[R], Split.Loop);
          if (Pos != L->Results[R].end())
            Layout = int(Pos - L->Results[R].begin());
          else if (L->Kinds[Split.Loop] == LoopKind::Reduction)
            Layout = LayoutPartial;
          else
            Valid = false;
          if (Layout >= MaxSplitDims)
            Valid = false;
        }
        S.ResultLayouts.push_back(Layout);
      }
      if (!Valid)
        continue;
      S.Cost = getNodeCost(N, L, Split, P.Cl->Device, *P.Settings, *P.Flow);
      SmallVector<SavedTensor, 4> Saved;
      getSavedTensors(N, L, *P.Flow, *P.Settings, Saved);
      for (const SavedTensor &T : Saved)
        S.Tiebreak += T.bytes(Split) * SecondsPerByte;
      Strategies[K].push_back(std::move(S));
    }
  }
}

int Solver::boundaryFor(const Value *V, int B) const {
  if (B >= 0 &&
      (B >= int(V->getType().getRank()) || !V->getType().getDim(B).isStatic() ||
       V->getType().getDim(B).getSize() % Degree))
    return LayoutReplicated;
  return B;
}

/// The seconds and the collective (a Collective, -1 for none) that bring
/// value Val from layout From to layout To.
std::pair<double, int> Solver::reshardCost(unsigned Val, int From,
                                           int To) const {
  std::optional<Collective> Kind = getReshardCollective(From, To);
  if (!Kind)
    return {0, -1};
  return {ReshardSeconds[Val][unsigned(*Kind)], int(*Kind)};
}

double Solver::reshard(unsigned Val, int From, int To, Breakdown &B,
                       Site At) const {
  auto [Seconds, Kind] = reshardCost(Val, From, To);
  if (Kind < 0)
    return 0;
  B.count(Collective(Kind), 1);
  double Bytes = ValueBytes[Val];
  if (Collective(Kind) == Collective::AllToAll)
    Bytes /= Degree;
  place(B, At, Val, Collective(Kind), Bytes, Seconds, 1);
  return Seconds;
}

void Solver::place(Breakdown &B, Site At, unsigned Val, Collective Kind,
                   double Bytes, double Seconds, unsigned Count) const {
  if (!B.Placed)
    return;
  PlacedCollective C;
  C.Node = At.Node;
  C.Backward = At.Backward;
  C.Kind = Kind;
  C.Count = Count;
  C.Bytes = Bytes;
  C.Seconds = Seconds;
  const Node &N = *P.Nodes[At.Node];
  C.OnResult = Producer[Val] == int(At.Node);
  unsigned Slots = C.OnResult ? N.getNumResults() : N.getNumOperands();
  for (unsigned I = 0; I != Slots; ++I)
    if ((C.OnResult ? N.getResult(I) : N.getOperand(I)) == Values[Val]) {
      C.Index = I;
      break;
    }
  B.Placed->push_back(C);
}

std::pair<double, int> Solver::cheapestSource(const Entry &E, int To) const {
  std::pair<double, int> Best{std::numeric_limits<double>::infinity(),
                              E.Layout};
  for (unsigned Avail = E.Avail; Avail; Avail &= Avail - 1) {
    int From = layoutOfBit(llvm::countTrailingZeros(Avail));
    double C = reshardCost(E.Val, From, To).first;
    if (C < Best.first)
      Best = {C, From};
  }
  return Best;
}

double Solver::cheapestReshard(const Entry &E, int To, Breakdown &B,
                               Site At) const {
  auto [Seconds, From] = cheapestSource(E, To);
  if (std::isinf(Seconds))
    return Seconds;
  return reshard(E.Val, From, To, B, At);
}

/// Brings the summed gradient of E's value back to its layout: at its
/// producer, or at Reader for a layer input.
void Solver::closeGradient(const Entry &E, Breakdown &B,
                           unsigned Reader) const {
  if (!P.Flow->needsGrad(Values[E.Val]))
    return;
  int Target = E.Layout == LayoutPartial ? LayoutReplicated : E.Layout;
  Site At = {Producer[E.Val] >= 0 ? unsigned(Producer[E.Val]) : Reader, true};
  for (unsigned Bit = 0; Bit != 16; ++Bit)
    if (E.Grad >> Bit & 1)
      B.BwdComm += reshard(E.Val, layoutOfBit(Bit), Target, B, At);
}

Frontier Solver::initialFrontier() const {
  Frontier F;
  for (unsigned Id = 0; Id != Values.size(); ++Id)
    if (Producer[Id] < 0) {
      int L = boundaryFor(Values[Id], P.InputLayout);
      F.push_back({Id, int8_t(L), uint16_t(layoutBit(L)), 0});
    }
  return F;
}

std::optional<Frontier> Solver::step(const Frontier &F, unsigned K, unsigned SI,
                                     Breakdown &B) const {
  const Node &N = *P.Nodes[K];
  const Strategy &S = Strategies[K][SI];
  Frontier Out = F;
  auto Find = [&](unsigned Id) -> Entry * {
    for (Entry &E : Out)
      if (E.Val == Id)
        return &E;
    return nullptr;
  };
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    auto It = N.getOperand(I) ? Ids.find(N.getOperand(I)) : Ids.end();
    if (It == Ids.end())
      continue;
    Entry *En = Find(It->second);
    if (!En)
      return std::nullopt;
    // A Shape reads the type, whatever the layout.
    if (readsOnlyShape(N, I))
      continue;
    int Req = S.Required[I];
    if (!(En->Avail & layoutBit(Req))) {
      B.FwdComm += cheapestReshard(*En, Req, B, {K, false});
      En->Avail |= layoutBit(Req);
    }
    En->Grad |= layoutBit(S.GradLayout[I]);
  }
  B.FwdCompute += S.Cost.FwdSeconds;
  B.BwdCompute += S.Cost.BwdSeconds;
  B.GradSync += S.GradSync;
  B.Tiebreak += S.Tiebreak;
  for (unsigned R = 0, E = N.getNumResults(); R != E; ++R) {
    auto It = N.getResult(R) ? Ids.find(N.getResult(R)) : Ids.end();
    if (It == Ids.end() || (LastUse[It->second] < 0 && !LiveOut[It->second]))
      continue;
    int L = S.ResultLayouts[R];
    Out.push_back({It->second, int8_t(L), uint16_t(layoutBit(L)), 0});
  }
  // Values whose last user this was.
  Frontier Kept;
  for (const Entry &E : Out) {
    if (LastUse[E.Val] == int(K) && !LiveOut[E.Val])
      closeGradient(E, B, K);
    else
      Kept.push_back(E);
  }
  llvm::sort(Kept,
             [](const Entry &A, const Entry &B) { return A.Val < B.Val; });
  return Kept;
}

double Solver::lossSeconds(const Entry &E, int Layout, Breakdown &B,
                           Site At) const {
  const Value *V = Values[E.Val];
  unsigned Rank = V->getType().getRank();
  double Elements = double(V->getType().getStaticNumElements().value_or(0));
  double Rows = Rank ? Elements / V->getType().getDim(Rank - 1).getSize() : 1;
  double Local = Layout == LayoutReplicated ? Elements : Elements / Degree;
  // Softmax and its gradient over fp32 logits: read, write, read.
  double Bandwidth = P.Cl->Device.achievableHbmBytesPerSec();
  double Seconds =
      Bandwidth > 0 ? P.Cl->Device.inStepSeconds(3 * 4 * Local / Bandwidth) : 0;
  if (Layout != LayoutReplicated) {
    B.count(Collective::AllReduce, 3);
    double Each =
        collectiveSeconds(*P.Cl, Collective::AllReduce, Rows * 4, P.Group);
    Seconds += 3 * Each;
    place(B, At, E.Val, Collective::AllReduce, Rows * 4, 3 * Each, 3);
  }
  return Seconds;
}

void Solver::finish(Frontier &F, Breakdown &B) const {
  unsigned LastNode = P.Nodes.empty() ? 0 : unsigned(P.Nodes.size()) - 1;
  for (Entry &E : F) {
    if (!LiveOut[E.Val])
      continue;
    const Value *V = Values[E.Val];
    Site At = {Producer[E.Val] >= 0 ? unsigned(Producer[E.Val]) : LastNode,
               false};
    if (P.OutputsFeedLoss && V->getNumOutputUses() && V->getType().getRank()) {
      // Replicated, or split on the vocabulary: whichever is cheaper.
      int Last = int(V->getType().getRank()) - 1;
      Breakdown Rep, Split;
      std::vector<PlacedCollective> RepPlaced, SplitPlaced;
      if (B.Placed) {
        Rep.Placed = &RepPlaced;
        Split.Placed = &SplitPlaced;
      }
      double CostRep = cheapestReshard(E, LayoutReplicated, Rep, At) +
                       lossSeconds(E, LayoutReplicated, Rep, At);
      double CostSplit = std::numeric_limits<double>::infinity();
      if (VocabParallel && Last < MaxSplitDims &&
          V->getType().getDim(Last).isStatic() &&
          V->getType().getDim(Last).getSize() % Degree == 0)
        CostSplit = cheapestReshard(E, Last, Split, At) +
                    lossSeconds(E, Last, Split, At);
      Breakdown &Pick = CostSplit < CostRep ? Split : Rep;
      int Layout = CostSplit < CostRep ? Last : LayoutReplicated;
      B.FwdComm += std::min(CostRep, CostSplit);
      B.AllReduces += Pick.AllReduces;
      B.AllGathers += Pick.AllGathers;
      B.ReduceScatters += Pick.ReduceScatters;
      B.AllToAlls += Pick.AllToAlls;
      if (B.Placed)
        B.Placed->insert(B.Placed->end(), Pick.Placed->begin(),
                         Pick.Placed->end());
      E.Grad |= layoutBit(Layout);
      closeGradient(E, B, LastNode);
      continue;
    }
    int Want = boundaryFor(Values[E.Val], P.OutputLayout);
    if (!(E.Avail & layoutBit(Want)))
      B.FwdComm += cheapestReshard(E, Want, B, At);
    E.Grad |= layoutBit(Want);
    closeGradient(E, B, LastNode);
  }
}

/// The positions of States, cheapest first (ties by position).
template <typename StateT>
std::vector<unsigned> orderByCost(const std::vector<StateT> &States) {
  std::vector<unsigned> Order(States.size());
  for (unsigned I = 0; I != Order.size(); ++I)
    Order[I] = I;
  llvm::stable_sort(Order, [&](unsigned A, unsigned B) {
    return States[A].Cost < States[B].Cost;
  });
  return Order;
}

/// Removes the states marked Dead, keeping the others' order.
template <typename StateT>
void eraseDead(std::vector<StateT> &States, const std::vector<bool> &Dead) {
  unsigned Out = 0;
  for (unsigned I = 0; I != States.size(); ++I)
    if (!Dead[I]) {
      if (Out != I)
        States[Out] = std::move(States[I]);
      ++Out;
    }
  States.resize(Out);
}

/// An upper bound on how much more the cheapest completion from frontier A
/// can cost than the cheapest completion from B (two states of one layer:
/// the same values in the same order), or anything above Limit once the
/// bound exceeds it. Per value: A first materializes the layouts B has and
/// it lacks (after that every forward demand costs A no more than B); A
/// closes the gradient layouts B does not owe; the loss may take A's logits
/// in a layout whose gradient costs more; and when the two bring gradients
/// back to different layouts, any gradient layout may cost A more by the
/// difference of the two reshards.
double Solver::conversionBound(const Frontier &A, const Frontier &B,
                               double Limit) const {
  double Sum = 0;
  for (unsigned I = 0; I != A.size() && Sum <= Limit; ++I) {
    const Entry &EA = A[I], &EB = B[I];
    assert(EA.Val == EB.Val && "states of one layer hold the same values");
    if (EA.Layout == EB.Layout && EA.Avail == EB.Avail && EA.Grad == EB.Grad)
      continue;
    for (unsigned Missing = EB.Avail & ~EA.Avail; Missing;
         Missing &= Missing - 1)
      Sum += cheapestSource(EA, layoutOfBit(llvm::countTrailingZeros(Missing)))
                 .first;
    if (!P.Flow->needsGrad(Values[EA.Val]))
      continue;
    auto Target = [](const Entry &E) {
      return E.Layout == LayoutPartial ? LayoutReplicated : int(E.Layout);
    };
    int TA = Target(EA), TB = Target(EB);
    for (unsigned Extra = EA.Grad & ~EB.Grad; Extra; Extra &= Extra - 1)
      Sum +=
          reshardCost(EA.Val, layoutOfBit(llvm::countTrailingZeros(Extra)), TA)
              .first;
    // The loss takes the logits in the layout that is cheapest forward
    // (finish), which for A may be one whose gradient costs more to bring
    // back than B's choice.
    const Value *V = Values[EA.Val];
    if (LiveOut[EA.Val] && P.OutputsFeedLoss && V->getNumOutputUses() &&
        V->getType().getRank())
      Sum += std::max(
          reshardCost(EA.Val, LayoutReplicated, TA).first,
          VocabParallel
              ? reshardCost(EA.Val, int(V->getType().getRank()) - 1, TA).first
              : 0.0);
    if (TA == TB)
      continue;
    // The layouts a gradient of this value can have: R, P, its dimensions.
    unsigned Rank = Values[EA.Val]->getType().getRank();
    for (unsigned Bit = 0; Bit != std::min(16u, 2 + Rank); ++Bit) {
      int G = layoutOfBit(Bit);
      Sum += std::max(0.0, reshardCost(EA.Val, G, TA).first -
                               reshardCost(EA.Val, G, TB).first);
    }
  }
  return Sum;
}

/// Drops states that one of the layer's cheapest states can turn into for
/// less than their cost difference (conversionBound): such a state cannot
/// lead to a solution as cheap as one through the cheaper state, so this is
/// exact, and the states that remain keep their order (the chosen solution
/// does not change). It keeps wide frontiers (a rotary embedding's slices,
/// an MoE layer's experts side by side) from multiplying their layouts.
template <typename StateT>
void Solver::pruneConvertible(std::vector<StateT> &States) const {
  constexpr unsigned MinStates = 64, Champions = 4;
  if (States.size() < MinStates)
    return;
  std::vector<unsigned> Order = orderByCost(States);
  std::vector<bool> Dead(States.size(), false);
  for (unsigned K = Champions; K < Order.size(); ++K) {
    const StateT &S = States[Order[K]];
    for (unsigned C = 0; C != Champions; ++C) {
      const StateT &Champion = States[Order[C]];
      // A margin far below any difference that matters keeps rounding from
      // dropping a state that ties.
      double Slack = S.Cost * (1 - 1e-12) - Champion.Cost;
      if (Slack <= 0)
        break;
      if (conversionBound(Champion.F, S.F, Slack) < Slack) {
        Dead[Order[K]] = true;
        break;
      }
    }
  }
  eraseDead(States, Dead);
}

/// Keeps the Width cheapest states (ties by position), in their order.
template <typename StateT>
void keepCheapest(std::vector<StateT> &States, size_t Width) {
  std::vector<unsigned> Order = orderByCost(States);
  Order.resize(Width);
  llvm::sort(Order);
  std::vector<StateT> Kept;
  Kept.reserve(Width);
  for (unsigned I : Order)
    Kept.push_back(std::move(States[I]));
  States = std::move(Kept);
}

/// A frontier packed into words, one per live value, for hashing.
using FrontierKey = SmallVector<uint64_t, 8>;

FrontierKey keyOf(const Frontier &F) {
  FrontierKey K;
  for (const Entry &E : F)
    K.push_back(uint64_t(E.Val) << 40 | uint64_t(uint8_t(E.Layout)) << 32 |
                uint64_t(E.Avail) << 16 | uint64_t(E.Grad));
  return K;
}

struct FrontierKeyHash {
  size_t operator()(const FrontierKey &K) const {
    return hash_combine_range(K.begin(), K.end());
  }
};

/// True when every future of B costs at least as much from A's frontier:
/// the same values in the same layouts, at least the layouts B has
/// materialized, at most the gradient layouts B must bring back.
bool dominates(const Frontier &A, const Frontier &B) {
  for (unsigned I = 0; I != A.size(); ++I)
    if ((A[I].Avail & B[I].Avail) != B[I].Avail ||
        (A[I].Grad & B[I].Grad) != A[I].Grad)
      return false;
  return true;
}

/// Drops states another state of the same layouts dominates at no more
/// cost (exact: it cannot lead to a cheaper solution). Keeps order.
template <typename StateT> void pruneDominated(std::vector<StateT> &States) {
  std::unordered_map<FrontierKey, SmallVector<unsigned, 4>, FrontierKeyHash>
      Groups;
  for (unsigned I = 0; I != States.size(); ++I) {
    FrontierKey K;
    for (const Entry &E : States[I].F)
      K.push_back(uint64_t(E.Val) << 8 | uint64_t(uint8_t(E.Layout)));
    Groups[K].push_back(I);
  }
  std::vector<bool> Dead(States.size(), false);
  for (auto &[Key, Members] : Groups) {
    if (Members.size() < 2)
      continue;
    for (unsigned A : Members)
      for (unsigned B : Members)
        if (A != B && !Dead[A] && !Dead[B] &&
            States[A].Cost <= States[B].Cost &&
            dominates(States[A].F, States[B].F))
          Dead[B] = true;
  }
  eraseDead(States, Dead);
}

Expected<ShardingSolution> Solver::solve() {
  Degree = std::max<unsigned>(P.Group.Size, 1);
  VocabParallel = !P.Cl || hasCapability(getPlanBackend(P.Cl->Device.Name),
                                         Capability::VocabParallel);
  indexValues();
  measureValues();
  findTokenDims();
  buildStrategies();

  struct State {
    Frontier F;
    double Cost;
    int Parent;
    unsigned Strategy;
  };
  // A lower bound on the cost of nodes K and after: each one's cheapest
  // strategy, with no communication.
  unsigned NumNodes = P.Nodes.size();
  std::vector<double> RestBound(NumNodes + 1, 0);
  for (unsigned K = NumNodes; K-- > 0;) {
    double Least = std::numeric_limits<double>::infinity();
    for (const Strategy &S : Strategies[K])
      Least = std::min(Least, S.Cost.FwdSeconds + S.Cost.BwdSeconds +
                                  S.GradSync + S.Tiebreak);
    RestBound[K] = RestBound[K + 1] + (std::isinf(Least) ? 0 : Least);
  }

  // The dynamic program over the nodes in order. With a Width, only that
  // many of each layer's cheapest states go on (a beam: a solution, not
  // necessarily the best); with a Bound, states whose cost plus RestBound
  // exceeds it are dropped (exact when Bound is some solution's cost: the
  // best solution's states stay below it, and so do its ties).
  std::vector<std::vector<State>> Layers;
  int Best = -1;
  double BestCost = std::numeric_limits<double>::infinity();
  auto Run = [&](size_t Width, double Bound) -> Error {
    Layers.assign(NumNodes + 1, {});
    Layers[0].push_back({initialFrontier(), 0, -1, 0});
    // Rounding must not drop the best solution's states.
    double Limit = Bound * (1 + 1e-9);
    for (unsigned K = 0; K != NumNodes; ++K) {
      std::unordered_map<FrontierKey, unsigned, FrontierKeyHash> Index;
      std::vector<State> &Next = Layers[K + 1];
      for (unsigned SIdx = 0; SIdx != Layers[K].size(); ++SIdx) {
        const State &St = Layers[K][SIdx];
        for (unsigned Strat = 0; Strat != Strategies[K].size(); ++Strat) {
          Breakdown B;
          std::optional<Frontier> F = step(St.F, K, Strat, B);
          if (!F)
            continue;
          double Cost = St.Cost + B.total();
          if (Cost + RestBound[K + 1] > Limit)
            continue;
          auto [It, New] = Index.try_emplace(keyOf(*F), unsigned(Next.size()));
          if (New)
            Next.push_back({std::move(*F), Cost, int(SIdx), Strat});
          else if (Cost < Next[It->second].Cost)
            Next[It->second] = {std::move(*F), Cost, int(SIdx), Strat};
        }
      }
      if (Next.empty())
        return createStringError(inconvertibleErrorCode(),
                                 "no sharding strategy applies to node " +
                                     Twine(K));
      pruneDominated(Next);
      if (!P.Exhaustive)
        pruneConvertible(Next);
      if (Next.size() > Width)
        keepCheapest(Next, Width);
    }
    // Close the live-outs and pick the best final state.
    Best = -1;
    BestCost = std::numeric_limits<double>::infinity();
    std::vector<State> &Last = Layers.back();
    for (unsigned I = 0; I != Last.size(); ++I) {
      Breakdown B;
      Frontier F = Last[I].F;
      finish(F, B);
      double C = Last[I].Cost + B.total();
      if (C < BestCost) {
        BestCost = C;
        Best = I;
      }
    }
    return Error::success();
  };
  // A narrow beam finds a good solution fast; its cost bounds the exact
  // search, which then skips most states of wide frontiers.
  constexpr size_t BeamWidth = 32;
  constexpr double NoBound = std::numeric_limits<double>::infinity();
  if (!P.Exhaustive)
    if (Error E = Run(BeamWidth, NoBound))
      return E;
  if (Error E = Run(std::numeric_limits<size_t>::max(),
                    P.Exhaustive ? NoBound : BestCost))
    return E;
  // Walk back to the strategies, then replay them for the breakdown.
  std::vector<unsigned> Chosen(P.Nodes.size());
  for (int K = P.Nodes.size(), I = Best; K > 0; --K) {
    Chosen[K - 1] = Layers[K][I].Strategy;
    I = Layers[K][I].Parent;
  }
  ShardingSolution Sol;
  Breakdown Total;
  Total.Placed = &Sol.Collectives;
  Frontier F = initialFrontier();
  for (unsigned K = 0; K != P.Nodes.size(); ++K) {
    const Strategy &S = Strategies[K][Chosen[K]];
    F = *step(F, K, Chosen[K], Total);
    Sol.Splits.push_back(S.Split);
    const Node &N = *P.Nodes[K];
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      if (N.getResult(R))
        Sol.Layouts[N.getResult(R)] = S.ResultLayouts[R];
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
      const Value *O = N.getOperand(I);
      if (O && !P.Flow->isActivation(O)) {
        auto [Param, Layout] = traceParam(O, S.Required[I]);
        if (Param) {
          auto [It, New] = Sol.ParamLayouts.insert({Param, Layout});
          if (!New && Layout != LayoutReplicated)
            It->second = Layout;
        }
      }
    }
  }
  Sol.HeldParams = getHeldParams(
      P.Nodes, [&](unsigned K) { return Sol.Splits[K]; }, *P.Flow);
  Sol.ParamElements = sumElements(Sol.HeldParams);
  Sol.FrozenParams = getFrozenParams(
      P.Nodes, [&](unsigned K) { return Sol.Splits[K]; }, *P.Flow);
  Sol.FrozenBytes = sumFrozenBytes(Sol.FrozenParams);
  finish(F, Total);
  Sol.FwdComputeSeconds = Total.FwdCompute;
  Sol.BwdComputeSeconds = Total.BwdCompute;
  Sol.FwdCommSeconds = Total.FwdComm;
  Sol.BwdCommSeconds = Total.BwdComm;
  Sol.GradSyncSeconds = Total.GradSync;
  Sol.AllReduces = Total.AllReduces;
  Sol.AllGathers = Total.AllGathers;
  Sol.ReduceScatters = Total.ReduceScatters;
  Sol.AllToAlls = Total.AllToAlls;
  for (const PlacedCollective &C : Sol.Collectives)
    (C.Backward ? Sol.BwdCollectiveSeconds
                : Sol.FwdCollectiveSeconds)[unsigned(C.Kind)] += C.Seconds;
  return Sol;
}

} // namespace

const Value *PlacedCollective::getValue(const autopar::Node &At) const {
  if (OnResult)
    return Index < At.getNumResults() ? At.getResult(Index) : nullptr;
  return Index < At.getNumOperands() ? At.getOperand(Index) : nullptr;
}

Expected<ShardingSolution> autopar::solveSharding(const ShardingProblem &P) {
  if (!P.Cl || !P.Settings || !P.Flow)
    return createStringError(inconvertibleErrorCode(),
                             "sharding problem without a cluster, settings "
                             "or gradient flow");
  return Solver(P).solve();
}

std::vector<int> autopar::getBoundaryLayouts(ArrayRef<const Node *> Nodes,
                                             bool SplitTokens) {
  std::vector<int> Out = {LayoutReplicated};
  if (!SplitTokens)
    return Out;
  SmallPtrSet<const Node *, 32> Inside(Nodes.begin(), Nodes.end());
  for (const Node *N : Nodes)
    for (const Value *O : N->getOperands()) {
      if (!O || O->isParam() ||
          (O->getDefiningNode() && Inside.count(O->getDefiningNode())))
        continue;
      unsigned Rank = O->getType().getRank();
      // The sequence: the token dimension next to the hidden one. (The
      // batch could be split too, but equals it in cost and is what data
      // parallelism splits.)
      if (Rank >= 2 && Rank - 2 < unsigned(MaxSplitDims))
        Out.push_back(int(Rank) - 2);
      return Out;
    }
  return Out;
}

std::optional<Collective> autopar::getReshardCollective(int From, int To) {
  if (From == To || To == LayoutPartial || From == LayoutReplicated)
    return std::nullopt;
  if (From == LayoutPartial)
    return To == LayoutReplicated ? Collective::AllReduce
                                  : Collective::ReduceScatter;
  return To == LayoutReplicated ? Collective::AllGather : Collective::AllToAll;
}
