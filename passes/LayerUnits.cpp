//===- LayerUnits.cpp - A graph as a sequence of layers to plan -----------===//

#include "passes/LayerUnits.h"

#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

std::string signatureOf(const LayerUnit &U) {
  std::string S;
  raw_string_ostream OS(S);
  DenseMap<const Value *, unsigned> Local;
  for (const Node *N : U.Nodes) {
    OS << N->getOpName() << '(';
    for (const Value *O : N->getOperands()) {
      auto It = O ? Local.find(O) : Local.end();
      if (!O)
        OS << '_';
      else if (It != Local.end())
        OS << 'v' << It->second;
      else
        OS << (O->isParam() ? 'p' : 'x') << O->getType().str();
      OS << ',';
    }
    OS << "){";
    for (const auto &[Name, A] : N->getAttrs())
      if (!lookupAnnotation(Name)) {
        OS << Name << '=';
        A.print(OS);
        OS << ';';
      }
    OS << "}:";
    for (unsigned R = 0, E = N->getNumResults(); R != E; ++R)
      if (const Value *V = N->getResult(R)) {
        unsigned Id = Local.size();
        Local[V] = Id;
        OS << V->getType().str() << ',';
      }
    OS << '\n';
  }
  return OS.str();
}

} // namespace

std::vector<LayerUnit> autopar::getLayerUnits(const Graph &G,
                                              const GradientFlow &Flow) {
  std::map<int64_t, LayerUnit> ByLayer;
  for (const Node &N : G.getNodes()) {
    if (none_of(N.getOperands(),
                [&](const Value *O) { return Flow.isActivation(O); }))
      continue;
    const Attribute *A = N.getAttr("layer");
    int64_t Layer = A && A->isa(Attribute::Kind::Int) ? A->getInt() : -1;
    LayerUnit &U = ByLayer[Layer];
    U.Layer = Layer;
    U.Nodes.push_back(&N);
  }
  std::vector<LayerUnit> Units;
  StringMap<unsigned> Classes;
  for (auto &KV : ByLayer) {
    LayerUnit U = std::move(KV.second);
    U.Signature = signatureOf(U);
    U.Class = Classes.insert({U.Signature, Classes.size()}).first->second;
    Units.push_back(std::move(U));
  }
  return Units;
}
