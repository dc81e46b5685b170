//===- ExternalData.cpp - Checks ONNX external-data references ------------===//

#include "frontend/ExternalData.h"
#include "weights/ExternalFile.h"

#include "onnx/onnx_pb.h"

using namespace autopar;
using namespace llvm;

static Error refError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           ("external data: " + Message).str());
}

static Expected<int64_t> parseSize(StringRef Key, StringRef Text) {
  int64_t V;
  if (Text.getAsInteger(10, V) || V < 0)
    return refError("'" + Key + "' must be a non-negative integer, got '" +
                    Text + "'");
  return V;
}

Expected<ExternalDataRef> autopar::checkExternalData(const onnx::TensorProto &T,
                                                     StringRef ModelDir,
                                                     int64_t Bytes) {
  std::string Location;
  std::optional<int64_t> Offset, Length;
  bool SawLocation = false;
  for (const onnx::StringStringEntryProto &E : T.external_data()) {
    StringRef Key = E.key();
    if (Key == "location") {
      Location = E.value();
      SawLocation = true;
    } else if (Key == "offset") {
      Expected<int64_t> V = parseSize(Key, E.value());
      if (!V)
        return V.takeError();
      Offset = *V;
    } else if (Key == "length") {
      Expected<int64_t> V = parseSize(Key, E.value());
      if (!V)
        return V.takeError();
      Length = *V;
    } else if (Key != "checksum") {
      return refError("unknown key '" + Key +
                      "' (ONNX defines location, offset, length, checksum)");
    }
  }
  if (!SawLocation)
    return refError("no 'location'");
  Expected<ExternalFile> File = ExternalFile::open(ModelDir, Location);
  if (!File)
    return refError(toString(File.takeError()));
  if (Length && *Length != Bytes)
    return refError("'length' is " + Twine(*Length) + " but the tensor needs " +
                    Twine(Bytes) + " bytes");

  ExternalDataRef Ref;
  Ref.Source = WeightSource::getExternal(Location, Offset.value_or(0), Bytes);
  Ref.FileExists = File->exists();
  if (Ref.FileExists)
    if (Error E = File->checkRange(Ref.Source.Offset, Bytes))
      return refError(toString(std::move(E)));
  return Ref;
}
