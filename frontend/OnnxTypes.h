//===- OnnxTypes.h - ONNX types in IR terms ---------------------*- C++ -*-===//

#ifndef AUTOPAR_FRONTEND_ONNXTYPES_H
#define AUTOPAR_FRONTEND_ONNXTYPES_H

#include "ir/Attributes.h"
#include "ir/Types.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace onnx {
class AttributeProto;
class TensorProto;
class TypeProto;
} // namespace onnx

namespace autopar {

/// The IR element type of an ONNX TensorProto::DataType, if autopar has one.
std::optional<ElementType> getElementTypeFromOnnx(int32_t DataType);
/// The ONNX TensorProto::DataType of an IR element type.
std::optional<int32_t> getOnnxDataType(ElementType Elem);
/// ONNX's name of a data type, for messages ("INT16").
std::string getOnnxDataTypeName(int32_t DataType);

/// Symbol names are identifiers: other characters become '_'.
std::string makeSymbolName(llvm::StringRef DimParam);

/// The tensor type of an initializer (from its dims and data type).
llvm::Expected<TensorType> getInitializerType(const onnx::TensorProto &T);

/// Tensors read into attributes and constants are small by design; larger
/// ones are weights and become parameters.
constexpr int64_t MaxInlineConstantElements = 1 << 20;

/// The data of a tensor held in the model (raw_data or the typed fields), as
/// a DenseTensor of Type; an error when it has more than MaxElements
/// elements or its data does not have Type's size. External data is not
/// read here.
llvm::Expected<DenseTensor>
readInlineTensor(const onnx::TensorProto &T, const TensorType &Type,
                 int64_t MaxElements = MaxInlineConstantElements);

/// An ONNX attribute as an IR attribute; tensors are read (inline data
/// only). Graph-valued attributes are errors.
llvm::Expected<Attribute> convertAttribute(const onnx::AttributeProto &A);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_ONNXTYPES_H
