//===- TensorBytes.cpp - Tensors as little-endian bytes -------------------===//

#include "weights/TensorBytes.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/ErrorHandling.h"

#include <cstring>

using namespace autopar;
using namespace llvm;
using namespace llvm::support;

/// The IEEE half-precision formats' semantics.
static const fltSemantics &getHalfSemantics(ElementType Ty) {
  return Ty == ElementType::F16 ? APFloat::IEEEhalf() : APFloat::BFloat();
}

static double decodeFloat(const uint8_t *P, ElementType Ty) {
  switch (Ty) {
  case ElementType::F64: {
    uint64_t Bits = endian::read64le(P);
    double V;
    std::memcpy(&V, &Bits, sizeof(V));
    return V;
  }
  case ElementType::F32: {
    uint32_t Bits = endian::read32le(P);
    float V;
    std::memcpy(&V, &Bits, sizeof(V));
    return V;
  }
  case ElementType::F16:
  case ElementType::BF16:
    return APFloat(getHalfSemantics(Ty), APInt(16, endian::read16le(P)))
        .convertToDouble();
  case ElementType::F8E4M3:
    return decodeF8E4M3(P[0]);
  default:
    llvm_unreachable("not a floating-point element type");
  }
}

static int64_t decodeInt(const uint8_t *P, ElementType Ty) {
  switch (Ty) {
  case ElementType::I64:
    return int64_t(endian::read64le(P));
  case ElementType::I32:
    return int32_t(endian::read32le(P));
  case ElementType::I8:
    return int8_t(P[0]);
  case ElementType::U8:
    return P[0];
  case ElementType::Bool:
    return P[0] != 0;
  default:
    llvm_unreachable("not an integer element type");
  }
}

static void encodeFloat(double V, ElementType Ty, uint8_t *P) {
  switch (Ty) {
  case ElementType::F64: {
    uint64_t Bits;
    std::memcpy(&Bits, &V, sizeof(V));
    endian::write64le(P, Bits);
    return;
  }
  case ElementType::F32: {
    float F = float(V);
    uint32_t Bits;
    std::memcpy(&Bits, &F, sizeof(F));
    endian::write32le(P, Bits);
    return;
  }
  case ElementType::F16:
  case ElementType::BF16: {
    APFloat F(V);
    bool LosesInfo;
    F.convert(getHalfSemantics(Ty), APFloat::rmNearestTiesToEven, &LosesInfo);
    endian::write16le(P, uint16_t(F.bitcastToAPInt().getZExtValue()));
    return;
  }
  case ElementType::F8E4M3:
    P[0] = encodeF8E4M3(V);
    return;
  default:
    llvm_unreachable("not a floating-point element type");
  }
}

static void encodeInt(int64_t V, ElementType Ty, uint8_t *P) {
  switch (Ty) {
  case ElementType::I64:
    endian::write64le(P, uint64_t(V));
    return;
  case ElementType::I32:
    endian::write32le(P, uint32_t(V));
    return;
  case ElementType::I8:
  case ElementType::U8:
    P[0] = uint8_t(V);
    return;
  case ElementType::Bool:
    P[0] = V != 0;
    return;
  default:
    llvm_unreachable("not an integer element type");
  }
}

std::vector<uint8_t> autopar::encodeTensorBytes(const DenseTensor &Data) {
  ElementType Ty = Data.getType().getElementType();
  size_t Width = getElementTypeBits(Ty) / 8;
  std::vector<uint8_t> Bytes(Data.size() * Width);
  if (Data.isFloat())
    for (size_t I = 0, E = Data.size(); I != E; ++I)
      encodeFloat(Data.getFloats()[I], Ty, &Bytes[I * Width]);
  else
    for (size_t I = 0, E = Data.size(); I != E; ++I)
      encodeInt(Data.getInts()[I], Ty, &Bytes[I * Width]);
  return Bytes;
}

Expected<DenseTensor> autopar::decodeTensorBytes(ArrayRef<uint8_t> Bytes,
                                                 const TensorType &Type) {
  std::optional<int64_t> Size = Type.getStaticSizeInBytes();
  if (!Size || uint64_t(*Size) != Bytes.size())
    return createStringError(
        inconvertibleErrorCode(), "has %zu bytes; %s needs %s", Bytes.size(),
        Type.str().c_str(), Size ? std::to_string(*Size).c_str() : "more");
  ElementType Ty = Type.getElementType();
  size_t Width = getElementTypeBits(Ty) / 8;
  size_t Count = Bytes.size() / Width;
  if (isFloatElementType(Ty)) {
    std::vector<double> Floats(Count);
    for (size_t I = 0; I != Count; ++I)
      Floats[I] = decodeFloat(&Bytes[I * Width], Ty);
    return DenseTensor(Type, std::move(Floats));
  }
  std::vector<int64_t> Ints(Count);
  for (size_t I = 0; I != Count; ++I)
    Ints[I] = decodeInt(&Bytes[I * Width], Ty);
  return DenseTensor(Type, std::move(Ints));
}
