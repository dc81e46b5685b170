//===- OpRegistry.h - What autopar knows about each op ----------*- C++ -*-===//
//
// The registry is the table in Ops.def, expanded here once. Everything that
// is known per op (arity, attribute schema, verifier, shape function,
// folder) is found from its OpInfo.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_OPREGISTRY_H
#define AUTOPAR_IR_OPREGISTRY_H

#include "ir/Attributes.h"
#include "ir/ShapeValues.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Node;
class Value;

enum class OpId : unsigned {
#define OP(Name, Operands, Results, Attrs, Verify, Infer, Fold) Name,
#include "ir/Ops.def"
};

/// The number of ops in the registry (OpIds are 0 to NumOps - 1).
inline constexpr unsigned NumOps = 0
#define OP(Name, Operands, Results, Attrs, Verify, Infer, Fold) +1
#include "ir/Ops.def"
    ;

/// What a shape function or verifier may ask about the node it looks at.
class ShapeContext {
public:
  explicit ShapeContext(const Node &N) : N(N) {}

  const Node &getNode() const { return N; }
  unsigned getNumOperands() const;
  /// True when operand I is given (not beyond the end, not absent).
  bool hasOperand(unsigned I) const;
  /// The type of a given operand.
  const TensorType &getOperandType(unsigned I) const;
  /// The declared type of result I (what Opaque nodes trust).
  const TensorType &getResultType(unsigned I) const;
  const Attribute *getAttr(llvm::StringRef Name) const;
  int64_t getIntAttr(llvm::StringRef Name, int64_t Default) const;
  /// The value of operand I when a Constant node defines it.
  const DenseTensor *getConstantOperand(unsigned I) const;
  /// The value of a 0-D or 1-D integer operand as dimensions (possibly
  /// symbolic or unknown), when evaluateShapeValue knows it and every entry
  /// is a dimension (no negative integers).
  std::optional<llvm::SmallVector<Dim, 4>> getShapeOperand(unsigned I) const;
  /// The value of such an operand with its integers as they are (Reshape's
  /// -1 and 0), see ShapeValues.h.
  std::optional<ShapeValue> getShapeValue(unsigned I) const;

  /// An error that names the op, for shape functions and verifiers.
  llvm::Error error(const llvm::Twine &Message) const;

private:
  const Node &N;
};

using VerifyFn = llvm::Error (*)(const ShapeContext &);
using InferFn =
    llvm::Expected<llvm::SmallVector<TensorType, 1>> (*)(const ShapeContext &);
/// Operands holds the value of each constant operand and null for the
/// others. Returns nullopt when the node cannot be folded.
using FoldFn = std::optional<llvm::SmallVector<DenseTensor, 1>> (*)(
    const Node &, llvm::ArrayRef<const DenseTensor *> Operands);

/// One operand or result of an op, from the Operands/Results of Ops.def.
struct OperandSpec {
  std::string Name;
  bool Optional;
  bool Variadic;
};

/// One entry of an op's attribute schema.
struct AttrSpec {
  std::string Name;
  Attribute::Kind Kind;
  bool Required;

  /// Whether A has this attribute's kind (`[]`, an empty int list, is also
  /// an empty float list).
  bool accepts(const Attribute &A) const;
};

struct OpInfo {
  llvm::StringRef Name;
  llvm::StringRef OperandsSpec;
  llvm::StringRef ResultsSpec;
  llvm::StringRef AttrSchemaSpec;
  VerifyFn Verify;
  InferFn Infer;
  FoldFn Fold;

  llvm::ArrayRef<OperandSpec> getOperands() const;
  llvm::ArrayRef<OperandSpec> getResults() const;
  /// The spec that describes operand (or result) I; null past the end.
  const OperandSpec *getOperand(unsigned I) const;
  const OperandSpec *getResult(unsigned I) const;
  /// How many operands (results) a node needs at least, and may have at
  /// most (-1: no limit).
  unsigned getMinOperands() const;
  int getMaxOperands() const;
  unsigned getMinResults() const;
  int getMaxResults() const;

  /// The parsed attribute schema.
  llvm::ArrayRef<AttrSpec> getAttrSchema() const;
  const AttrSpec *lookupAttr(llvm::StringRef AttrName) const;
  /// True when the schema has `*`: attributes outside it are allowed.
  bool allowsOtherAttrs() const;
};

/// The value of V when a Constant node defines it, else null.
const DenseTensor *getConstantValue(const Value *V);

/// A Dropout's constant operands: training_mode (ONNX's default without it:
/// inference) and ratio (default 0.5). Drops says whether it drops
/// anything: training mode with a ratio other than 0.
struct DropoutSetting {
  bool Training = false;
  double Ratio = 0.5;
  bool drops() const { return Training && Ratio != 0; }
};
/// Dropout N's setting; nullopt when a given ratio or mode is not a scalar
/// constant.
std::optional<DropoutSetting> getDropoutSetting(const Node &N);
/// An Attention's training-mode dropout ratio (fuse-attention's `dropout`;
/// 0 without one).
double getAttentionDropout(const Node &N);
/// Whether N drops in training: a Dropout whose constant setting drops, an
/// Attention (or AttentionWithProbs) with a `dropout` ratio.
bool dropsInTraining(const Node &N);

/// For ops whose results overwrite operands at run time (the optimizer
/// steps of Ops.def): the operand that result Result replaces.
std::optional<unsigned> getUpdatedOperand(OpId Op, unsigned Result);

/// The values that build the gradient an optimizer step (AdamW, Sgd) reads:
/// its gradient operand and, through the Adds that sum it over
/// micro-batches and the views, concatenations, reductions, splits and
/// casts of its data-parallel synchronization, their operands, recursively
/// (parameters and constants excluded), each once. Empty for other nodes.
llvm::SmallVector<const Value *, 8> getStepGradientTerms(const Node &Step);

const OpInfo &getOpInfo(OpId Op);
std::optional<OpId> lookupOp(llvm::StringRef Name);
/// Every op, in table order.
llvm::ArrayRef<OpInfo> getAllOps();

/// An annotation that passes attach to nodes, inputs and parameters (see
/// Annotations.def).
struct AnnotationInfo {
  llvm::StringRef Name;
  /// The kinds the annotation may take.
  llvm::SmallVector<Attribute::Kind, 2> Kinds;
  llvm::StringRef Description;
};
const AnnotationInfo *lookupAnnotation(llvm::StringRef Name);

} // namespace autopar

#endif // AUTOPAR_IR_OPREGISTRY_H
