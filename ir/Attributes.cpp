//===- Attributes.cpp - Node attributes and annotations -------------------===//

#include "ir/Attributes.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

using namespace autopar;
using namespace llvm;

DenseTensor::DenseTensor(TensorType Type, std::vector<int64_t> Ints)
    : Type(std::move(Type)), Ints(std::move(Ints)) {
  assert(!isFloat() && "integer data for a floating-point tensor");
}

DenseTensor::DenseTensor(TensorType Type, std::vector<double> Floats)
    : Type(std::move(Type)), Floats(std::move(Floats)) {
  assert(isFloat() && "floating-point data for an integer tensor");
}

//===----------------------------------------------------------------------===//
// AttrDict
//===----------------------------------------------------------------------===//

static auto findEntry(const std::vector<NamedAttribute> &Entries,
                      StringRef Name) {
  return std::lower_bound(
      Entries.begin(), Entries.end(), Name,
      [](const NamedAttribute &E, StringRef N) { return E.first < N; });
}

const Attribute *AttrDict::get(StringRef Name) const {
  auto It = findEntry(Entries, Name);
  if (It == Entries.end() || It->first != Name)
    return nullptr;
  return &It->second;
}

void AttrDict::set(StringRef Name, Attribute Value) {
  auto It = findEntry(Entries, Name);
  if (It != Entries.end() && It->first == Name) {
    Entries[It - Entries.begin()].second = std::move(Value);
    return;
  }
  Entries.insert(It, {Name.str(), std::move(Value)});
}

bool AttrDict::erase(StringRef Name) {
  auto It = findEntry(Entries, Name);
  if (It == Entries.end() || It->first != Name)
    return false;
  Entries.erase(It);
  return true;
}

bool AttrDict::operator==(const AttrDict &Other) const {
  return Entries == Other.Entries;
}

//===----------------------------------------------------------------------===//
// Attribute
//===----------------------------------------------------------------------===//

Attribute Attribute::getList(std::vector<Attribute> V) {
  assert(llvm::none_of(V,
                       [](const Attribute &A) {
                         return A.isa(Kind::Int) || A.isa(Kind::Float);
                       }) &&
         "numeric lists are IntList or FloatList");
  return Attribute(std::move(V));
}

bool Attribute::operator==(const Attribute &Other) const {
  if (getKind() != Other.getKind())
    return false;
  switch (getKind()) {
  case Kind::Tensor:
    return getTensor() == Other.getTensor();
  case Kind::Sharding:
    return getSharding() == Other.getSharding();
  case Kind::Dict:
    return getDict() == Other.getDict();
  default:
    return Storage == Other.Storage;
  }
}

StringRef autopar::getAttributeKindName(Attribute::Kind K) {
  switch (K) {
  case Attribute::Kind::Int:
    return "int";
  case Attribute::Kind::Float:
    return "float";
  case Attribute::Kind::String:
    return "string";
  case Attribute::Kind::Bool:
    return "bool";
  case Attribute::Kind::IntList:
    return "int list";
  case Attribute::Kind::FloatList:
    return "float list";
  case Attribute::Kind::Tensor:
    return "tensor";
  case Attribute::Kind::Sharding:
    return "sharding";
  case Attribute::Kind::List:
    return "list";
  case Attribute::Kind::Dict:
    return "dict";
  }
  llvm_unreachable("unknown attribute kind");
}

//===----------------------------------------------------------------------===//
// Printing helpers
//===----------------------------------------------------------------------===//

static const fltSemantics *getSemantics(ElementType Ty) {
  switch (Ty) {
  case ElementType::F32:
    return &APFloat::IEEEsingle();
  case ElementType::F16:
    return &APFloat::IEEEhalf();
  case ElementType::BF16:
    return &APFloat::BFloat();
  default:
    return nullptr;
  }
}

// E4M3FN: 1 sign, 4 exponent (bias 7) and 3 mantissa bits; exponent 0 holds
// subnormals (m * 2^-9); S.1111.111 is NaN; there are no infinities.
uint8_t autopar::encodeF8E4M3(double V) {
  uint8_t Sign = std::signbit(V) ? 0x80 : 0;
  if (std::isnan(V) || std::isinf(V))
    return Sign | 0x7F;
  double A = std::fabs(V);
  if (A == 0)
    return Sign;
  int Exp;
  std::frexp(A, &Exp);
  // A is in [2^E, 2^(E+1)); below 2^-6 the quantum stays 2^-9.
  int E = std::max(Exp - 1, -6);
  // The significand in units of the quantum 2^(E-3), rounded ties to even.
  double Q = std::nearbyint(std::ldexp(A, 3 - E));
  if (Q >= 16) {
    ++E;
    Q /= 2;
  }
  if (Q < 8) // Subnormal (E is -6).
    return Sign | uint8_t(Q);
  int Field = E + 7, Mantissa = int(Q) - 8;
  if (Field > 15 || (Field == 15 && Mantissa == 7))
    return Sign | 0x7F;
  return Sign | uint8_t(Field << 3) | uint8_t(Mantissa);
}

double autopar::decodeF8E4M3(uint8_t Bits) {
  int Field = (Bits >> 3) & 0xF, Mantissa = Bits & 7;
  double A;
  if (Field == 15 && Mantissa == 7)
    A = std::numeric_limits<double>::quiet_NaN();
  else if (Field == 0)
    A = std::ldexp(Mantissa, -9);
  else
    A = std::ldexp(8 + Mantissa, Field - 10);
  return (Bits & 0x80) ? -A : A;
}

double autopar::roundToElementType(double V, ElementType Ty) {
  if (Ty == ElementType::F8E4M3)
    return decodeF8E4M3(encodeF8E4M3(V));
  const fltSemantics *Sem = getSemantics(Ty);
  if (!Sem)
    return V;
  APFloat F(V);
  bool LosesInfo;
  F.convert(*Sem, APFloat::rmNearestTiesToEven, &LosesInfo);
  F.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &LosesInfo);
  return F.convertToDouble();
}

void autopar::printFloat(raw_ostream &OS, double V, ElementType Ty) {
  if (std::isnan(V)) {
    OS << "nan";
    return;
  }
  if (std::isinf(V)) {
    OS << (V < 0 ? "-inf" : "inf");
    return;
  }
  // The shortest %g form that reads back as the same value of Ty.
  char Buf[40];
  for (int Precision = 1; Precision <= 17; ++Precision) {
    std::snprintf(Buf, sizeof(Buf), "%.*g", Precision, V);
    if (roundToElementType(std::strtod(Buf, nullptr), Ty) == V)
      break;
  }
  StringRef S(Buf);
  OS << S;
  if (S.find_first_of(".e") == StringRef::npos)
    OS << ".0";
}

void autopar::printQuotedString(raw_ostream &OS, StringRef S) {
  OS << '"';
  for (unsigned char C : S) {
    switch (C) {
    case '"':
      OS << "\\\"";
      break;
    case '\\':
      OS << "\\\\";
      break;
    case '\n':
      OS << "\\n";
      break;
    case '\t':
      OS << "\\t";
      break;
    default:
      if (C < 0x20 || C == 0x7f) {
        static const char Hex[] = "0123456789abcdef";
        OS << "\\x" << Hex[C >> 4] << Hex[C & 15];
      } else {
        OS << C;
      }
    }
  }
  OS << '"';
}

static bool isIdentifierChar(char C) {
  return isAlnum(C) || C == '_' || C == '.' || C == '$';
}

bool autopar::isBareIdentifier(StringRef Name) {
  return !Name.empty() && (isAlpha(Name[0]) || Name[0] == '_') &&
         llvm::all_of(Name, isIdentifierChar);
}

void autopar::printName(raw_ostream &OS, StringRef Name, bool AllowDigitStart) {
  if (isBareIdentifier(Name) ||
      (AllowDigitStart && !Name.empty() && isDigit(Name[0]) &&
       llvm::all_of(Name, isIdentifierChar)))
    OS << Name;
  else
    printQuotedString(OS, Name);
}

void autopar::printAttrDict(raw_ostream &OS, const AttrDict &Dict) {
  OS << '{';
  bool First = true;
  for (const NamedAttribute &E : Dict) {
    if (!First)
      OS << ", ";
    First = false;
    printName(OS, E.first);
    OS << " = ";
    E.second.print(OS);
  }
  OS << '}';
}

static void printAxisSet(raw_ostream &OS, ArrayRef<std::string> Axes) {
  OS << '{';
  interleave(
      Axes, OS, [&](const std::string &A) { printName(OS, A); }, ", ");
  OS << '}';
}

void Attribute::print(raw_ostream &OS) const {
  switch (getKind()) {
  case Kind::Int:
    OS << getInt();
    return;
  case Kind::Float:
    printFloat(OS, getFloat());
    return;
  case Kind::String:
    printQuotedString(OS, getString());
    return;
  case Kind::Bool:
    OS << (getBool() ? "true" : "false");
    return;
  case Kind::IntList:
    OS << '[';
    interleaveComma(getIntList(), OS);
    OS << ']';
    return;
  case Kind::FloatList:
    OS << '[';
    interleave(
        getFloatList(), OS, [&](double V) { printFloat(OS, V); }, ", ");
    OS << ']';
    return;
  case Kind::Tensor: {
    const DenseTensor &T = getTensor();
    OS << "dense<" << T.getType() << ", [";
    if (T.isFloat()) {
      ElementType Ty = T.getType().getElementType();
      interleave(
          T.getFloats(), OS, [&](double V) { printFloat(OS, V, Ty); }, ", ");
    } else if (T.getType().getElementType() == ElementType::Bool) {
      interleave(
          T.getInts(), OS, [&](int64_t V) { OS << (V ? "true" : "false"); },
          ", ");
    } else {
      interleaveComma(T.getInts(), OS);
    }
    OS << "]>";
    return;
  }
  case Kind::Sharding: {
    const Sharding &S = getSharding();
    OS << "sharding<@";
    printName(OS, S.Mesh, /*AllowDigitStart=*/true);
    OS << ", [";
    interleave(
        S.DimAxes, OS,
        [&](const std::vector<std::string> &A) { printAxisSet(OS, A); }, ", ");
    OS << ']';
    if (!S.PartialAxes.empty()) {
      OS << ", partial = ";
      printAxisSet(OS, S.PartialAxes);
    }
    OS << '>';
    return;
  }
  case Kind::List:
    OS << '[';
    interleave(
        getList(), OS, [&](const Attribute &A) { A.print(OS); }, ", ");
    OS << ']';
    return;
  case Kind::Dict:
    printAttrDict(OS, getDict());
    return;
  }
  llvm_unreachable("unknown attribute kind");
}
