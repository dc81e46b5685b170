//===- HeldParams.cpp - The parameters a unit of a model holds ------------===//

#include "cost/HeldParams.h"

#include "ir/Graph.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace autopar;
using namespace llvm;

std::pair<const Value *, int> autopar::traceParam(const Value *V, int Layout) {
  for (unsigned Depth = 0; V && Depth != 8; ++Depth) {
    if (V->isParam())
      return {V, Layout};
    const Node *N = V->getDefiningNode();
    if (!N || N->getNumOperands() < 1)
      return {nullptr, 0};
    if (N->getOp() == OpId::Transpose) {
      const Attribute *A = N->getAttr("perm");
      unsigned Rank = V->getType().getRank();
      if (Layout >= 0) {
        if (A && unsigned(Layout) < A->getIntList().size())
          Layout = int(A->getIntList()[Layout]);
        else
          Layout = int(Rank) - 1 - Layout;
      }
    } else if (N->getOp() != OpId::Identity && N->getOp() != OpId::Cast) {
      return {nullptr, 0};
    }
    V = N->getOperand(0);
  }
  return {nullptr, 0};
}

/// Dimension 0 of parameter P on one rank, when its dimension SplitDim is
/// split Degree ways (-1: none); 0 for a scalar or a dynamic one.
static int64_t getRows(const Value &P, int SplitDim, int64_t Degree) {
  const TensorType &Ty = P.getType();
  if (Ty.getRank() == 0 || !Ty.getDim(0).isStatic())
    return 0;
  int64_t Rows = Ty.getDim(0).getSize();
  return SplitDim == 0 && Degree > 1 ? Rows / Degree : Rows;
}

/// Adds the parameters behind the parameter-derived value V (no
/// activation) to Out, whole, each once: the trained ones when Trained, else
/// the frozen ones.
static void addParamsBehind(const Value *V, const GradientFlow &Flow,
                            bool Trained, SmallPtrSetImpl<const Value *> &Seen,
                            std::vector<HeldParam> &Out) {
  SmallVector<const Value *, 8> Work{V};
  SmallPtrSet<const Value *, 16> Visited;
  while (!Work.empty()) {
    const Value *W = Work.pop_back_val();
    if (!W || Flow.isActivation(W) || !Visited.insert(W).second)
      continue;
    if (W->isParam()) {
      if (Flow.needsGrad(W) == Trained && Seen.insert(W).second)
        Out.push_back({W,
                       double(W->getType().getStaticNumElements().value_or(0)),
                       0, getRows(*W, -1, 1)});
      continue;
    }
    if (const Node *N = W->getDefiningNode())
      for (unsigned I = 0, E = N->getNumOperands(); I != E; ++I)
        Work.push_back(N->getOperand(I));
  }
}

/// The trained parameters Nodes hold when Trained, else the frozen ones.
static std::vector<HeldParam>
collectParams(ArrayRef<const Node *> Nodes,
              function_ref<LoopSplit(unsigned K)> SplitOf,
              const GradientFlow &Flow, bool Trained) {
  std::vector<HeldParam> Out;
  SmallPtrSet<const Value *, 16> Seen;
  for (unsigned K = 0; K != Nodes.size(); ++K) {
    const Node &N = *Nodes[K];
    std::optional<OpLoops> L;
    bool HaveLoops = false;
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
      const Value *O = N.getOperand(I);
      if (!O || Flow.isActivation(O))
        continue;
      const Value *Param = traceParam(O, -1).first;
      if (!Param) {
        size_t Before = Out.size();
        addParamsBehind(O, Flow, Trained, Seen, Out);
        for (size_t J = Before; J != Out.size(); ++J)
          Out[J].FirstReader = K;
        continue;
      }
      if (Flow.needsGrad(Param) != Trained || !Seen.insert(Param).second)
        continue;
      if (!HaveLoops) {
        L = getOpLoops(N);
        HaveLoops = true;
      }
      ArrayRef<int> Map = L ? ArrayRef<int>(L->Operands[I]) : ArrayRef<int>();
      LoopSplit Split = SplitOf(K);
      // The parameter's dimension that the split divides, through views.
      int SplitDim = -1;
      if (Split.Degree > 1)
        for (unsigned D = 0; D != Map.size(); ++D)
          if (Map[D] == Split.Loop) {
            SplitDim = traceParam(O, int(D)).second;
            break;
          }
      Out.push_back({Param, localElements(*O, Map, Split), K,
                     getRows(*Param, SplitDim, Split.Degree),
                     SplitDim == 0 && Split.Degree > 1});
    }
  }
  return Out;
}

std::vector<HeldParam>
autopar::getHeldParams(ArrayRef<const Node *> Nodes,
                       function_ref<LoopSplit(unsigned K)> SplitOf,
                       const GradientFlow &Flow) {
  return collectParams(Nodes, SplitOf, Flow, /*Trained=*/true);
}

std::vector<HeldParam>
autopar::getFrozenParams(ArrayRef<const Node *> Nodes,
                         function_ref<LoopSplit(unsigned K)> SplitOf,
                         const GradientFlow &Flow) {
  return collectParams(Nodes, SplitOf, Flow, /*Trained=*/false);
}

double autopar::getFrozenBytes(const HeldParam &H) {
  return H.Elements *
         (getElementTypeBits(H.Param->getType().getElementType()) / 8.0);
}

double autopar::sumFrozenBytes(ArrayRef<HeldParam> Frozen) {
  double Bytes = 0;
  for (const HeldParam &H : Frozen)
    Bytes += getFrozenBytes(H);
  return Bytes;
}

double autopar::getFrozenParamBytes(ArrayRef<const Node *> Nodes,
                                    function_ref<LoopSplit(unsigned K)> SplitOf,
                                    const GradientFlow &Flow) {
  return sumFrozenBytes(getFrozenParams(Nodes, SplitOf, Flow));
}

double autopar::sumElements(ArrayRef<HeldParam> Held) {
  double Sum = 0;
  for (const HeldParam &H : Held)
    Sum += H.Elements;
  return Sum;
}

double autopar::wholeElements(ArrayRef<HeldParam> Held, unsigned DataParallel) {
  double Sum = 0;
  for (const HeldParam &H : Held)
    if (!H.isShardable(DataParallel))
      Sum += H.Elements;
  return Sum;
}

double autopar::paddingElements(ArrayRef<HeldParam> Held,
                                unsigned DataParallel) {
  double Sum = 0;
  for (const HeldParam &H : Held)
    Sum += H.paddingElements(DataParallel);
  return Sum;
}

SmallVector<double, 16> autopar::getGroupElements(ArrayRef<HeldParam> Held,
                                                  bool ByUse) {
  SmallVector<double, 16> Groups;
  for (size_t I = 0; I != Held.size(); ++I) {
    if (ByUse && I && Held[I].FirstReader == Held[I - 1].FirstReader)
      Groups.back() += Held[I].Elements;
    else
      Groups.push_back(Held[I].Elements);
  }
  return Groups;
}

double autopar::largestNeighbourElements(ArrayRef<HeldParam> Held, bool ByUse) {
  SmallVector<double, 16> Groups = getGroupElements(Held, ByUse);
  double Largest = Groups.empty() ? 0 : Groups.front();
  for (size_t I = 1; I < Groups.size(); ++I)
    Largest = std::max(Largest, Groups[I - 1] + Groups[I]);
  return Largest;
}
