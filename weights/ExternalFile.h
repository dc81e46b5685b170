//===- ExternalFile.h - External weight files, opened safely ----*- C++ -*-===//
//
// A parameter's data may live in a file beside the model. Its location is
// untrusted input: it must be relative, without `..` components and without
// a symbolic link on the way (the file itself included), and the file must
// be a regular file with no other hard links (a hard link could make a file
// outside the model's folder appear inside it). A byte range is checked
// against the file's size before anything is read.
//
// The checks walk the location one component at a time from a descriptor of
// the model's folder (openat with O_NOFOLLOW), so what is checked is what is
// read. The frontend uses them when importing (a missing file is then only a
// warning) and the weight reader when running (a missing file is an error).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_WEIGHTS_EXTERNALFILE_H
#define AUTOPAR_WEIGHTS_EXTERNALFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// An error unless Location is relative, has no `..` component and no
/// backslash. Messages start with "location '...'".
llvm::Error checkExternalLocation(llvm::StringRef Location);

/// An external data file opened inside a model's folder.
class ExternalFile {
public:
  /// Opens Location (checked with checkExternalLocation) under ModelDir.
  /// Returns a file that does not exist (exists() false) when a component
  /// is missing; an error when the location is refused, goes through a
  /// symbolic link, is not a regular file or has other hard links.
  static llvm::Expected<ExternalFile> open(llvm::StringRef ModelDir,
                                           llvm::StringRef Location);

  ExternalFile(ExternalFile &&Other);
  ExternalFile &operator=(ExternalFile &&Other) = delete;
  ExternalFile(const ExternalFile &) = delete;
  ExternalFile &operator=(const ExternalFile &) = delete;
  ~ExternalFile();

  bool exists() const { return FD >= 0; }
  /// The file's size in bytes; the file must exist.
  int64_t getSize() const { return Size; }

  /// An error unless [Offset, Offset + Length) lies within the file.
  llvm::Error checkRange(int64_t Offset, int64_t Length) const;
  /// Reads Length bytes at Offset, after checkRange.
  llvm::Expected<std::vector<uint8_t>> read(int64_t Offset,
                                            int64_t Length) const;

private:
  ExternalFile(std::string Location) : Location(std::move(Location)) {}

  std::string Location;
  /// The file's name in its folder.
  std::string Name;
  /// The file's folder and the file, opened O_PATH; -1 when missing.
  int DirFD = -1, FD = -1;
  /// The checked file's identity, compared again when it is read.
  uint64_t Device = 0, Inode = 0;
  int64_t Size = 0;
};

} // namespace autopar

#endif // AUTOPAR_WEIGHTS_EXTERNALFILE_H
