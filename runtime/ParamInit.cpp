//===- ParamInit.cpp - Initial values of parameters without data ----------===//

#include "runtime/ParamInit.h"

#include "ir/Graph.h"
#include "weights/TensorBytes.h"

#include <cmath>
#include <cstring>

using namespace autopar;
using namespace llvm;

namespace {

/// splitmix64 (Steele, Lea and Flood 2014).
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t Seed) : State(Seed) {}
  uint64_t next() {
    uint64_t Z = (State += 0x9e3779b97f4a7c15ULL);
    Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebULL;
    return Z ^ (Z >> 31);
  }
  /// Uniform in (0, 1].
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }

private:
  uint64_t State;
};

} // namespace

/// FNV-1a of Name, mixed with Seed.
static uint64_t getStreamSeed(StringRef Name, uint64_t Seed) {
  uint64_t H = 0xcbf29ce484222325ULL;
  for (unsigned char C : Name) {
    H ^= C;
    H *= 0x100000001b3ULL;
  }
  return H ^ (Seed * 0x9e3779b97f4a7c15ULL);
}

/// Samples of normal(0, InitStdDev) for Name, as bytes of type Ty.
static std::vector<uint8_t> sampleNormal(StringRef Name, const TensorType &Ty,
                                         uint64_t Seed) {
  int64_t Count = *Ty.getStaticNumElements();
  SplitMix64 Gen(getStreamSeed(Name, Seed));
  std::vector<float> Samples(Count);
  for (int64_t I = 0; I < Count; I += 2) {
    double Radius = std::sqrt(-2 * std::log(Gen.uniform()));
    double Angle = 2 * M_PI * Gen.uniform();
    Samples[I] = float(InitStdDev * Radius * std::cos(Angle));
    if (I + 1 < Count)
      Samples[I + 1] = float(InitStdDev * Radius * std::sin(Angle));
  }
  if (Ty.getElementType() == ElementType::F32) {
    std::vector<uint8_t> Bytes(Count * sizeof(float));
    if (Count)
      std::memcpy(Bytes.data(), Samples.data(), Bytes.size());
    return Bytes;
  }
  return encodeTensorBytes(
      DenseTensor(Ty, std::vector<double>(Samples.begin(), Samples.end())));
}

Expected<std::vector<uint8_t>> autopar::initParamBytes(const Value &Param,
                                                       uint64_t Seed) {
  const TensorType &Ty = Param.getType();
  bool IsFloat = isFloatElementType(Ty.getElementType());
  StringRef Init = IsFloat ? "normal" : "zeros";
  if (const Attribute *A = Param.getAttrs().get("init"))
    if (A->isa(Attribute::Kind::String))
      Init = A->getString();
  auto Fail = [&](const Twine &Message) {
    return createStringError(
        inconvertibleErrorCode(),
        ("parameter '" + Param.getName() + "': " + Message).str());
  };
  if (Init == "zeros")
    return std::vector<uint8_t>(*Ty.getStaticSizeInBytes(), 0);
  if (Init != "normal")
    return Fail("unknown init \"" + Init + "\" (zeros or normal)");
  if (!IsFloat)
    return Fail("init \"normal\" needs a float type, not " + Ty.str());
  return sampleNormal(Param.getName(), Ty, Seed);
}
