//===- ExternalData.cpp - Checks ONNX external-data references ------------===//

#include "frontend/ExternalData.h"

#include "onnx/onnx_pb.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <sys/stat.h>

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

/// Rejects locations that could leave the model's folder.
static Error checkLocation(StringRef Location, StringRef ModelDir) {
  if (Location.empty())
    return refError("'location' is empty");
  if (sys::path::is_absolute(Location) ||
      sys::path::is_absolute(Location, sys::path::Style::windows))
    return refError("location '" + Location +
                    "' is absolute; it must be relative to the model");
  for (StringRef Part :
       make_range(sys::path::begin(Location), sys::path::end(Location)))
    if (Part == "..")
      return refError("location '" + Location +
                      "' has a '..' component; it must stay in the "
                      "model's folder");
  if (Location.contains('\\'))
    return refError("location '" + Location + "' contains a backslash");
  // No component may be a symbolic link (the file itself included).
  SmallString<256> Path(ModelDir);
  for (StringRef Part :
       make_range(sys::path::begin(Location), sys::path::end(Location))) {
    sys::path::append(Path, Part);
    struct stat St;
    if (::lstat(Path.c_str(), &St) != 0)
      return Error::success(); // Missing: the caller reports it.
    if (S_ISLNK(St.st_mode))
      return refError("location '" + Location +
                      "' goes through a symbolic link");
  }
  return Error::success();
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
  if (Error E = checkLocation(Location, ModelDir))
    return E;
  if (Length && *Length != Bytes)
    return refError("'length' is " + Twine(*Length) + " but the tensor needs " +
                    Twine(Bytes) + " bytes");

  ExternalDataRef Ref;
  Ref.Source = WeightSource::getExternal(Location, Offset.value_or(0), Bytes);
  SmallString<256> Path(ModelDir);
  sys::path::append(Path, Location);
  struct stat St;
  if (::stat(Path.c_str(), &St) != 0) {
    Ref.FileExists = false;
    return Ref;
  }
  if (!S_ISREG(St.st_mode))
    return refError("location '" + Location + "' is not a regular file");
  if (St.st_nlink > 1)
    return refError("location '" + Location +
                    "' has other hard links; copy the file instead");
  int64_t End;
  if (AddOverflow(Ref.Source.Offset, Bytes, End) || End > St.st_size)
    return refError("offset " + Twine(Ref.Source.Offset) + " + length " +
                    Twine(Bytes) + " is past the end of '" + Location + "' (" +
                    Twine(int64_t(St.st_size)) + " bytes)");
  return Ref;
}
