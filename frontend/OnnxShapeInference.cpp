//===- OnnxShapeInference.cpp - ONNX's own inference for unknown ops ------===//

#include "frontend/OnnxShapeInference.h"
#include "frontend/OnnxTypes.h"

#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>
#include <unordered_map>

using namespace autopar;
using namespace llvm;

static std::string getDefaultDomain(StringRef Domain) {
  return Domain == "ai.onnx" ? std::string() : Domain.str();
}

bool autopar::hasOnnxSchema(StringRef Domain, StringRef OpType,
                            int64_t Version) {
  if (Version < 1 || Version > INT32_MAX)
    return false;
  return onnx::OpSchemaRegistry::Schema(OpType.str(), int(Version),
                                        getDefaultDomain(Domain)) != nullptr;
}

/// Adds to Reads the names G reads that it does not define, in first-use
/// order; Defined holds what the enclosing subgraphs define.
static void collectOuterReads(const onnx::GraphProto &G, StringSet<> Defined,
                              std::vector<std::string> &Reads,
                              StringSet<> &Seen) {
  for (const onnx::ValueInfoProto &V : G.input())
    Defined.insert(V.name());
  for (const onnx::TensorProto &T : G.initializer())
    Defined.insert(T.name());
  for (const onnx::NodeProto &N : G.node()) {
    for (const std::string &In : N.input())
      if (!In.empty() && !Defined.count(In) && Seen.insert(In).second)
        Reads.push_back(In);
    for (const onnx::AttributeProto &A : N.attribute()) {
      if (A.has_g())
        collectOuterReads(A.g(), Defined, Reads, Seen);
      for (const onnx::GraphProto &Sub : A.graphs())
        collectOuterReads(Sub, Defined, Reads, Seen);
    }
    for (const std::string &Out : N.output())
      Defined.insert(Out);
  }
}

std::vector<std::string> autopar::getOuterScopeReads(const onnx::NodeProto &N) {
  std::vector<std::string> Reads;
  StringSet<> Seen;
  for (const onnx::AttributeProto &A : N.attribute()) {
    if (A.has_g())
      collectOuterReads(A.g(), {}, Reads, Seen);
    for (const onnx::GraphProto &Sub : A.graphs())
      collectOuterReads(Sub, {}, Reads, Seen);
  }
  return Reads;
}

namespace {

/// Autopar's dimensions as ONNX dimensions and back: a symbolic dimension
/// goes out as a dim_param spelled as autopar prints it and comes back as
/// the same dimension.
class DimTranslator {
public:
  void toOnnx(const Dim &D, onnx::TensorShapeProto::Dimension &Out) {
    if (D.isStatic()) {
      Out.set_dim_value(D.getSize());
    } else if (D.isSymbolic()) {
      std::string Text;
      raw_string_ostream OS(Text);
      D.print(OS);
      Out.set_dim_param(OS.str());
      Params.insert({Out.dim_param(), D});
    }
  }

  Dim fromOnnx(const onnx::TensorShapeProto::Dimension &D) const {
    if (D.has_dim_value())
      return D.dim_value() >= 0 ? Dim::get(D.dim_value()) : Dim();
    if (!D.has_dim_param())
      return Dim();
    auto It = Params.find(D.dim_param());
    // Other parameters are the inference's own names for what it does not
    // know (`unk__0`).
    return It == Params.end() ? Dim() : It->second;
  }

private:
  StringMap<Dim> Params;
};

} // namespace

static void setTensorData(const DenseTensor &Data, int32_t DataType,
                          onnx::TensorProto &T) {
  T.set_data_type(DataType);
  for (const Dim &D : Data.getType().getShape())
    T.add_dims(D.getSize());
  switch (DataType) {
  case onnx::TensorProto::FLOAT:
    for (double F : Data.getFloats())
      T.add_float_data(float(F));
    break;
  case onnx::TensorProto::DOUBLE:
    for (double F : Data.getFloats())
      T.add_double_data(F);
    break;
  case onnx::TensorProto::INT64:
    for (int64_t I : Data.getInts())
      T.add_int64_data(I);
    break;
  default: // int32, int8, uint8 and bool go in int32_data.
    for (int64_t I : Data.getInts())
      T.add_int32_data(int32_t(I));
    break;
  }
}

/// libonnx 1.12's window ops (LpPool, MaxRoiPool, ... through
/// convPoolShapeInference) divide by their strides and dilations unchecked:
/// a zero there is refused before ONNX sees it, so that it is a diagnostic
/// and not a SIGFPE.
static Error checkWindowAttrs(const onnx::NodeProto &N) {
  for (const onnx::AttributeProto &A : N.attribute()) {
    if (A.name() != "strides" && A.name() != "dilations" &&
        A.name() != "kernel_shape")
      continue;
    for (int64_t V : A.ints())
      if (V <= 0)
        return createStringError(inconvertibleErrorCode(),
                                 "attribute '" + A.name() +
                                     "' must hold positive values, got " +
                                     Twine(V));
  }
  return Error::success();
}

/// libonnx 1.12's inference functions that read input dimensions unchecked
/// (each a SIGSEGV found by the importer's fuzzer): STFT's signal
/// (dimensions 0 and 1: a scalar or 1-D signal) and MaxUnpool's indices
/// (dimension 1: indices of rank below 2). The spec's ranks are checked
/// first: the signal is [batch, length, 1 or 2], the indices are int64 of
/// X's shape.
static Error checkInputRanks(const onnx::NodeProto &N,
                             ArrayRef<OnnxInferenceInput> Inputs) {
  auto TypeOf = [&](int I) -> const TensorType * {
    if (I >= N.input_size() || N.input(I).empty())
      return nullptr;
    for (const OnnxInferenceInput &In : Inputs)
      if (In.Name == N.input(I))
        return &In.Type;
    return nullptr;
  };
  auto Fail = [](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(), Msg);
  };
  if (N.op_type() == "STFT")
    if (const TensorType *Signal = TypeOf(0); Signal && Signal->getRank() != 3)
      return Fail("the signal must be [batch, length, 1 or 2], got " +
                  Signal->str());
  if (N.op_type() == "MaxUnpool") {
    const TensorType *X = TypeOf(0), *Indices = TypeOf(1);
    if (X && Indices &&
        (Indices->getRank() != X->getRank() ||
         Indices->getElementType() != ElementType::I64))
      return Fail("the indices must be i64 of the shape of X (" + X->str() +
                  "), got " + Indices->str());
  }
  return Error::success();
}

/// libonnx 1.12's inference functions read their schema's attributes
/// unchecked (Scan's num_scan_inputs and body: a SIGSEGV when a Scan nested
/// in a Loop's body lacked them, found by the importer's fuzzer): N and
/// every node of its subgraphs must have their required attributes, each
/// attribute of the kind its schema declares, and window attributes
/// positive.
static Error
checkAttrsForOnnx(const onnx::NodeProto &N,
                  const std::unordered_map<std::string, int> &Imports) {
  if (Error E = checkWindowAttrs(N))
    return E;
  std::string Domain = getDefaultDomain(N.domain());
  auto Version = Imports.find(Domain);
  const onnx::OpSchema *Schema =
      Version == Imports.end() ? nullptr
                               : onnx::OpSchemaRegistry::Schema(
                                     N.op_type(), Version->second, Domain);
  auto Fail = [&](const Twine &Msg) {
    std::string Where = N.name().empty() ? "" : " '" + N.name() + "'";
    return createStringError(inconvertibleErrorCode(),
                             "node" + Where + " (" + N.op_type() + "): " + Msg);
  };
  if (Schema) {
    for (const auto &[Name, Spec] : Schema->attributes()) {
      const onnx::AttributeProto *Found = nullptr;
      for (const onnx::AttributeProto &A : N.attribute())
        if (A.name() == Name)
          Found = &A;
      if (!Found && Spec.required)
        return Fail("attribute '" + Name + "' is required");
      if (Found && Found->type() != Spec.type)
        return Fail("attribute '" + Name + "' must be " +
                    onnx::AttributeProto::AttributeType_Name(Spec.type) +
                    ", got " +
                    onnx::AttributeProto::AttributeType_Name(Found->type()));
    }
  }
  auto Nested = [&](const onnx::GraphProto &G) -> Error {
    for (const onnx::NodeProto &Inner : G.node())
      if (Error E = checkAttrsForOnnx(Inner, Imports))
        return E;
    return Error::success();
  };
  for (const onnx::AttributeProto &A : N.attribute()) {
    if (A.has_g())
      if (Error E = Nested(A.g()))
        return E;
    for (const onnx::GraphProto &G : A.graphs())
      if (Error E = Nested(G))
        return E;
  }
  return Error::success();
}

Expected<std::vector<std::optional<TensorType>>>
autopar::inferTypesWithOnnx(const onnx::NodeProto &N,
                            ArrayRef<OnnxInferenceInput> Inputs,
                            ArrayRef<std::pair<std::string, int64_t>> Opsets) {
  std::unordered_map<std::string, int> Imports;
  for (const auto &[Domain, Version] : Opsets)
    Imports[getDefaultDomain(Domain)] =
        int(std::clamp<int64_t>(Version, 1, INT32_MAX));
  if (Error E = checkAttrsForOnnx(N, Imports))
    return E;
  if (Error E = checkInputRanks(N, Inputs))
    return E;
  DimTranslator Dims;
  onnx::GraphProto G;
  *G.add_node() = N;
  for (const OnnxInferenceInput &In : Inputs) {
    std::optional<int32_t> DataType = getOnnxDataType(In.Type.getElementType());
    if (!DataType)
      continue;
    onnx::ValueInfoProto *V = G.add_input();
    V->set_name(In.Name);
    onnx::TypeProto::Tensor *T = V->mutable_type()->mutable_tensor_type();
    T->set_elem_type(*DataType);
    onnx::TensorShapeProto *Shape = T->mutable_shape();
    for (const Dim &D : In.Type.getShape())
      Dims.toOnnx(D, *Shape->add_dim());
    if (In.Data && In.Data->getType().hasStaticShape() &&
        *DataType != onnx::TensorProto::FLOAT16 &&
        *DataType != onnx::TensorProto::BFLOAT16 && *DataType != 17) {
      onnx::TensorProto *Init = G.add_initializer();
      Init->set_name(In.Name);
      setTensorData(*In.Data, *DataType, *Init);
    }
  }
  try {
    onnx::ShapeInferenceOptions Options(/*check_type=*/false,
                                        /*error_mode=*/1,
                                        /*enable_data_propagation=*/false);
    onnx::shape_inference::InferShapes(
        &G, Imports, onnx::OpSchemaRegistry::Instance(), Options);
  } catch (const std::exception &E) {
    // ONNX prefixes the reason with the node's op type and name, which the
    // importer's message gives already.
    StringRef Why = E.what();
    std::string Prefix = "node name: " + N.name() + "): ";
    if (size_t At = Why.find(Prefix); At != StringRef::npos)
      Why = Why.drop_front(At + Prefix.size());
    Why.consume_front("[ShapeInferenceError] ");
    Why.consume_front("[TypeInferenceError] ");
    return createStringError(inconvertibleErrorCode(),
                             "ONNX's shape inference rejects the node: " +
                                 Why.trim());
  } catch (...) {
    return createStringError(inconvertibleErrorCode(),
                             "ONNX's shape inference failed on the node");
  }
  StringMap<const onnx::TypeProto *> Inferred;
  for (const onnx::ValueInfoProto &V : G.value_info())
    Inferred[V.name()] = &V.type();
  std::vector<std::optional<TensorType>> Results;
  for (const std::string &Out : N.output()) {
    Results.emplace_back();
    auto It = Out.empty() ? Inferred.end() : Inferred.find(Out);
    if (It == Inferred.end())
      continue;
    const onnx::TypeProto &Type = *It->second;
    if (Type.has_sequence_type() || Type.has_optional_type() ||
        Type.has_map_type())
      return createStringError(
          inconvertibleErrorCode(),
          "its output '" + Out + "' is " +
              (Type.has_sequence_type()   ? "a sequence"
               : Type.has_optional_type() ? "an optional"
                                          : "a map") +
              ", which autopar has no type for (ops on sequences and "
              "optionals are not supported)");
    if (!Type.has_tensor_type())
      continue;
    const onnx::TypeProto::Tensor &T = It->second->tensor_type();
    std::optional<ElementType> Elem = getElementTypeFromOnnx(T.elem_type());
    if (!Elem || !T.has_shape())
      continue;
    SmallVector<Dim, 4> Shape;
    for (const onnx::TensorShapeProto::Dimension &D : T.shape().dim())
      Shape.push_back(Dims.fromOnnx(D));
    Results.back() = TensorType(*Elem, Shape);
  }
  return Results;
}
