//===- WeightReader.cpp - Reads a parameter's initial data ----------------===//

#include "weights/WeightReader.h"
#include "weights/ExternalFile.h"
#include "weights/TensorBytes.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace autopar;
using namespace llvm;

static Error paramError(StringRef ParamName, const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           ("parameter '" + ParamName + "': " + Message).str());
}

Expected<std::vector<uint8_t>>
autopar::readWeightBytes(StringRef ParamName, const WeightSource &Source,
                         StringRef ModelDir) {
  if (Source.SourceKind == WeightSource::Kind::Inline) {
    if (!Source.Data)
      return paramError(ParamName, "inline weight source without data");
    return encodeTensorBytes(*Source.Data);
  }
  Expected<ExternalFile> File = ExternalFile::open(ModelDir, Source.Location);
  if (!File)
    return paramError(ParamName,
                      "external data: " + toString(File.takeError()));
  if (!File->exists()) {
    SmallString<256> Path(ModelDir);
    sys::path::append(Path, Source.Location);
    return paramError(ParamName, "external data file '" + Path +
                                     "' is missing (running needs it)");
  }
  Expected<std::vector<uint8_t>> Bytes =
      File->read(Source.Offset, Source.Length);
  if (!Bytes)
    return paramError(ParamName,
                      "external data: " + toString(Bytes.takeError()));
  return Bytes;
}

Expected<std::vector<uint8_t>> autopar::readWeightBytes(const Value &Param,
                                                        StringRef ModelDir) {
  const std::optional<WeightSource> &Source = Param.getWeightSource();
  if (!Source)
    return paramError(Param.getName(), "has no data (no weight source)");
  Expected<std::vector<uint8_t>> Bytes =
      readWeightBytes(Param.getName(), *Source, ModelDir);
  if (!Bytes)
    return Bytes.takeError();
  std::optional<int64_t> Size = Param.getLogicalType().getStaticSizeInBytes();
  if (Size && uint64_t(*Size) != Bytes->size())
    return paramError(Param.getName(), "its data has " + Twine(Bytes->size()) +
                                           " bytes; " +
                                           Param.getLogicalType().str() +
                                           " needs " + Twine(*Size));
  return Bytes;
}
