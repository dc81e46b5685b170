//===- ParamInit.cpp - Initial values of parameters without data ----------===//

#include "runtime/ParamInit.h"

#include "ir/Graph.h"
#include "runtime/MeshGroups.h"
#include "weights/TensorBytes.h"
#include "weights/WeightReader.h"

#include <cmath>
#include <cstring>
#include <optional>

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
  for (unsigned D = 0; D != Origin.size() && D != S->DimAxes.size(); ++D)
    Origin[D] =
        getAxesPart(*M, S->DimAxes[D], Coords).Index * Ty.getDim(D).getSize();
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

/// The finest shape that both A and B are reshapes of by splitting
/// dimensions into factors ([64, 192] and [64, 3, 64]: [64, 3, 64]), or
/// nothing when there is none.
static std::optional<SmallVector<int64_t, 6>>
getCommonRefinement(ArrayRef<int64_t> A, ArrayRef<int64_t> B) {
  SmallVector<int64_t, 6> R;
  size_t I = 0, J = 0;
  int64_t X = A.empty() ? 1 : A[0], Y = B.empty() ? 1 : B[0];
  while (I < A.size() && J < B.size()) {
    int64_t F = std::min(X, Y);
    if (F <= 0 || X % F || Y % F)
      return std::nullopt;
    R.push_back(F);
    X /= F;
    Y /= F;
    if (X == 1 && ++I < A.size())
      X = A[I];
    if (Y == 1 && ++J < B.size())
      Y = B[J];
  }
  if (I < A.size() || J < B.size())
    return std::nullopt;
  return R;
}

/// A block (Shape at Origin) of a tensor viewed as Logical, as a block of
/// the view Fine (a refinement of Logical); false when it is not a box
/// there.
static bool refineBlock(ArrayRef<int64_t> Logical, ArrayRef<int64_t> Fine,
                        ArrayRef<int64_t> Shape, ArrayRef<int64_t> Origin,
                        SmallVectorImpl<int64_t> &OutShape,
                        SmallVectorImpl<int64_t> &OutOrigin) {
  OutShape.assign(Fine.size(), 1);
  OutOrigin.assign(Fine.size(), 0);
  size_t J = 0;
  for (size_t D = 0; D != Logical.size(); ++D) {
    size_t First = J;
    for (int64_t P = 1; P != Logical[D] && J < Fine.size(); ++J)
      P *= Fine[J];
    if (First == J && J < Fine.size() && Logical[D] == 1 && Fine[J] == 1)
      ++J;
    // Fine dimensions [First, J) make up dimension D, outer to inner.
    int64_t O = Origin[D], E = Shape[D], Inner = 1;
    size_t T = J;
    while (T > First && O % (Inner * Fine[T - 1]) == 0 &&
           E % (Inner * Fine[T - 1]) == 0) {
      --T;
      OutShape[T] = Fine[T];
      Inner *= Fine[T];
    }
    if (T == First)
      continue;
    --T;
    int64_t Q = O / Inner, N = E / Inner;
    if (O % Inner || E % Inner || Q % Fine[T] + N > Fine[T])
      return false;
    OutShape[T] = N;
    OutOrigin[T] = Q % Fine[T];
    Q /= Fine[T];
    while (T > First) {
      --T;
      OutOrigin[T] = Q % Fine[T];
      Q /= Fine[T];
    }
  }
  return J == Fine.size();
}

bool autopar::copyBlockBetweenViews(
    ArrayRef<uint8_t> From, ArrayRef<int64_t> FromShape,
    ArrayRef<int64_t> FromOrigin, ArrayRef<int64_t> FromLogical,
    MutableArrayRef<uint8_t> To, ArrayRef<int64_t> ToShape,
    ArrayRef<int64_t> ToOrigin, ArrayRef<int64_t> ToLogical, size_t ElemBytes) {
  if (FromLogical == ToLogical) {
    copyBlock(From, FromShape, FromOrigin, To, ToShape, ToOrigin, ElemBytes);
    return true;
  }
  std::optional<SmallVector<int64_t, 6>> Fine =
      getCommonRefinement(FromLogical, ToLogical);
  SmallVector<int64_t, 6> FS, FO, TS, TO;
  if (!Fine ||
      !refineBlock(FromLogical, *Fine, FromShape, FromOrigin, FS, FO) ||
      !refineBlock(ToLogical, *Fine, ToShape, ToOrigin, TS, TO))
    return false;
  copyBlock(From, FS, FO, To, TS, TO, ElemBytes);
  return true;
}

ShardView autopar::getShardView(const Value &P, int Rank) {
  ShardView V;
  V.Logical = P.getLogicalType().getStaticSizes();
  V.Local = P.getType().getStaticSizes();
  V.Origin = getShardOrigin(P, Rank);
  // A padded shard (logical_rows, passes/InsertGradSync.cpp): the block is
  // its rows inside the logical value; the rest are padding, zeros.
  if (P.getAttrs().get("logical_rows") && !V.Local.empty()) {
    V.Origin[0] = std::min(V.Origin[0], V.Logical[0]);
    V.Local[0] = std::min(V.Local[0], V.Logical[0] - V.Origin[0]);
  }
  const Attribute *Pieces = P.getAttrs().get("pieces");
  int64_t K =
      Pieces && Pieces->isa(Attribute::Kind::Int) ? Pieces->getInt() : 1;
  if (K <= 1 || !getLocalSharding(P))
    return V;
  // The pieces are along the tensor-parallel split: the last split
  // dimension (data parallelism adds dimension 0 only when that is not the
  // pieces', passes/InsertGradSync.cpp).
  for (unsigned D = V.Local.size(); D-- > 0;) {
    if (V.Local[D] == V.Logical[D] || V.Logical[D] % K || V.Local[D] % K)
      continue;
    // [.., n, ..] viewed as [.., K, n / K, ..]: the shard is a block.
    V.Logical[D] /= K;
    V.Logical.insert(V.Logical.begin() + D, K);
    V.Local[D] /= K;
    V.Local.insert(V.Local.begin() + D, K);
    V.Origin[D] /= K;
    V.Origin.insert(V.Origin.begin() + D, 0);
    break;
  }
  return V;
}

/// Rank's block of Whole (of type Logical) under P's sharding.
static std::vector<uint8_t> sliceShard(const Value &P,
                                       const TensorType &Logical,
                                       ArrayRef<uint8_t> Whole, int Rank) {
  ShardView V = getShardView(P, Rank);
  SmallVector<int64_t, 4> Zero(V.Logical.size(), 0);
  size_t Elem =
      Whole.size() / std::max<int64_t>(1, *Logical.getStaticNumElements());
  std::vector<uint8_t> Out(*P.getType().getStaticSizeInBytes());
  copyBlock(Whole, V.Logical, Zero, Out, V.Local, V.Origin, Elem);
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
  // A parameter without data starts from a seeded init only when that is
  // asked for (`--random-init`) or is its nature (optimizer state, `init`):
  // a model whose weights went missing must not train from noise quietly.
  if (Source.RequireData && !P.getWeightSource() && !Source.RandomInit &&
      !P.getAttrs().get("init"))
    return createStringError(
        inconvertibleErrorCode(),
        "parameter '" + P.getName() +
            "' has no data (the program records none for it); pass "
            "--random-init to train from a seeded random initialisation");
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
