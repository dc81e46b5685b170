//===- Printer.cpp - Writes the .air text form ----------------------------===//

#include "ir/Printer.h"
#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

void autopar::printValueRef(raw_ostream &OS, const Value &V) {
  OS << '%';
  printName(OS, V.getName(), /*AllowDigitStart=*/true);
}

static void printTypeAndAttrs(raw_ostream &OS, const Value &V) {
  OS << ": " << V.getType();
  if (!V.getAttrs().empty()) {
    OS << ' ';
    printAttrDict(OS, V.getAttrs());
  }
}

static void printWeightSource(raw_ostream &OS, const WeightSource &S) {
  if (S.SourceKind == WeightSource::Kind::Inline) {
    Attribute::getTensor(*S.Data).print(OS);
    return;
  }
  OS << "external<";
  printQuotedString(OS, S.Location);
  OS << ", offset = " << S.Offset << ", length = " << S.Length << '>';
}

static void printNode(raw_ostream &OS, const Node &N) {
  OS << "  ";
  if (N.getNumResults() != 0) {
    interleaveComma(N.getResults(), OS,
                    [&](const Value *R) { printValueRef(OS, *R); });
    OS << " = ";
  }
  OS << N.getOpName() << '(';
  interleaveComma(N.getOperands(), OS, [&](const Value *V) {
    if (V)
      printValueRef(OS, *V);
    else
      OS << '_';
  });
  OS << ')';
  if (!N.getAttrs().empty()) {
    OS << ' ';
    printAttrDict(OS, N.getAttrs());
  }
  if (N.getNumResults() != 0) {
    OS << " : ";
    interleaveComma(N.getResults(), OS,
                    [&](const Value *R) { OS << R->getType(); });
  }
  if (!N.getName().empty()) {
    OS << " loc(";
    printQuotedString(OS, N.getName());
    OS << ')';
  }
  OS << '\n';
}

void autopar::printGraph(raw_ostream &OS, const Graph &G) {
  OS << "graph @";
  printName(OS, G.getName(), /*AllowDigitStart=*/true);
  OS << '(';
  interleaveComma(G.getInputs(), OS, [&](const std::unique_ptr<Value> &V) {
    printValueRef(OS, *V);
    printTypeAndAttrs(OS, *V);
  });
  OS << ") {\n";
  for (const Mesh &M : G.getMeshes()) {
    OS << "  mesh @";
    printName(OS, M.Name, /*AllowDigitStart=*/true);
    OS << " = [";
    interleaveComma(M.Axes, OS, [&](const std::pair<std::string, int64_t> &A) {
      printName(OS, A.first);
      OS << " = " << A.second;
    });
    OS << "]\n";
  }
  for (const auto &[Symbol, A] : G.getDimEqualities().getAssumptions()) {
    OS << "  constraint ";
    printName(OS, Symbol);
    OS << " = " << A.Representative << '\n';
  }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    OS << "  param ";
    printValueRef(OS, *P);
    printTypeAndAttrs(OS, *P);
    if (P->getWeightSource()) {
      OS << " = ";
      printWeightSource(OS, *P->getWeightSource());
    }
    OS << '\n';
  }
  for (const Node &N : G.getNodes())
    printNode(OS, N);
  OS << "  return";
  if (!G.getOutputs().empty()) {
    OS << ' ';
    interleaveComma(G.getOutputs(), OS,
                    [&](const Value *V) { printValueRef(OS, *V); });
  }
  OS << "\n}\n";
}

void autopar::printModule(raw_ostream &OS, const Module &M) {
  // The module's attributes, one per line, then a blank line.
  if (!M.getAttrs().empty()) {
    OS << "module {\n";
    bool FirstAttr = true;
    for (const NamedAttribute &E : M.getAttrs()) {
      OS << (FirstAttr ? "" : ",\n") << "  ";
      FirstAttr = false;
      printName(OS, E.first);
      OS << " = ";
      E.second.print(OS);
    }
    OS << "\n}\n\n";
  }
  bool First = true;
  for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
    if (!First)
      OS << '\n';
    First = false;
    printGraph(OS, *G);
  }
}
