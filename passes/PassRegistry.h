//===- PassRegistry.h - Finding passes by name ------------------*- C++ -*-===//
//
// The registry holds the passes of Passes.def and any added at run time by
// registerPass (tools use this for test-only passes). Nothing registers
// itself from a static initializer.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PASSREGISTRY_H
#define AUTOPAR_PASSES_PASSREGISTRY_H

#include "passes/Pass.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>

namespace autopar {

struct PassRegistration {
  std::string Argument;
  std::string Description;
  std::function<std::unique_ptr<Pass>()> Create;
};

/// Every registered pass, sorted by argument.
llvm::ArrayRef<PassRegistration> getRegisteredPasses();
const PassRegistration *lookupPass(llvm::StringRef Argument);
/// Adds a pass; its argument must be new.
void registerPass(llvm::StringRef Argument, llvm::StringRef Description,
                  std::function<std::unique_ptr<Pass>()> Create);
/// Writes each pass with its description and options, and each named
/// pipeline, for --help.
void printRegisteredPasses(llvm::raw_ostream &OS);

/// The text of a named pipeline (Pipelines.def), or "" for other names.
llvm::StringRef lookupPipeline(llvm::StringRef Name);

} // namespace autopar

#endif // AUTOPAR_PASSES_PASSREGISTRY_H
