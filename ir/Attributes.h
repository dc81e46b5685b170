//===- Attributes.h - Node attributes and annotations -----------*- C++ -*-===//
//
// Attributes are values attached by name to nodes, parameters and inputs: the
// op's own attributes (ONNX's `axis`, `perm`, ...) and the annotations that
// passes attach (`sharding`, `stage`, `layer`, `cost`). Both live in one
// sorted AttrDict and are printed and parsed alike; the verifier checks op
// attributes against the op's schema and annotations against Annotations.def.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_ATTRIBUTES_H
#define AUTOPAR_IR_ATTRIBUTES_H

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace autopar {

class Attribute;

/// A small dense tensor with a static shape. Integer and bool elements are
/// held as int64_t, floating-point elements as double (exact for every
/// element type autopar holds in dense form).
class DenseTensor {
public:
  DenseTensor() = default;
  DenseTensor(TensorType Type, std::vector<int64_t> Ints);
  DenseTensor(TensorType Type, std::vector<double> Floats);

  const TensorType &getType() const { return Type; }
  bool isFloat() const { return isFloatElementType(Type.getElementType()); }
  size_t size() const { return isFloat() ? Floats.size() : Ints.size(); }
  llvm::ArrayRef<int64_t> getInts() const { return Ints; }
  llvm::ArrayRef<double> getFloats() const { return Floats; }

  bool operator==(const DenseTensor &Other) const {
    return Type == Other.Type && Ints == Other.Ints && Floats == Other.Floats;
  }

private:
  TensorType Type;
  std::vector<int64_t> Ints;
  std::vector<double> Floats;
};

/// How a value is laid out over a named device mesh: for each tensor
/// dimension the mesh axes it is split over (major to minor), and the axes
/// over which the value is a partial sum awaiting a reduction.
struct Sharding {
  std::string Mesh;
  std::vector<std::vector<std::string>> DimAxes;
  std::vector<std::string> PartialAxes;

  bool operator==(const Sharding &Other) const {
    return Mesh == Other.Mesh && DimAxes == Other.DimAxes &&
           PartialAxes == Other.PartialAxes;
  }
};

using NamedAttribute = std::pair<std::string, Attribute>;

/// A dictionary of attributes kept sorted by name, so that printing is
/// deterministic whatever order they were added in.
class AttrDict {
public:
  const Attribute *get(llvm::StringRef Name) const;
  /// Inserts or replaces.
  void set(llvm::StringRef Name, Attribute Value);
  /// Returns true if Name was present.
  bool erase(llvm::StringRef Name);
  bool empty() const { return Entries.empty(); }
  size_t size() const { return Entries.size(); }
  auto begin() const { return Entries.begin(); }
  auto end() const { return Entries.end(); }
  bool operator==(const AttrDict &Other) const;

private:
  std::vector<NamedAttribute> Entries;
};

/// A value-semantic attribute.
class Attribute {
public:
  enum class Kind {
    Int,
    Float,
    String,
    Bool,
    IntList,
    FloatList,
    Tensor,
    Sharding,
    List,
    Dict
  };

  Attribute() : Storage(int64_t(0)) {}
  static Attribute getInt(int64_t V) { return Attribute(V); }
  static Attribute getFloat(double V) { return Attribute(V); }
  static Attribute getString(llvm::StringRef V) { return Attribute(V.str()); }
  static Attribute getBool(bool V) { return Attribute(V); }
  static Attribute getIntList(std::vector<int64_t> V) {
    return Attribute(std::move(V));
  }
  static Attribute getFloatList(std::vector<double> V) {
    return Attribute(std::move(V));
  }
  static Attribute getTensor(DenseTensor V) {
    return Attribute(std::make_shared<const DenseTensor>(std::move(V)));
  }
  static Attribute getSharding(Sharding V) {
    return Attribute(std::make_shared<const Sharding>(std::move(V)));
  }
  /// A list of non-numeric attributes (strings, shardings, dicts, ...).
  /// Numeric lists are IntList and FloatList.
  static Attribute getList(std::vector<Attribute> V);
  static Attribute getDict(AttrDict V) {
    return Attribute(std::make_shared<const AttrDict>(std::move(V)));
  }

  Kind getKind() const { return static_cast<Kind>(Storage.index()); }
  bool isa(Kind K) const { return getKind() == K; }

  int64_t getInt() const { return std::get<int64_t>(Storage); }
  double getFloat() const { return std::get<double>(Storage); }
  llvm::StringRef getString() const { return std::get<std::string>(Storage); }
  bool getBool() const { return std::get<bool>(Storage); }
  llvm::ArrayRef<int64_t> getIntList() const {
    return std::get<std::vector<int64_t>>(Storage);
  }
  llvm::ArrayRef<double> getFloatList() const {
    return std::get<std::vector<double>>(Storage);
  }
  const DenseTensor &getTensor() const { return *std::get<TensorPtr>(Storage); }
  const Sharding &getSharding() const {
    return *std::get<ShardingPtr>(Storage);
  }
  llvm::ArrayRef<Attribute> getList() const {
    return std::get<std::vector<Attribute>>(Storage);
  }
  const AttrDict &getDict() const { return *std::get<DictPtr>(Storage); }

  bool operator==(const Attribute &Other) const;
  bool operator!=(const Attribute &Other) const { return !(*this == Other); }

  void print(llvm::raw_ostream &OS) const;

private:
  using TensorPtr = std::shared_ptr<const DenseTensor>;
  using ShardingPtr = std::shared_ptr<const Sharding>;
  using DictPtr = std::shared_ptr<const AttrDict>;
  // The order of the alternatives matches Kind.
  using StorageTy =
      std::variant<int64_t, double, std::string, bool, std::vector<int64_t>,
                   std::vector<double>, TensorPtr, ShardingPtr,
                   std::vector<Attribute>, DictPtr>;

  template <typename T>
  explicit Attribute(T V) : Storage(std::in_place_type<T>, std::move(V)) {}

  StorageTy Storage;
};

/// The name used in diagnostics: "int", "float list", ...
llvm::StringRef getAttributeKindName(Attribute::Kind K);

/// Writes the shortest decimal that reads back as V once rounded to Ty,
/// always with a '.' or exponent so it reads back as a float; `inf`, `-inf`
/// and `nan` for the special values.
void printFloat(llvm::raw_ostream &OS, double V,
                ElementType Ty = ElementType::F64);
/// Rounds V to the nearest value representable in Ty (ties to even). For
/// f8e4m3 (ONNX's FLOAT8E4M3FN, which has no infinities) a magnitude past the
/// largest finite value, 448, rounds to NaN, as ONNX's Cast without
/// saturation does.
double roundToElementType(double V, ElementType Ty);

/// The f8e4m3 (E4M3FN) bits of V, rounded as roundToElementType does.
uint8_t encodeF8E4M3(double V);
/// The value of f8e4m3 (E4M3FN) bits.
double decodeF8E4M3(uint8_t Bits);

/// Writes S as a double-quoted string with escapes.
void printQuotedString(llvm::raw_ostream &OS, llvm::StringRef S);

/// True for names that print bare: [A-Za-z_][A-Za-z0-9_.$]*.
bool isBareIdentifier(llvm::StringRef Name);
/// Writes Name bare when isBareIdentifier allows (or, with AllowDigitStart,
/// when it is made only of identifier characters, as value names like `%0`
/// are), else quoted.
void printName(llvm::raw_ostream &OS, llvm::StringRef Name,
               bool AllowDigitStart = false);

void printAttrDict(llvm::raw_ostream &OS, const AttrDict &Dict);

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS,
                                     const Attribute &A) {
  A.print(OS);
  return OS;
}

} // namespace autopar

#endif // AUTOPAR_IR_ATTRIBUTES_H
