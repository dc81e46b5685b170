//===- OnnxTypes.cpp - ONNX types, tensors and attributes in IR terms -----===//

#include "frontend/OnnxTypes.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MathExtras.h"

#include <cstdlib>
#include <cstring>

using namespace autopar;
using namespace llvm;

/// Tensors read into attributes and constants are small by design; larger
/// ones are weights and become parameters.
static constexpr int64_t MaxInlineElements = 1 << 20;

std::optional<ElementType> autopar::getElementTypeFromOnnx(int32_t DataType) {
  switch (DataType) {
  case onnx::TensorProto::FLOAT:
    return ElementType::F32;
  case onnx::TensorProto::DOUBLE:
    return ElementType::F64;
  case onnx::TensorProto::FLOAT16:
    return ElementType::F16;
  case onnx::TensorProto::BFLOAT16:
    return ElementType::BF16;
  case 17: // FLOAT8E4M3FN, newer than libonnx 1.12's enum.
    return ElementType::F8E4M3;
  case onnx::TensorProto::INT64:
    return ElementType::I64;
  case onnx::TensorProto::INT32:
    return ElementType::I32;
  case onnx::TensorProto::INT8:
    return ElementType::I8;
  case onnx::TensorProto::UINT8:
    return ElementType::U8;
  case onnx::TensorProto::BOOL:
    return ElementType::Bool;
  default:
    return std::nullopt;
  }
}

std::string autopar::getOnnxDataTypeName(int32_t DataType) {
  if (onnx::TensorProto::DataType_IsValid(DataType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(DataType));
  return "data type " + std::to_string(DataType);
}

std::string autopar::makeSymbolName(StringRef DimParam) {
  std::string Name;
  for (char C : DimParam)
    Name.push_back(isAlnum(C) || C == '_' ? C : '_');
  if (Name.empty() || isDigit(Name[0]))
    Name.insert(Name.begin(), '_');
  return Name;
}

Expected<TensorType> autopar::getInitializerType(const onnx::TensorProto &T) {
  std::optional<ElementType> Elem = getElementTypeFromOnnx(T.data_type());
  if (!Elem)
    return createStringError(inconvertibleErrorCode(),
                             "element type " +
                                 getOnnxDataTypeName(T.data_type()) +
                                 " is not supported");
  SmallVector<Dim, 4> Shape;
  for (int64_t D : T.dims()) {
    if (D < 0)
      return createStringError(inconvertibleErrorCode(), "dimension " +
                                                             std::to_string(D) +
                                                             " is negative");
    Shape.push_back(Dim::get(D));
  }
  TensorType Type(*Elem, Shape);
  if (!Type.getStaticNumElements())
    return createStringError(inconvertibleErrorCode(),
                             "it has too many elements");
  return Type;
}

/// Decodes one little-endian element of Ty from Bytes.
static double decodeFloat(const char *Bytes, ElementType Ty) {
  switch (Ty) {
  case ElementType::F64: {
    uint64_t Bits = support::endian::read64le(Bytes);
    double V;
    std::memcpy(&V, &Bits, sizeof(V));
    return V;
  }
  case ElementType::F32: {
    uint32_t Bits = support::endian::read32le(Bytes);
    float V;
    std::memcpy(&V, &Bits, sizeof(V));
    return V;
  }
  case ElementType::F16:
    return APFloat(APFloat::IEEEhalf(),
                   APInt(16, support::endian::read16le(Bytes)))
        .convertToDouble();
  case ElementType::BF16:
    return APFloat(APFloat::BFloat(),
                   APInt(16, support::endian::read16le(Bytes)))
        .convertToDouble();
  default:
    llvm_unreachable("not a decodable float type");
  }
}

static int64_t decodeInt(const char *Bytes, ElementType Ty) {
  switch (Ty) {
  case ElementType::I64:
    return int64_t(support::endian::read64le(Bytes));
  case ElementType::I32:
    return int32_t(support::endian::read32le(Bytes));
  case ElementType::I8:
    return int8_t(Bytes[0]);
  case ElementType::U8:
    return uint8_t(Bytes[0]);
  case ElementType::Bool:
    return Bytes[0] != 0;
  default:
    llvm_unreachable("not an integer type");
  }
}

Expected<DenseTensor> autopar::readInlineTensor(const onnx::TensorProto &T,
                                                const TensorType &Type) {
  auto Fail = [](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(), Msg.str());
  };
  if (T.data_location() == onnx::TensorProto::EXTERNAL)
    return Fail("its data is external");
  ElementType Elem = Type.getElementType();
  if (Elem == ElementType::F8E4M3)
    return Fail("f8e4m3 constants are not supported");
  int64_t Count = *Type.getStaticNumElements();
  if (Count > MaxInlineElements)
    return Fail("it has " + Twine(Count) +
                " elements; constants are limited "
                "to " +
                Twine(MaxInlineElements));
  bool IsFloat = isFloatElementType(Elem);
  std::vector<int64_t> Ints;
  std::vector<double> Floats;
  if (T.has_raw_data()) {
    const std::string &Raw = T.raw_data();
    size_t Width = getElementTypeBits(Elem) / 8;
    if (Raw.size() != size_t(Count) * Width)
      return Fail("raw_data has " + Twine(Raw.size()) + " bytes; " +
                  Type.str() + " needs " + Twine(Count * Width));
    for (int64_t I = 0; I != Count; ++I) {
      const char *P = Raw.data() + I * Width;
      if (IsFloat)
        Floats.push_back(decodeFloat(P, Elem));
      else
        Ints.push_back(decodeInt(P, Elem));
    }
  } else {
    // The typed fields: f16/bf16 travel as their bits in int32_data.
    switch (Elem) {
    case ElementType::F32:
      Floats.assign(T.float_data().begin(), T.float_data().end());
      break;
    case ElementType::F64:
      Floats.assign(T.double_data().begin(), T.double_data().end());
      break;
    case ElementType::F16:
    case ElementType::BF16:
      for (int32_t Bits : T.int32_data()) {
        char Buf[2];
        support::endian::write16le(Buf, uint16_t(Bits));
        Floats.push_back(decodeFloat(Buf, Elem));
      }
      break;
    case ElementType::I64:
      Ints.assign(T.int64_data().begin(), T.int64_data().end());
      break;
    default:
      for (int32_t V : T.int32_data())
        Ints.push_back(Elem == ElementType::Bool ? V != 0 : V);
      break;
    }
    size_t Got = IsFloat ? Floats.size() : Ints.size();
    if (Got != size_t(Count))
      return Fail("it holds " + Twine(Got) + " values; " + Type.str() +
                  " needs " + Twine(Count));
  }
  if (IsFloat)
    return DenseTensor(Type, std::move(Floats));
  return DenseTensor(Type, std::move(Ints));
}

/// ONNX attribute floats are f32: widen each to the double of its shortest
/// decimal form, so that 1e-5 reads as 1e-05 in the IR and not as
/// 9.999999747378752e-06.
static double widenFloat(float F) {
  std::string Text;
  raw_string_ostream OS(Text);
  printFloat(OS, F, ElementType::F32);
  return std::strtod(OS.str().c_str(), nullptr);
}

Expected<Attribute> autopar::convertAttribute(const onnx::AttributeProto &A) {
  auto Fail = [&](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             ("attribute '" + A.name() + "': " + Msg).str());
  };
  switch (A.type()) {
  case onnx::AttributeProto::INT:
    return Attribute::getInt(A.i());
  case onnx::AttributeProto::FLOAT:
    return Attribute::getFloat(widenFloat(A.f()));
  case onnx::AttributeProto::STRING:
    return Attribute::getString(A.s());
  case onnx::AttributeProto::INTS:
    return Attribute::getIntList(
        std::vector<int64_t>(A.ints().begin(), A.ints().end()));
  case onnx::AttributeProto::FLOATS: {
    std::vector<double> Values;
    for (float F : A.floats())
      Values.push_back(widenFloat(F));
    return Attribute::getFloatList(std::move(Values));
  }
  case onnx::AttributeProto::STRINGS: {
    std::vector<Attribute> Values;
    for (const std::string &S : A.strings())
      Values.push_back(Attribute::getString(S));
    return Attribute::getList(std::move(Values));
  }
  case onnx::AttributeProto::TENSOR: {
    Expected<TensorType> Type = getInitializerType(A.t());
    if (!Type)
      return Fail(toString(Type.takeError()));
    Expected<DenseTensor> Data = readInlineTensor(A.t(), *Type);
    if (!Data)
      return Fail(toString(Data.takeError()));
    return Attribute::getTensor(std::move(*Data));
  }
  default:
    return Fail("attributes of type " +
                onnx::AttributeProto::AttributeType_Name(A.type()) +
                " are not supported");
  }
}
