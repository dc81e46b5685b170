//===- ParamInit.cpp - Initial values of parameters without data ----------===//

#include "runtime/ParamInit.h"

#include "ir/Graph.h"
#include "runtime/MeshGroups.h"
#include "weights/TensorBytes.h"
#include "weights/WeightReader.h"

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
  return initParamBytes(Param, Param.getType(), Seed);
}

Expected<std::vector<uint8_t>> autopar::initParamBytes(const Value &Param,
                                                       const TensorType &Ty,
                                                       uint64_t Seed) {
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

/// P's `sharding` when it is a per-rank shard (`local = 1`), else null.
static const Sharding *getLocalSharding(const Value &P) {
  const Attribute *Local = P.getAttrs().get("local");
  const Attribute *S = P.getAttrs().get("sharding");
  if (!Local || !Local->isa(Attribute::Kind::Int) || !Local->getInt() || !S ||
      !S->isa(Attribute::Kind::Sharding))
    return nullptr;
  return &S->getSharding();
}

SmallVector<int64_t, 4> autopar::getShardOrigin(const Value &P, int Rank) {
  const TensorType &Ty = P.getType();
  SmallVector<int64_t, 4> Origin(Ty.getRank(), 0);
  const Sharding *S = getLocalSharding(P);
  const Mesh *M =
      S && P.getGraph() ? P.getGraph()->lookupMesh(S->Mesh) : nullptr;
  if (!M || !Ty.hasStaticShape())
    return Origin;
  SmallVector<int64_t, 4> Coords = getMeshCoordinates(*M, Rank);
  for (unsigned D = 0; D != Origin.size() && D != S->DimAxes.size(); ++D) {
    // The axes split the dimension major to minor.
    int64_t Block = 0;
    for (const std::string &Axis : S->DimAxes[D])
      for (unsigned I = 0; I != M->Axes.size(); ++I)
        if (M->Axes[I].first == Axis)
          Block = Block * M->Axes[I].second + Coords[I];
    Origin[D] = Block * Ty.getDim(D).getSize();
  }
  return Origin;
}

void autopar::copyBlock(ArrayRef<uint8_t> From, ArrayRef<int64_t> FromShape,
                        ArrayRef<int64_t> FromOrigin,
                        MutableArrayRef<uint8_t> To, ArrayRef<int64_t> ToShape,
                        ArrayRef<int64_t> ToOrigin, size_t ElemBytes) {
  // The overlap, in logical coordinates.
  unsigned Rank = FromShape.size();
  SmallVector<int64_t, 4> Lo(Rank), Size(Rank);
  for (unsigned D = 0; D != Rank; ++D) {
    Lo[D] = std::max(FromOrigin[D], ToOrigin[D]);
    int64_t Hi =
        std::min(FromOrigin[D] + FromShape[D], ToOrigin[D] + ToShape[D]);
    if (Hi <= Lo[D])
      return;
    Size[D] = Hi - Lo[D];
  }
  auto FlatIndex = [&](ArrayRef<int64_t> Shape, ArrayRef<int64_t> Origin,
                       ArrayRef<int64_t> At) {
    int64_t Flat = 0;
    for (unsigned D = 0; D != Rank; ++D)
      Flat = Flat * Shape[D] + (At[D] - Origin[D]);
    return Flat;
  };
  // One run along the last dimension at a time.
  size_t RunBytes = (Rank ? Size[Rank - 1] : 1) * ElemBytes;
  SmallVector<int64_t, 4> At(Lo.begin(), Lo.end());
  while (true) {
    std::memcpy(To.data() + FlatIndex(ToShape, ToOrigin, At) * ElemBytes,
                From.data() + FlatIndex(FromShape, FromOrigin, At) * ElemBytes,
                RunBytes);
    int D = int(Rank) - 2;
    for (; D >= 0; --D) {
      if (++At[D] < Lo[D] + Size[D])
        break;
      At[D] = Lo[D];
    }
    if (D < 0)
      return;
  }
}

/// Rank's block of Whole (of type Logical) under P's sharding.
static std::vector<uint8_t> sliceShard(const Value &P,
                                       const TensorType &Logical,
                                       ArrayRef<uint8_t> Whole, int Rank) {
  SmallVector<int64_t, 4> Full = Logical.getStaticSizes();
  SmallVector<int64_t, 4> Local = P.getType().getStaticSizes();
  SmallVector<int64_t, 4> Zero(Full.size(), 0);
  size_t Elem =
      Whole.size() / std::max<int64_t>(1, *Logical.getStaticNumElements());
  std::vector<uint8_t> Out(*P.getType().getStaticSizeInBytes());
  copyBlock(Whole, Full, Zero, Out, Local, getShardOrigin(P, Rank), Elem);
  return Out;
}

Expected<std::vector<uint8_t>>
autopar::loadParamBytes(const Value &P, const ParamSource &Source) {
  TensorType Logical = P.getLogicalType();
  if (!Logical.hasStaticShape() || !Logical.getStaticSizeInBytes())
    return createStringError(inconvertibleErrorCode(),
                             "parameter '" + P.getName() +
                                 "': its logical type " + Logical.str() +
                                 " has no static size");
  std::vector<uint8_t> Whole;
  if (P.getWeightSource() && !Source.RandomInit) {
    Expected<std::vector<uint8_t>> Read = readWeightBytes(P, Source.WeightsDir);
    if (!Read)
      return Read.takeError();
    Whole = std::move(*Read);
  } else {
    Expected<std::vector<uint8_t>> Init =
        initParamBytes(P, Logical, Source.Seed);
    if (!Init)
      return Init.takeError();
    Whole = std::move(*Init);
  }
  const Sharding *S = getLocalSharding(P);
  if (!S || Logical == P.getType())
    return Whole;
  return sliceShard(P, Logical, Whole, Source.Rank);
}
