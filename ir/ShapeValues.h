//===- ShapeValues.h - Symbolic values of small integer tensors -*- C++ -*-===//
//
// Exporters compute Reshape and Expand targets at run time from Shape:
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, and torch's expand
// replaces -1 entries with Where(Equal(target, -1), 1, target). To know the
// target's (possibly symbolic) dimensions without running the graph, the
// shape functions evaluate such chains: the value of a 0-D or 1-D integer or
// bool tensor as a list of entries, each an integer (a bool as 0 or 1) or a
// dimension (symbolic or unknown).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_SHAPEVALUES_H
#define AUTOPAR_IR_SHAPEVALUES_H

#include "ir/Types.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace autopar {

class Value;

/// One entry of a shape value: an integer of any sign (Reshape's -1 and 0
/// included), or a dimension that is symbolic or unknown.
struct ShapeEntry {
  std::optional<int64_t> Int;
  Dim Symbolic;

  static ShapeEntry get(int64_t V) { return {V, Dim()}; }
  /// A static dimension becomes an integer entry.
  static ShapeEntry get(const Dim &D) {
    if (D.isStatic())
      return {D.getSize(), Dim()};
    return {std::nullopt, D};
  }
  /// The entry as a dimension: integers >= 0 are static, negative ones and
  /// unknown entries are unknown.
  Dim toDim() const {
    if (Int)
      return *Int >= 0 ? Dim::get(*Int) : Dim();
    return Symbolic;
  }
};

using ShapeValue = llvm::SmallVector<ShapeEntry, 4>;

/// Shape values longer than this are not evaluated.
constexpr unsigned MaxShapeValueEntries = 256;

/// The value of V when V is a 0-D or 1-D i64/i32/bool tensor that evaluation
/// can follow (constants, Shape, Size, ConstantOfShape, Concat, Gather, Slice,
/// Unsqueeze, Squeeze, Reshape, Cast, Identity, Neg, elementwise
/// Add/Sub/Mul/Div, Equal, Less, Greater and Where), else nullopt. Less and
/// Greater are known where both entries are integers. Equal compares entries:
/// equal integers, or the same symbolic dimension, are equal; a symbolic
/// dimension (a size) differs from every negative integer; anything else
/// with a symbolic or unknown entry gives an unknown entry. Where selects
/// entry-wise where the condition's entry is known, else keeps an entry only
/// when both sides have the same one. Cast to bool makes nonzero integers 1.
/// Producers that do not verify are not trusted.
std::optional<ShapeValue> evaluateShapeValue(const Value *V);

} // namespace autopar

#endif // AUTOPAR_IR_SHAPEVALUES_H
