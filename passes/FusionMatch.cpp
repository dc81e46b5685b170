//===- FusionMatch.cpp - Helpers for passes that fuse decomposed ops ------===//

#include "passes/FusionMatch.h"

#include "ir/Attributes.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

std::optional<double> autopar::getFloatScalarConstant(const Value *V) {
  const DenseTensor *T = getConstantValue(V);
  if (!T || !T->isFloat() || T->size() != 1)
    return std::nullopt;
  return T->getFloats()[0];
}

bool autopar::isFloatScalarConstant(const Value *V, double Expected) {
  const DenseTensor *T = getConstantValue(V);
  if (!T || !T->isFloat() || T->size() != 1)
    return false;
  return T->getFloats()[0] ==
         roundToElementType(Expected, T->getType().getElementType());
}

bool autopar::isExponentConstant(const Value *V, int64_t N) {
  const DenseTensor *T = getConstantValue(V);
  if (!T || T->size() != 1)
    return false;
  return T->isFloat() ? T->getFloats()[0] == double(N) : T->getInts()[0] == N;
}

Node *autopar::getDefiningOp(const Value *V, OpId Op) {
  Node *N = V->getDefiningNode();
  return N && N->getOp() == Op ? N : nullptr;
}

Value *autopar::getOtherOperand(const Node &N, const Value *Operand) {
  if (N.getNumOperands() != 2)
    return nullptr;
  if (N.getOperand(0) == Operand)
    return N.getOperand(1);
  if (N.getOperand(1) == Operand)
    return N.getOperand(0);
  return nullptr;
}

Node *autopar::getSingleUser(const Value *V) {
  if (V->getUsers().size() != 1 || V->getNumOutputUses() != 0)
    return nullptr;
  return V->getUsers().front();
}

bool FusionMatch::contains(const Node *N) const {
  return is_contained(Nodes, N);
}

bool FusionMatch::isSelfContained(const Node *Root) const {
  for (const Node *N : Nodes) {
    if (N == Root)
      continue;
    for (Value *R : N->getResults()) {
      if (R->getNumOutputUses() != 0)
        return false;
      if (!all_of(R->getUsers(), [&](const Node *U) { return contains(U); }))
        return false;
    }
  }
  return true;
}

Node *FusionMatch::replace(Node *Root, OpId Op, ArrayRef<Value *> Operands,
                           AttrDict Attrs) {
  assert(contains(Root) && isSelfContained(Root) && "match is not closed");
  Graph &G = *Root->getGraph();
  Value *Old = Root->getResult(0);
  std::string Name = Old->getName().str();
  Node *New = G.createNode(Op, Operands, {Old->getType()}, std::move(Attrs),
                           {G.getUniqueName(Name + ".fused")}, Root);
  New->setName(Root->getName());
  New->setLoc(Root->getLoc());
  Old->replaceAllUsesWith(New->getResult(0));

  // Constants that only the match used become dead with it.
  SmallVector<Node *, 8> Constants;
  for (Node *N : Nodes)
    for (Value *V : N->getOperands())
      if (Node *C = V ? getDefiningOp(V, OpId::Constant) : nullptr)
        if (!contains(C) && !is_contained(Constants, C))
          Constants.push_back(C);

  // Erase users before the values they use; the match is small.
  SmallVector<Node *, 16> Pending(Nodes.begin(), Nodes.end());
  while (!Pending.empty()) {
    auto Dead = [](Node *N) {
      return none_of(N->getResults(), [](Value *R) { return R->hasUses(); });
    };
    auto It = find_if(Pending, Dead);
    assert(It != Pending.end() && "a matched value is used outside the match");
    (*It)->erase();
    Pending.erase(It);
  }
  for (Node *C : Constants)
    if (!C->getResult(0)->hasUses())
      C->erase();
  Nodes.clear();
  G.renameValue(New->getResult(0), Name);
  return New;
}
