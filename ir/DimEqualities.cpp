//===- DimEqualities.cpp - Dimensions a graph assumes equal ---------------===//

#include "ir/DimEqualities.h"

using namespace autopar;
using namespace llvm;

bool autopar::isSingleSymbol(const Dim &D) {
  return D.isSymbolic() && D.getSymbols().size() == 1 &&
         D.getCoefficient() == 1;
}

Dim DimEqualities::resolve(const Dim &D) const {
  if (!D.isSymbolic() || Assumed.empty())
    return D;
  Dim Result = Dim::get(D.getCoefficient());
  for (const std::string &S : D.getSymbols()) {
    auto It = Assumed.find(S);
    Result = Result * (It == Assumed.end() ? Dim::getSymbol(S)
                                           : It->second.Representative);
  }
  return Result;
}

TensorType DimEqualities::resolve(const TensorType &T) const {
  if (Assumed.empty())
    return T;
  SmallVector<Dim, 4> Shape;
  for (const Dim &D : T.getShape())
    Shape.push_back(resolve(D));
  return TensorType(T.getElementType(), Shape);
}

std::optional<Dim> DimEqualities::assume(const Dim &A, const Dim &B,
                                         StringRef Where) {
  Dim RA = resolve(A), RB = resolve(B);
  if (RA.isUnknown() || RB.isUnknown())
    return std::nullopt;
  if (RA == RB)
    return RA;
  if ((!RA.isStatic() && !isSingleSymbol(RA)) ||
      (!RB.isStatic() && !isSingleSymbol(RB)) ||
      (RA.isStatic() && RB.isStatic()))
    return std::nullopt;
  // The static size wins, else the symbol that sorts first.
  bool AWins = RA.isStatic() ||
               (!RB.isStatic() && RA.getSymbols()[0] < RB.getSymbols()[0]);
  const Dim &Winner = AWins ? RA : RB;
  const Dim &Loser = AWins ? RB : RA;
  const std::string &LoserName = Loser.getSymbols()[0];
  for (auto &Entry : Assumed)
    if (Entry.second.Representative == Loser)
      Entry.second.Representative = Winner;
  Assumed[LoserName] = {Winner, Where.str()};
  return Winner;
}
