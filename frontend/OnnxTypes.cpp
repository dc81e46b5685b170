//===- OnnxTypes.cpp - ONNX types, tensors and attributes in IR terms -----===//

#include "frontend/OnnxTypes.h"
#include "weights/TensorBytes.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"

#include <cstdlib>
#include <iterator>
#include <utility>

using namespace autopar;
using namespace llvm;

/// The ONNX data type of each IR element type, for both directions.
static constexpr std::pair<ElementType, int32_t> OnnxDataTypes[] = {
    {ElementType::F32, onnx::TensorProto::FLOAT},
    {ElementType::F64, onnx::TensorProto::DOUBLE},
    {ElementType::F16, onnx::TensorProto::FLOAT16},
    {ElementType::BF16, onnx::TensorProto::BFLOAT16},
    {ElementType::F8E4M3, 17}, // FLOAT8E4M3FN, newer than libonnx 1.12's enum.
    {ElementType::I64, onnx::TensorProto::INT64},
    {ElementType::I32, onnx::TensorProto::INT32},
    {ElementType::I8, onnx::TensorProto::INT8},
    {ElementType::U8, onnx::TensorProto::UINT8},
    {ElementType::Bool, onnx::TensorProto::BOOL}};

std::optional<ElementType> autopar::getElementTypeFromOnnx(int32_t DataType) {
  for (const auto &[Elem, Onnx] : OnnxDataTypes)
    if (Onnx == DataType)
      return Elem;
  return std::nullopt;
}

std::optional<int32_t> autopar::getOnnxDataType(ElementType Elem) {
  for (const auto &[E, Onnx] : OnnxDataTypes)
    if (E == Elem)
      return Onnx;
  return std::nullopt;
}

std::string autopar::getOnnxDataTypeName(int32_t DataType) {
  if (onnx::TensorProto::DataType_IsValid(DataType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(DataType));
  // Types newer than Debian's libonnx knows: onnx.proto's TensorProto
  // (IR 9: the float8s; 10: the 4-bit integers; 11: FLOAT4E2M1; 12:
  // FLOAT8E8M0; 13: the 2-bit integers).
  static const char *const Newer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
      "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0", "UINT2",          "INT2"};
  if (DataType >= 17 && DataType < 17 + int32_t(std::size(Newer)))
    return Newer[DataType - 17];
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

Expected<DenseTensor> autopar::readInlineTensor(const onnx::TensorProto &T,
                                                const TensorType &Type,
                                                int64_t MaxElements) {
  auto Fail = [](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(), Msg.str());
  };
  if (T.data_location() == onnx::TensorProto::EXTERNAL)
    return Fail("its data is external");
  ElementType Elem = Type.getElementType();
  int64_t Count = *Type.getStaticNumElements();
  if (Count > MaxElements)
    return Fail("it has " + Twine(Count) + " elements; constants are limited " +
                "to " + Twine(MaxElements));
  if (T.has_raw_data()) {
    const std::string &Raw = T.raw_data();
    Expected<DenseTensor> Data = decodeTensorBytes(
        ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Raw.data()),
                          Raw.size()),
        Type);
    if (!Data)
      return Fail("raw_data " + toString(Data.takeError()));
    return Data;
  }
  // The typed fields; f16, bf16 and f8e4m3 travel as their bits in
  // int32_data.
  int64_t Got = 0;
  switch (Elem) {
  case ElementType::F32:
    Got = T.float_data_size();
    break;
  case ElementType::F64:
    Got = T.double_data_size();
    break;
  case ElementType::I64:
    Got = T.int64_data_size();
    break;
  default:
    Got = T.int32_data_size();
    break;
  }
  if (Got != Count)
    return Fail("it holds " + Twine(Got) + " values; " + Type.str() +
                " needs " + Twine(Count));
  switch (Elem) {
  case ElementType::F32:
    return DenseTensor(Type, std::vector<double>(T.float_data().begin(),
                                                 T.float_data().end()));
  case ElementType::F64:
    return DenseTensor(Type, std::vector<double>(T.double_data().begin(),
                                                 T.double_data().end()));
  case ElementType::I64:
    return DenseTensor(Type, std::vector<int64_t>(T.int64_data().begin(),
                                                  T.int64_data().end()));
  default:
    break;
  }
  // The rest hold each element's bits in an int32: decode them as raw data.
  size_t Width = getElementTypeBits(Elem) / 8;
  std::vector<uint8_t> Bytes(Count * Width);
  for (int64_t I = 0; I != Count; ++I) {
    uint32_t Bits = uint32_t(T.int32_data(I));
    if (Width == 4)
      support::endian::write32le(&Bytes[I * Width], Bits);
    else if (Width == 2)
      support::endian::write16le(&Bytes[I * Width], uint16_t(Bits));
    else
      Bytes[I] = Elem == ElementType::Bool ? Bits != 0 : uint8_t(Bits);
  }
  return cantFail(decodeTensorBytes(Bytes, Type));
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
