//===- Pass.h - The pass interface and pass options -------------*- C++ -*-===//
//
// A pass transforms a Module in place. Its options are a plain struct with a
// validate() method; the pass binds the struct's fields to option names so
// that pipeline text (`partition-stages{stages=4}`) can set them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PASS_H
#define AUTOPAR_PASSES_PASS_H

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace autopar {

class Graph;
class Module;

/// Binds option names to fields of a pass's options struct.
class PassOptionBinder {
public:
  void bind(llvm::StringRef Name, bool *Field, llvm::StringRef Description);
  void bind(llvm::StringRef Name, int64_t *Field, llvm::StringRef Description);
  void bind(llvm::StringRef Name, double *Field, llvm::StringRef Description);
  void bind(llvm::StringRef Name, std::string *Field,
            llvm::StringRef Description);

  /// Parses Text into the field bound to Name.
  llvm::Error set(llvm::StringRef PassName, llvm::StringRef Name,
                  llvm::StringRef Text);
  /// Writes `{name=value ...}` with the current values, or nothing when the
  /// pass has no options.
  void printValues(llvm::raw_ostream &OS) const;
  /// Writes one line per option: name, type, description.
  void printHelp(llvm::raw_ostream &OS, unsigned Indent) const;

private:
  struct Binding {
    std::string Name;
    std::variant<bool *, int64_t *, double *, std::string *> Field;
    std::string Description;
  };
  std::vector<Binding> Bindings;
};

class Pass {
public:
  virtual ~Pass();

  /// The flag name, as in the registry: `canonicalize`.
  virtual llvm::StringRef getArgument() const = 0;
  /// Transforms M; reports problems through Diag and then returns failure.
  virtual LogicalResult run(Module &M, DiagnosticEngine &Diag) = 0;
  /// Checks the options after they are set from text.
  virtual llvm::Error validateOptions() { return llvm::Error::success(); }

  PassOptionBinder &getOptions() { return Options; }
  const PassOptionBinder &getOptions() const { return Options; }

protected:
  PassOptionBinder Options;
};

/// A pass that rewrites each graph of a module on its own and cannot fail.
class GraphPass : public Pass {
public:
  LogicalResult run(Module &M, DiagnosticEngine &Diag) final;

protected:
  virtual void runOnGraph(Graph &G) = 0;
};

} // namespace autopar

#endif // AUTOPAR_PASSES_PASS_H
