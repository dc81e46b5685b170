//===- FusionMatch.h - Helpers for fusing decomposed ops -------*- C++ -*-===//
//
// Exporters write normalizations and activations as chains of elementwise
// ops. The fusion passes recognize such a chain and replace it by one
// canonical op. These helpers are what every such matcher needs: reading
// scalar float constants as the exporter rounded them, matching a commutative
// binary node, proving that the matched chain is self-contained (no value in
// it is used outside it), and replacing the chain's root by the fused node so
// that the root's value name and ONNX node name survive.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_FUSIONMATCH_H
#define AUTOPAR_PASSES_FUSIONMATCH_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace autopar {

/// The single element of a floating-point Constant (of any rank whose
/// dimensions are all 1), as stored: already rounded to its element type.
std::optional<double> getFloatScalarConstant(const Value *V);

/// True when V is a single-element float Constant equal to Expected rounded
/// to the constant's element type (so 0.7978846 matches sqrt(2/pi) in f32).
bool isFloatScalarConstant(const Value *V, double Expected);

/// True when V is a single-element Constant, float or integer, equal to N
/// (an exponent: Pow(x, 2.0) and Pow(x, 2) square alike).
bool isExponentConstant(const Value *V, int64_t N);

/// The node defining V when it is a node result of op Op, else null.
Node *getDefiningOp(const Value *V, OpId Op);

/// For a binary node N: the operand that is not Operand (the other one of a
/// pair, or Operand itself for N(Operand, Operand)), or null when Operand is
/// not an operand of N.
Value *getOtherOperand(const Node &N, const Value *Operand);

/// The only node that uses V, when V has exactly one user slot and is not a
/// graph output.
Node *getSingleUser(const Value *V);
inline bool isSingleUse(const Value *V) { return getSingleUser(V); }

/// A matched chain of nodes whose last-added root replaces the chain.
class FusionMatch {
public:
  void add(Node *N) { Nodes.push_back(N); }
  bool contains(const Node *N) const;
  llvm::ArrayRef<Node *> getNodes() const { return Nodes; }

  /// True when every result of every node but Root is used only by nodes of
  /// the match (and is no graph output): then replacing Root leaves the rest
  /// dead, and erasing it changes no other user.
  bool isSelfContained(const Node *Root) const;

  /// Creates Op(Operands){Attrs} before Root with Root's result type, makes
  /// it take over Root's uses, result name and ONNX node name, and erases
  /// the matched nodes, then any Constant operand of theirs left unused.
  /// The match must be self-contained. Returns the new node.
  Node *replace(Node *Root, OpId Op, llvm::ArrayRef<Value *> Operands,
                AttrDict Attrs);

private:
  llvm::SmallVector<Node *, 16> Nodes;
};

} // namespace autopar

#endif // AUTOPAR_PASSES_FUSIONMATCH_H
