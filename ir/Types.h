//===- Types.h - Element types, dimensions and tensor types ----*- C++ -*-===//
//
// A TensorType is an element type and a shape. Each dimension of a shape is
// static (a non-negative integer), symbolic, or unknown. A symbolic dimension
// is a monomial: a positive integer coefficient times a product of named
// symbols, e.g. `batch`, `2*batch` or `batch*sequence`. Monomials are closed
// under the products and exact quotients that reshapes of transformer
// activations need ([batch, sequence, h] -> [batch*sequence, h]).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_TYPES_H
#define AUTOPAR_IR_TYPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace autopar {

enum class ElementType : uint8_t {
#define ELEMENT_TYPE(Enum, Spelling, Bits, IsFloat) Enum,
#include "ir/ElementTypes.def"
};

/// The spelling used in the text form, e.g. "bf16".
llvm::StringRef getElementTypeName(ElementType Ty);
/// Parses a spelling produced by getElementTypeName.
std::optional<ElementType> parseElementTypeName(llvm::StringRef Name);
/// Storage size of one element in bits (bool is 8).
unsigned getElementTypeBits(ElementType Ty);
bool isFloatElementType(ElementType Ty);

/// One dimension of a shape: static, symbolic (a monomial), or unknown.
class Dim {
public:
  /// An unknown dimension, printed `?`.
  Dim() = default;
  /// A static dimension.
  static Dim get(int64_t Size);
  /// A symbolic dimension that is exactly the symbol Name.
  static Dim getSymbol(llvm::StringRef Name);
  static Dim getUnknown() { return Dim(); }

  bool isUnknown() const { return Kind == Unknown; }
  bool isStatic() const { return Kind == Known && Symbols.empty(); }
  bool isSymbolic() const { return Kind == Known && !Symbols.empty(); }
  /// The size of a static dimension; asserts isStatic().
  int64_t getSize() const;
  /// The coefficient of a known dimension (its size when static).
  int64_t getCoefficient() const { return Coefficient; }
  /// The sorted symbol names of a symbolic dimension.
  llvm::ArrayRef<std::string> getSymbols() const { return Symbols; }

  /// Product of two dimensions; unknown if either is unknown.
  Dim operator*(const Dim &Other) const;
  /// Exact quotient, or nullopt when Other does not divide this (or either
  /// is unknown, or Other is zero).
  std::optional<Dim> divide(const Dim &Other) const;

  bool operator==(const Dim &Other) const;
  bool operator!=(const Dim &Other) const { return !(*this == Other); }

  /// Writes `?`, `64`, `batch`, `2*batch*sequence`.
  void print(llvm::raw_ostream &OS) const;

private:
  enum KindTy : uint8_t { Unknown, Known };
  KindTy Kind = Unknown;
  int64_t Coefficient = 0;
  /// Sorted; a symbol may repeat (batch*batch).
  llvm::SmallVector<std::string, 1> Symbols;
};

/// A ranked tensor type such as `f32[batch, 1024]`; `f32[]` is a scalar.
class TensorType {
public:
  TensorType() = default;
  TensorType(ElementType Elem, llvm::ArrayRef<Dim> Shape)
      : Elem(Elem), Shape(Shape.begin(), Shape.end()) {}
  /// A static shape.
  static TensorType get(ElementType Elem, llvm::ArrayRef<int64_t> Sizes);

  ElementType getElementType() const { return Elem; }
  llvm::ArrayRef<Dim> getShape() const { return Shape; }
  unsigned getRank() const { return Shape.size(); }
  const Dim &getDim(unsigned I) const { return Shape[I]; }
  bool hasStaticShape() const;
  /// The product of all dimensions (a monomial, or unknown, also when the
  /// product overflows int64_t).
  Dim getNumElements() const;
  /// The number of elements of a static shape, or nullopt when the shape is
  /// not static or the count overflows int64_t.
  std::optional<int64_t> getStaticNumElements() const;
  /// The size of dimension I (negative I counts from the end), or nullopt
  /// when I is out of range or the dimension is not static.
  std::optional<int64_t> getStaticDimSize(int64_t I) const;
  /// The size in bytes of a static shape, or nullopt (see above).
  std::optional<int64_t> getStaticSizeInBytes() const;
  /// Sizes of a static shape; asserts hasStaticShape().
  llvm::SmallVector<int64_t, 4> getStaticSizes() const;

  bool operator==(const TensorType &Other) const {
    return Elem == Other.Elem && Shape == Other.Shape;
  }
  bool operator!=(const TensorType &Other) const { return !(*this == Other); }

  void print(llvm::raw_ostream &OS) const;
  std::string str() const;

private:
  ElementType Elem = ElementType::F32;
  llvm::SmallVector<Dim, 4> Shape;
};

/// True when every pair of dimensions may be equal: same element type, same
/// rank, and each pair of dimensions equal or at least one unknown.
bool isCompatible(const TensorType &A, const TensorType &B);

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS, const Dim &D) {
  D.print(OS);
  return OS;
}
inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS,
                                     const TensorType &T) {
  T.print(OS);
  return OS;
}

} // namespace autopar

#endif // AUTOPAR_IR_TYPES_H
