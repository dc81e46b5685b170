//===- Parser.h - Reads the .air text form ----------------------*- C++ -*-===//
//
// The grammar is in docs/IR.md. The parser builds the graph as written and
// checks only what the grammar and name resolution need (syntax, known ops
// and element types, names defined once and used names defined somewhere);
// everything else, including that a value is defined before its first use,
// is the verifier's job, so that both are testable from text.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_PARSER_H
#define AUTOPAR_IR_PARSER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/Support/SourceMgr.h"

#include <memory>

namespace autopar {

/// Parses the main buffer of SM. Returns null after reporting an error.
std::unique_ptr<Module> parseModule(const llvm::SourceMgr &SM,
                                    DiagnosticEngine &Diag);

} // namespace autopar

#endif // AUTOPAR_IR_PARSER_H
