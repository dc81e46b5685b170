//===- DimEqualities.h - Dimensions a graph assumes equal -------*- C++ -*-===//
//
// ONNX lets two symbolic dimensions meet in a broadcast when they are equal
// at run time (an exported decoder adds a mask of [batch, 1, sequence_length,
// total_sequence_length] to scores of [batch, heads, sequence_length,
// sequence_length] when there is no past), and a symbol meet a static size.
// The importer records each such meeting as an assumption: the symbol equals
// its representative, the static size if there is one, else the symbol that
// sorts first. It then writes every type with representatives only, so that
// the passes see one dimension where the model had two names for it; the
// text form keeps the assumptions as `constraint NAME = REPRESENTATIVE`
// lines, and `--dim` bindings are checked against them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_DIMEQUALITIES_H
#define AUTOPAR_IR_DIMEQUALITIES_H

#include "ir/Types.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <optional>
#include <string>

namespace autopar {

class DimEqualities {
public:
  /// What one symbol is assumed to equal, and where that was first assumed
  /// (a node name; empty when read from text).
  struct Assumption {
    Dim Representative;
    std::string Where;
  };

  /// D with every assumed symbol replaced by its representative.
  Dim resolve(const Dim &D) const;
  TensorType resolve(const TensorType &T) const;
  /// Whether A and B are equal under the assumptions.
  bool areEqual(const Dim &A, const Dim &B) const {
    return !A.isUnknown() && resolve(A) == resolve(B);
  }
  /// Assumes A == B, where each is a single symbol or a static size (not a
  /// product). Returns their representative, or nullopt when they cannot
  /// be assumed equal (two different sizes, a product, an unknown).
  std::optional<Dim> assume(const Dim &A, const Dim &B, llvm::StringRef Where);

  /// The assumed symbols, by name.
  const std::map<std::string, Assumption> &getAssumptions() const {
    return Assumed;
  }
  bool empty() const { return Assumed.empty(); }

  /// Whether broadcasts may add assumptions (while the importer types the
  /// graph); otherwise they only use those made.
  bool isRecording() const { return Recording; }
  void setRecording(bool R) { Recording = R; }

private:
  std::map<std::string, Assumption> Assumed;
  bool Recording = false;
};

/// A single symbol with coefficient 1 (`sequence`), what an assumption may
/// name.
bool isSingleSymbol(const Dim &D);

} // namespace autopar

#endif // AUTOPAR_IR_DIMEQUALITIES_H
