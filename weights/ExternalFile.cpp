//===- ExternalFile.cpp - External weight files, opened safely ------------===//

#include "weights/ExternalFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

static Error fileError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

namespace {
/// Closes a descriptor when it goes out of scope, unless released.
class ScopedFD {
public:
  explicit ScopedFD(int FD = -1) : FD(FD) {}
  ScopedFD(const ScopedFD &) = delete;
  ScopedFD &operator=(const ScopedFD &) = delete;
  ~ScopedFD() { reset(-1); }
  int get() const { return FD; }
  int release() { return std::exchange(FD, -1); }
  void reset(int New) {
    if (FD >= 0)
      ::close(FD);
    FD = New;
  }

private:
  int FD;
};
} // namespace

Error autopar::checkExternalLocation(StringRef Location) {
  if (Location.empty())
    return fileError("'location' is empty");
  if (Location.contains('\0'))
    return fileError("location contains a NUL character");
  if (sys::path::is_absolute(Location) ||
      sys::path::is_absolute(Location, sys::path::Style::windows))
    return fileError("location '" + Location +
                     "' is absolute; it must be relative to the model");
  for (StringRef Part :
       make_range(sys::path::begin(Location), sys::path::end(Location)))
    if (Part == "..")
      return fileError("location '" + Location +
                       "' has a '..' component; it must stay in the "
                       "model's folder");
  if (Location.contains('\\'))
    return fileError("location '" + Location + "' contains a backslash");
  return Error::success();
}

Expected<ExternalFile> ExternalFile::open(StringRef ModelDir,
                                          StringRef Location) {
  if (Error E = checkExternalLocation(Location))
    return E;
  ExternalFile File(Location.str());
  auto CannotOpen = [&](int Err) {
    return fileError("cannot open '" + Location + "': " + std::strerror(Err));
  };
  // The model's folder may be reached through links; the location may not.
  std::string Dir = ModelDir.empty() ? "." : ModelDir.str();
  ScopedFD DirFD(::open(Dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (DirFD.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return File;
    return CannotOpen(errno);
  }
  SmallVector<StringRef, 4> Parts(sys::path::begin(Location),
                                  sys::path::end(Location));
  for (size_t I = 0, E = Parts.size(); I != E; ++I) {
    std::string Part = Parts[I].str();
    // O_PATH | O_NOFOLLOW opens a symbolic link itself, so fstat sees it.
    ScopedFD Next(
        ::openat(DirFD.get(), Part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (Next.get() < 0) {
      if (errno == ENOENT || errno == ENOTDIR)
        return File;
      return CannotOpen(errno);
    }
    struct stat St;
    if (::fstat(Next.get(), &St) != 0)
      return CannotOpen(errno);
    if (S_ISLNK(St.st_mode))
      return fileError("location '" + Location +
                       "' goes through a symbolic link");
    if (I + 1 != E) {
      if (!S_ISDIR(St.st_mode))
        return File; // As missing as a file under a file can be.
      DirFD.reset(Next.release());
      continue;
    }
    if (!S_ISREG(St.st_mode))
      return fileError("location '" + Location + "' is not a regular file");
    if (St.st_nlink > 1)
      return fileError("location '" + Location +
                       "' has other hard links; copy the file instead");
    File.Name = Part;
    File.Device = St.st_dev;
    File.Inode = St.st_ino;
    File.Size = St.st_size;
    File.DirFD = DirFD.release();
    File.FD = Next.release();
  }
  return File;
}

ExternalFile::ExternalFile(ExternalFile &&Other)
    : Location(std::move(Other.Location)), Name(std::move(Other.Name)),
      DirFD(std::exchange(Other.DirFD, -1)), FD(std::exchange(Other.FD, -1)),
      Device(Other.Device), Inode(Other.Inode), Size(Other.Size) {}

ExternalFile::~ExternalFile() {
  if (FD >= 0)
    ::close(FD);
  if (DirFD >= 0)
    ::close(DirFD);
}

Error ExternalFile::checkRange(int64_t Offset, int64_t Length) const {
  int64_t End;
  if (Offset < 0 || Length < 0 || AddOverflow(Offset, Length, End) ||
      End > Size)
    return fileError("offset " + Twine(Offset) + " + length " + Twine(Length) +
                     " is past the end of '" + Location + "' (" + Twine(Size) +
                     " bytes)");
  return Error::success();
}

Expected<std::vector<uint8_t>> ExternalFile::read(int64_t Offset,
                                                  int64_t Length) const {
  assert(exists() && "reading a missing file");
  if (Error E = checkRange(Offset, Length))
    return E;
  // The checked descriptor is O_PATH; open the same name for reading and
  // make sure it is still the same file.
  ScopedFD In(
      ::openat(DirFD, Name.c_str(),
               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat St;
  if (In.get() < 0 || ::fstat(In.get(), &St) != 0)
    return fileError("cannot read '" + Location + "': " + std::strerror(errno));
  if (St.st_dev != Device || St.st_ino != Inode)
    return fileError("location '" + Location + "' changed while it was read");
  std::vector<uint8_t> Bytes(Length);
  int64_t Done = 0;
  while (Done < Length) {
    size_t Chunk = std::min<int64_t>(Length - Done, int64_t(1) << 30);
    ssize_t N = ::pread(In.get(), Bytes.data() + Done, Chunk, Offset + Done);
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0)
      return fileError("cannot read '" + Location +
                       "': " + std::strerror(errno));
    if (N == 0)
      return fileError("'" + Location + "' ended at byte " +
                       Twine(Offset + Done) + " while it was read");
    Done += N;
  }
  return Bytes;
}
