//===- Types.cpp - Element types, dimensions and tensor types -------------===//

#include "ir/Types.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cassert>

using namespace autopar;
using namespace llvm;

StringRef autopar::getElementTypeName(ElementType Ty) {
  switch (Ty) {
#define ELEMENT_TYPE(Enum, Spelling, Bits, IsFloat)                            \
  case ElementType::Enum:                                                      \
    return Spelling;
#include "ir/ElementTypes.def"
  }
  llvm_unreachable("unknown element type");
}

std::optional<ElementType> autopar::parseElementTypeName(StringRef Name) {
#define ELEMENT_TYPE(Enum, Spelling, Bits, IsFloat)                            \
  if (Name == Spelling)                                                        \
    return ElementType::Enum;
#include "ir/ElementTypes.def"
  return std::nullopt;
}

unsigned autopar::getElementTypeBits(ElementType Ty) {
  switch (Ty) {
#define ELEMENT_TYPE(Enum, Spelling, Bits, IsFloat)                            \
  case ElementType::Enum:                                                      \
    return Bits;
#include "ir/ElementTypes.def"
  }
  llvm_unreachable("unknown element type");
}

bool autopar::isFloatElementType(ElementType Ty) {
  switch (Ty) {
#define ELEMENT_TYPE(Enum, Spelling, Bits, IsFloat)                            \
  case ElementType::Enum:                                                      \
    return IsFloat;
#include "ir/ElementTypes.def"
  }
  llvm_unreachable("unknown element type");
}

//===----------------------------------------------------------------------===//
// Dim
//===----------------------------------------------------------------------===//

Dim Dim::get(int64_t Size) {
  assert(Size >= 0 && "static dimensions are non-negative");
  Dim D;
  D.Kind = Known;
  D.Coefficient = Size;
  return D;
}

Dim Dim::getSymbol(StringRef Name) {
  assert(!Name.empty() && "symbol names are non-empty");
  Dim D;
  D.Kind = Known;
  D.Coefficient = 1;
  D.Symbols.push_back(Name.str());
  return D;
}

int64_t Dim::getSize() const {
  assert(isStatic() && "getSize on a dimension that is not static");
  return Coefficient;
}

Dim Dim::operator*(const Dim &Other) const {
  if (isUnknown() || Other.isUnknown())
    return Dim();
  int64_t Product;
  if (MulOverflow(Coefficient, Other.Coefficient, Product))
    return Dim();
  if (Product == 0)
    return Dim::get(0);
  Dim D;
  D.Kind = Known;
  D.Coefficient = Product;
  D.Symbols.append(Symbols.begin(), Symbols.end());
  D.Symbols.append(Other.Symbols.begin(), Other.Symbols.end());
  std::sort(D.Symbols.begin(), D.Symbols.end());
  return D;
}

std::optional<Dim> Dim::divide(const Dim &Other) const {
  if (isUnknown() || Other.isUnknown() || Other.Coefficient == 0)
    return std::nullopt;
  if (Coefficient % Other.Coefficient != 0)
    return std::nullopt;
  // Remove Other's symbols from ours; both lists are sorted multisets.
  Dim D;
  D.Kind = Known;
  D.Coefficient = Coefficient / Other.Coefficient;
  size_t J = 0;
  for (const std::string &S : Symbols) {
    if (J < Other.Symbols.size() && Other.Symbols[J] == S) {
      ++J;
      continue;
    }
    D.Symbols.push_back(S);
  }
  if (J != Other.Symbols.size())
    return std::nullopt;
  if (D.Coefficient == 0)
    D.Symbols.clear();
  return D;
}

bool Dim::operator==(const Dim &Other) const {
  return Kind == Other.Kind && Coefficient == Other.Coefficient &&
         Symbols == Other.Symbols;
}

void Dim::print(raw_ostream &OS) const {
  if (isUnknown()) {
    OS << '?';
    return;
  }
  if (Symbols.empty()) {
    OS << Coefficient;
    return;
  }
  bool First = true;
  if (Coefficient != 1) {
    OS << Coefficient;
    First = false;
  }
  for (const std::string &S : Symbols) {
    if (!First)
      OS << '*';
    OS << S;
    First = false;
  }
}

//===----------------------------------------------------------------------===//
// TensorType
//===----------------------------------------------------------------------===//

TensorType TensorType::get(ElementType Elem, ArrayRef<int64_t> Sizes) {
  SmallVector<Dim, 4> Shape;
  for (int64_t S : Sizes)
    Shape.push_back(Dim::get(S));
  return TensorType(Elem, Shape);
}

bool TensorType::hasStaticShape() const {
  return llvm::all_of(Shape, [](const Dim &D) { return D.isStatic(); });
}

Dim TensorType::getNumElements() const {
  Dim N = Dim::get(1);
  for (const Dim &D : Shape)
    N = N * D;
  return N;
}

std::optional<int64_t> TensorType::getStaticNumElements() const {
  Dim N = getNumElements();
  if (!N.isStatic())
    return std::nullopt;
  return N.getSize();
}

std::optional<int64_t> TensorType::getStaticDimSize(int64_t I) const {
  int64_t Rank = getRank();
  if (I < 0)
    I += Rank;
  if (I < 0 || I >= Rank || !getDim(I).isStatic())
    return std::nullopt;
  return getDim(I).getSize();
}

std::optional<int64_t> TensorType::getStaticSizeInBytes() const {
  std::optional<int64_t> N = getStaticNumElements();
  int64_t Bits;
  if (!N || MulOverflow(*N, int64_t(getElementTypeBits(Elem)), Bits))
    return std::nullopt;
  return Bits / 8;
}

SmallVector<int64_t, 4> TensorType::getStaticSizes() const {
  assert(hasStaticShape() && "getStaticSizes on a non-static shape");
  SmallVector<int64_t, 4> Sizes;
  for (const Dim &D : Shape)
    Sizes.push_back(D.getSize());
  return Sizes;
}

void TensorType::print(raw_ostream &OS) const {
  OS << getElementTypeName(Elem) << '[';
  for (unsigned I = 0, E = Shape.size(); I != E; ++I) {
    if (I)
      OS << ", ";
    Shape[I].print(OS);
  }
  OS << ']';
}

std::string TensorType::str() const {
  std::string S;
  raw_string_ostream OS(S);
  print(OS);
  return S;
}

bool autopar::isCompatible(const TensorType &A, const TensorType &B) {
  if (A.getElementType() != B.getElementType() || A.getRank() != B.getRank())
    return false;
  for (unsigned I = 0, E = A.getRank(); I != E; ++I) {
    const Dim &DA = A.getDim(I), &DB = B.getDim(I);
    if (!DA.isUnknown() && !DB.isUnknown() && DA != DB)
      return false;
  }
  return true;
}
