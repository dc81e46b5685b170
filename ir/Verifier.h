//===- Verifier.h - Checks the invariants of graphs -------------*- C++ -*-===//
//
// A graph is valid when: every operand and output is defined before its use
// in node order; each node has the operand and result counts of its op, the
// attributes of its schema (or registered annotations, of the right kinds),
// passes its op's verifier, and declares result types compatible with its
// op's shape function; parameters' data matches their types; shardings name
// a mesh of the graph and its axes, with one entry per dimension.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_VERIFIER_H
#define AUTOPAR_IR_VERIFIER_H

#include "ir/Diagnostics.h"
#include "ir/Types.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace autopar {

class Graph;
class Module;
class Node;

/// Reports every problem found; fails if there was any.
LogicalResult verifyGraph(const Graph &G, DiagnosticEngine &Diag);
LogicalResult verifyModule(const Module &M, DiagnosticEngine &Diag);

/// Checks N on its own (operand and result counts, absent operands,
/// attributes, the op's verifier) and returns the result types its shape
/// function infers; nullopt after calling Report with each problem. Does not
/// compare with the declared result types. Importers use it to type the nodes
/// they create.
std::optional<llvm::SmallVector<TensorType, 1>>
inferNodeResultTypes(const Node &N,
                     llvm::function_ref<void(const llvm::Twine &)> Report);

} // namespace autopar

#endif // AUTOPAR_IR_VERIFIER_H
