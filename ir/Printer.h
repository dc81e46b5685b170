//===- Printer.h - Writes the .air text form --------------------*- C++ -*-===//
//
// The printer writes the canonical text form described in docs/IR.md.
// Parsing its output and printing again gives identical bytes.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_PRINTER_H
#define AUTOPAR_IR_PRINTER_H

#include "llvm/Support/raw_ostream.h"

namespace autopar {

class Graph;
class Module;
class Value;

void printGraph(llvm::raw_ostream &OS, const Graph &G);
void printModule(llvm::raw_ostream &OS, const Module &M);
/// Writes `%name` (quoted when the name needs it).
void printValueRef(llvm::raw_ostream &OS, const Value &V);

} // namespace autopar

#endif // AUTOPAR_IR_PRINTER_H
