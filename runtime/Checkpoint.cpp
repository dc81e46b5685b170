//===- Checkpoint.cpp - Training state on disk, one shard per rank --------===//
//
// See Checkpoint.h. Files are written with open/write/fsync directly (not
// through raw_fd_ostream or sys::fs::TempFile), so that every byte is
// known to be on disk before a folder is renamed or D/latest moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Tensor.h"

#include "weights/ExternalFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

static const char HeaderMagic[] = "AUTOPAR-CHECKPOINT 1\n";
static const char FormatName[] = "autopar-checkpoint";

static Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

/// An error "What: strerror(Errno)".
static Error errnoError(const Twine &What, int Errno) {
  return makeError(What + ": " + std::strerror(Errno));
}

static std::string joinPath(StringRef A, StringRef B) {
  SmallString<256> P(A);
  sys::path::append(P, B);
  return std::string(P);
}

static std::string formatCrc(uint32_t C) {
  std::string S;
  raw_string_ostream(S) << format_hex(C, 10);
  return S;
}

std::string autopar::getCheckpointName(int64_t Step) {
  return "step_" + std::to_string(Step);
}

std::optional<int64_t> autopar::parseCheckpointName(StringRef Name) {
  if (!Name.consume_front("step_") || Name.empty() || Name.size() > 18 ||
      !llvm::all_of(Name, [](char C) { return C >= '0' && C <= '9'; }))
    return std::nullopt;
  // No leading zeros: one spelling per step.
  if (Name.size() > 1 && Name.front() == '0')
    return std::nullopt;
  int64_t Step = 0;
  if (Name.getAsInteger(10, Step))
    return std::nullopt;
  return Step;
}

std::string autopar::getCheckpointShardName(int Rank) {
  return "rank" + std::to_string(Rank) + ".bin";
}

std::string autopar::getCheckpointIndexName(int Rank) {
  return "rank" + std::to_string(Rank) + ".json";
}

//===----------------------------------------------------------------------===//
// The index
//===----------------------------------------------------------------------===//

std::string CheckpointIndex::toJSON() const {
  json::Array Entries;
  for (const CheckpointTensor &T : Tensors) {
    auto Ints = [](ArrayRef<int64_t> V) {
      json::Array A;
      for (int64_t D : V)
        A.push_back(D);
      return A;
    };
    Entries.push_back(json::Object{
        {"name", T.Name},
        {"dtype", getElementTypeName(T.Elem)},
        {"shape", Ints(T.Shape)},
        {"logical_shape",
         Ints(T.LogicalShape.empty() ? ArrayRef<int64_t>(T.Shape)
                                     : ArrayRef<int64_t>(T.LogicalShape))},
        {"origin",
         Ints(T.Origin.empty() ? ArrayRef<int64_t>(
                                     SmallVector<int64_t, 4>(T.Shape.size(), 0))
                               : ArrayRef<int64_t>(T.Origin))},
        {"offset", int64_t(T.Offset)},
        {"length", int64_t(T.Length)},
        {"crc32", int64_t(T.Crc32)},
    });
  }
  std::string RngState;
  raw_string_ostream(RngState) << format_hex(DataRngState, 18);
  json::Object Root{
      {"format", FormatName},
      {"version", Version},
      {"step", Step},
      {"rank", int64_t(Rank)},
      {"num_ranks", int64_t(NumRanks)},
      {"program", Program},
      {"graph", Graph},
      {"data", json::Object{{"source", Data},
                            {"position", int64_t(DataPosition)},
                            {"rng_state", RngState}}},
      {"file", File},
      {"file_size", int64_t(FileSize)},
      {"tensors", std::move(Entries)},
  };
  if (OptimizerStep)
    Root["optimizer_step"] = *OptimizerStep;
  if (LossScale)
    Root["loss_scale"] = json::Object{
        {"scale", *LossScale}, {"growth_tracker", LossScaleGrowthTracker}};
  std::string Text;
  raw_string_ostream OS(Text);
  OS << formatv("{0:2}", json::Value(std::move(Root))) << '\n';
  return OS.str();
}

namespace {

/// Reads the fields of one JSON object, naming Where in errors.
class FieldReader {
public:
  FieldReader(const json::Object &O, std::string Where)
      : O(O), Where(std::move(Where)) {}

  Error getString(StringRef Key, std::string &Out) const {
    const json::Value *V = O.get(Key);
    if (!V)
      return missing(Key);
    std::optional<StringRef> S;
    if (auto Str = V->getAsString())
      S = *Str;
    if (!S)
      return bad(Key, "a string");
    Out = S->str();
    return Error::success();
  }
  /// A non-negative integer.
  Error getCount(StringRef Key, int64_t &Out) const {
    const json::Value *V = O.get(Key);
    if (!V)
      return missing(Key);
    std::optional<int64_t> I;
    if (auto N = V->getAsInteger())
      I = *N;
    if (!I || *I < 0)
      return bad(Key, "a non-negative integer");
    Out = *I;
    return Error::success();
  }
  const json::Object *getObject(StringRef Key) const {
    return O.getObject(Key);
  }
  const json::Array *getArray(StringRef Key) const { return O.getArray(Key); }
  Error missing(StringRef Key) const {
    return makeError(Where + ": '" + Key + "' is missing");
  }
  Error bad(StringRef Key, const Twine &What) const {
    return makeError(Where + ": '" + Key + "' must be " + What);
  }

private:
  const json::Object &O;
  std::string Where;
};

} // namespace

/// The bytes of a tensor of type (Elem, Shape); none when that overflows.
static std::optional<uint64_t> getTensorBytes(ElementType Elem,
                                              ArrayRef<int64_t> Shape) {
  int64_t Bytes = int64_t(getElementSize(Elem));
  for (int64_t D : Shape)
    if (D < 0 || MulOverflow(Bytes, D, Bytes))
      return std::nullopt;
  return uint64_t(Bytes);
}

static Expected<CheckpointTensor> parseTensor(const json::Value &V,
                                              const std::string &Where) {
  const json::Object *O = V.getAsObject();
  if (!O)
    return makeError(Where + " must be an object");
  FieldReader R(*O, Where);
  CheckpointTensor T;
  if (Error E = R.getString("name", T.Name))
    return E;
  if (T.Name.empty())
    return R.bad("name", "a non-empty string");
  std::string Where2 = Where + " ('" + T.Name + "')";
  FieldReader R2(*O, Where2);
  std::string DType;
  if (Error E = R2.getString("dtype", DType))
    return E;
  std::optional<ElementType> Elem = parseElementTypeName(DType);
  if (!Elem)
    return R2.bad("dtype", "an element type, not '" + DType + "'");
  T.Elem = *Elem;
  const json::Array *Shape = R2.getArray("shape");
  if (!Shape)
    return R2.bad("shape", "an array of non-negative integers");
  for (const json::Value &D : *Shape) {
    auto I = D.getAsInteger();
    if (!I || *I < 0)
      return R2.bad("shape", "an array of non-negative integers");
    T.Shape.push_back(*I);
  }
  int64_t Offset, Length, Crc;
  if (Error E = R2.getCount("offset", Offset))
    return E;
  if (Error E = R2.getCount("length", Length))
    return E;
  if (Error E = R2.getCount("crc32", Crc))
    return E;
  if (Crc > int64_t(UINT32_MAX))
    return R2.bad("crc32", "a 32-bit unsigned integer");
  T.Offset = uint64_t(Offset);
  T.Length = uint64_t(Length);
  T.Crc32 = uint32_t(Crc);
  std::optional<uint64_t> Bytes = getTensorBytes(T.Elem, T.Shape);
  if (!Bytes)
    return makeError(Where2 + ": type " + formatTensorType(T.Elem, T.Shape) +
                     " is too large");
  if (*Bytes != T.Length)
    return makeError(Where2 + ": length " + Twine(T.Length) + " is not the " +
                     Twine(*Bytes) + " bytes of " +
                     formatTensorType(T.Elem, T.Shape));
  // Where the block lies in its logical tensor (absent: the whole tensor).
  for (auto [Key, Into] : {std::make_pair("logical_shape", &T.LogicalShape),
                           std::make_pair("origin", &T.Origin)}) {
    const json::Array *A = O->getArray(Key);
    if (!A)
      continue;
    for (const json::Value &D : *A) {
      auto I = D.getAsInteger();
      if (!I || *I < 0)
        return R2.bad(Key, "an array of non-negative integers");
      Into->push_back(*I);
    }
  }
  if (T.LogicalShape.empty())
    T.LogicalShape = T.Shape;
  if (T.Origin.empty())
    T.Origin.assign(T.Shape.size(), 0);
  if (T.LogicalShape.size() != T.Shape.size() ||
      T.Origin.size() != T.Shape.size())
    return makeError(Where2 + ": logical_shape and origin must have one "
                              "entry per dimension of its shape");
  for (size_t D = 0; D != T.Shape.size(); ++D)
    if (T.Origin[D] > T.LogicalShape[D] ||
        T.Shape[D] > T.LogicalShape[D] - T.Origin[D])
      return makeError(Where2 + ": the block at origin " + Twine(T.Origin[D]) +
                       " of dimension " + Twine(D) + " (size " +
                       Twine(T.Shape[D]) + ") overruns its logical size " +
                       Twine(T.LogicalShape[D]));
  return T;
}

Expected<CheckpointIndex> CheckpointIndex::parse(StringRef Text,
                                                 StringRef Path) {
  std::string Where = "checkpoint index '" + Path.str() + "'";
  Expected<json::Value> Root = json::parse(Text);
  if (!Root)
    return makeError(Where + ": " + toString(Root.takeError()));
  const json::Object *O = Root->getAsObject();
  if (!O)
    return makeError(Where + " is not a JSON object");
  FieldReader R(*O, Where);
  CheckpointIndex Index;
  std::string Format;
  if (Error E = R.getString("format", Format))
    return E;
  if (Format != FormatName)
    return makeError(Where + ": format is '" + Format + "', not '" +
                     FormatName + "'");
  int64_t Ver, Rank, NumRanks, Position, FileSize;
  if (Error E = R.getCount("version", Ver))
    return E;
  if (Ver != Version)
    return makeError(Where + ": version " + Twine(Ver) +
                     " is not supported (this runtime reads version " +
                     Twine(Version) + ")");
  if (Error E = R.getCount("step", Index.Step))
    return E;
  if (Error E = R.getCount("rank", Rank))
    return E;
  if (Error E = R.getCount("num_ranks", NumRanks))
    return E;
  if (NumRanks < 1 || NumRanks > INT32_MAX || Rank >= NumRanks)
    return makeError(Where + ": rank " + Twine(Rank) + " of " +
                     Twine(NumRanks) + " ranks");
  Index.Rank = int(Rank);
  Index.NumRanks = int(NumRanks);
  if (Error E = R.getString("program", Index.Program))
    return E;
  if (Error E = R.getString("graph", Index.Graph))
    return E;
  const json::Object *Data = R.getObject("data");
  if (!Data)
    return R.bad("data", "an object");
  FieldReader RD(*Data, Where + ": data");
  if (Error E = RD.getString("source", Index.Data))
    return E;
  if (Error E = RD.getCount("position", Position))
    return E;
  Index.DataPosition = uint64_t(Position);
  std::string Rng;
  if (Error E = RD.getString("rng_state", Rng))
    return E;
  StringRef RngDigits = Rng;
  if (!RngDigits.consume_front("0x") || RngDigits.empty() ||
      RngDigits.getAsInteger(16, Index.DataRngState))
    return RD.bad("rng_state", "a hexadecimal integer (0x...)");
  // Loss scaling's state (optional: older checkpoints lack it).
  if (O->get("optimizer_step")) {
    int64_t Taken;
    if (Error E = R.getCount("optimizer_step", Taken))
      return E;
    if (Taken > Index.Step)
      return R.bad("optimizer_step", "at most the step");
    Index.OptimizerStep = Taken;
  }
  if (O->get("loss_scale")) {
    const json::Object *Scaling = R.getObject("loss_scale");
    if (!Scaling)
      return R.bad("loss_scale", "an object");
    FieldReader RS(*Scaling, Where + ": loss_scale");
    llvm::Optional<double> Scale = Scaling->getNumber("scale");
    if (!Scale || !(*Scale > 0) || std::isinf(*Scale))
      return RS.bad("scale", "a finite number > 0");
    Index.LossScale = *Scale;
    if (Error E = RS.getCount("growth_tracker", Index.LossScaleGrowthTracker))
      return E;
  }
  if (Error E = R.getString("file", Index.File))
    return E;
  if (Index.File.empty() || StringRef(Index.File).contains('/') ||
      Index.File == "." || Index.File == "..")
    return R.bad("file", "a file name in the checkpoint's folder");
  if (Error E = R.getCount("file_size", FileSize))
    return E;
  Index.FileSize = uint64_t(FileSize);
  const json::Array *Tensors = R.getArray("tensors");
  if (!Tensors)
    return R.bad("tensors", "an array");
  StringSet<> Names;
  for (size_t I = 0; I != Tensors->size(); ++I) {
    Expected<CheckpointTensor> T = parseTensor(
        (*Tensors)[I], Where + ": tensors[" + std::to_string(I) + "]");
    if (!T)
      return T.takeError();
    if (!Names.insert(T->Name).second)
      return makeError(Where + ": tensor '" + T->Name + "' appears twice");
    if (T->Offset < CheckpointHeaderSize || T->Offset > Index.FileSize ||
        T->Length > Index.FileSize - T->Offset)
      return makeError(Where + ": tensor '" + T->Name + "': offset " +
                       Twine(T->Offset) + " + length " + Twine(T->Length) +
                       " is outside the file's data (bytes " +
                       Twine(CheckpointHeaderSize) + " to " +
                       Twine(Index.FileSize) + ")");
    Index.Tensors.push_back(std::move(*T));
  }
  return Index;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// A file being written; closed (without fsync) if not finished.
class OutputFile {
public:
  static Expected<OutputFile> create(std::string Path) {
    int FD =
        ::open(Path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (FD < 0)
      return errnoError("cannot create '" + Path + "'", errno);
    return OutputFile(std::move(Path), FD);
  }
  OutputFile(OutputFile &&Other)
      : Path(std::move(Other.Path)), FD(std::exchange(Other.FD, -1)) {}
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  OutputFile &operator=(OutputFile &&) = delete;
  ~OutputFile() {
    if (FD >= 0)
      ::close(FD);
  }

  Error write(ArrayRef<uint8_t> Bytes) {
    size_t Done = 0;
    while (Done < Bytes.size()) {
      ssize_t N = ::write(FD, Bytes.data() + Done,
                          std::min<size_t>(Bytes.size() - Done, 1u << 30));
      if (N < 0 && errno == EINTR)
        continue;
      if (N < 0)
        return errnoError("cannot write '" + Path + "'", errno);
      Done += size_t(N);
    }
    return Error::success();
  }
  Error write(StringRef Text) {
    return write(ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
  }
  /// fsync and close.
  Error finish() {
    int Result;
    do
      Result = ::fsync(FD);
    while (Result != 0 && errno == EINTR);
    if (Result != 0)
      return errnoError("cannot sync '" + Path + "'", errno);
    int Closed = ::close(std::exchange(FD, -1));
    if (Closed != 0 && errno != EINTR)
      return errnoError("cannot close '" + Path + "'", errno);
    return Error::success();
  }

private:
  OutputFile(std::string Path, int FD) : Path(std::move(Path)), FD(FD) {}

  std::string Path;
  int FD;
};

} // namespace

/// fsyncs a folder, making the names created or renamed in it durable.
static Error syncDirectory(StringRef Path) {
  std::string P = Path.str();
  int FD = ::open(P.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (FD < 0)
    return errnoError("cannot open folder '" + P + "'", errno);
  int Result;
  do
    Result = ::fsync(FD);
  while (Result != 0 && errno == EINTR);
  int Errno = errno;
  ::close(FD);
  if (Result != 0)
    return errnoError("cannot sync folder '" + P + "'", Errno);
  return Error::success();
}

/// Writes Text to Path and fsyncs it.
static Error writeFileDurably(const std::string &Path, StringRef Text) {
  Expected<OutputFile> F = OutputFile::create(Path);
  if (!F)
    return F.takeError();
  if (Error E = F->write(Text))
    return E;
  return F->finish();
}

[[noreturn]] static void crashForTest() {
  ::raise(SIGKILL);
  std::abort();
}

Error autopar::writeCheckpointShard(StringRef Dir, const CheckpointIndex &Meta,
                                    ArrayRef<CheckpointTensorSpec> Tensors,
                                    CheckpointTensorReader Read,
                                    CheckpointCrash Crash) {
  std::string TmpDir = joinPath(Dir, getCheckpointName(Meta.Step) + ".tmp");
  if (std::error_code EC = sys::fs::create_directories(TmpDir))
    return makeError("cannot create '" + TmpDir + "': " + EC.message());

  CheckpointIndex Index = Meta;
  Index.Tensors.clear();
  Index.File = getCheckpointShardName(Meta.Rank);
  std::string ShardPath = joinPath(TmpDir, Index.File);
  // The index is written last and says that the shard is complete: drop
  // one that an earlier, interrupted attempt left.
  std::string IndexPath = joinPath(TmpDir, getCheckpointIndexName(Meta.Rank));
  if (std::error_code EC = sys::fs::remove(IndexPath))
    return makeError("cannot remove '" + IndexPath + "': " + EC.message());
  Expected<OutputFile> Shard = OutputFile::create(ShardPath);
  if (!Shard)
    return Shard.takeError();
  std::vector<uint8_t> Header(CheckpointHeaderSize, 0);
  std::memcpy(Header.data(), HeaderMagic, sizeof(HeaderMagic) - 1);
  if (Error E = Shard->write(Header))
    return E;
  uint64_t Offset = CheckpointHeaderSize;
  for (size_t I = 0; I != Tensors.size(); ++I) {
    const CheckpointTensorSpec &Spec = Tensors[I];
    // Each tensor starts at a 64-byte boundary.
    uint64_t Aligned = alignTo(Offset, 64);
    if (Aligned != Offset) {
      std::vector<uint8_t> Pad(Aligned - Offset, 0);
      if (Error E = Shard->write(Pad))
        return E;
      Offset = Aligned;
    }
    Expected<std::vector<uint8_t>> Bytes = Read(I);
    if (!Bytes)
      return makeError("tensor '" + Spec.Name +
                       "': " + toString(Bytes.takeError()));
    std::optional<uint64_t> Size = getTensorBytes(Spec.Elem, Spec.Shape);
    if (!Size || *Size != Bytes->size())
      return makeError("tensor '" + Spec.Name + "': " + Twine(Bytes->size()) +
                       " bytes given for " +
                       formatTensorType(Spec.Elem, Spec.Shape));
    CheckpointTensor T;
    static_cast<CheckpointTensorSpec &>(T) = Spec;
    if (T.LogicalShape.empty())
      T.LogicalShape = T.Shape;
    if (T.Origin.empty())
      T.Origin.assign(T.Shape.size(), 0);
    T.Offset = Offset;
    T.Length = Bytes->size();
    T.Crc32 = crc32(*Bytes);
    if (Error E = Shard->write(*Bytes))
      return E;
    Offset += T.Length;
    Index.Tensors.push_back(std::move(T));
    // A test's crash halfway through the tensors: the shard is partial and
    // its index is missing.
    if (Crash == CheckpointCrash::InShard && I == Tensors.size() / 2)
      crashForTest();
  }
  if (Crash == CheckpointCrash::InShard)
    crashForTest();
  if (Error E = Shard->finish())
    return E;
  Index.FileSize = Offset;
  if (Error E = writeFileDurably(IndexPath, Index.toJSON()))
    return E;
  return syncDirectory(TmpDir);
}

Error autopar::commitCheckpoint(StringRef Dir, int64_t Step, int NumRanks,
                                CheckpointCrash Crash) {
  std::string Name = getCheckpointName(Step);
  std::string TmpDir = joinPath(Dir, Name + ".tmp");
  std::string Final = joinPath(Dir, Name);
  // Every rank's index is written last: its presence says the shard is.
  for (int R = 0; R != NumRanks; ++R) {
    std::string IndexPath = joinPath(TmpDir, getCheckpointIndexName(R));
    if (!sys::fs::exists(IndexPath))
      return makeError("cannot commit '" + TmpDir + "': '" + IndexPath +
                       "' is missing");
  }
  if (sys::fs::exists(Final)) {
    // A crash after the rename and before D/latest moved left it; D/latest
    // must not name it.
    Expected<std::optional<int64_t>> Latest = readLatestCheckpoint(Dir);
    if (!Latest)
      return Latest.takeError();
    if (*Latest && **Latest == Step)
      return makeError("'" + Final + "' is the latest checkpoint already");
    if (std::error_code EC = sys::fs::remove_directories(Final))
      return makeError("cannot remove the unfinished checkpoint '" + Final +
                       "': " + EC.message());
  }
  if (std::error_code EC = sys::fs::rename(TmpDir, Final))
    return makeError("cannot rename '" + TmpDir + "' to '" + Final +
                     "': " + EC.message());
  if (Error E = syncDirectory(Dir))
    return E;
  if (Crash == CheckpointCrash::AfterRename)
    crashForTest();
  std::string LatestTmp = joinPath(Dir, "latest.tmp");
  std::string Latest = joinPath(Dir, "latest");
  if (Error E = writeFileDurably(LatestTmp, Name + "\n"))
    return E;
  if (std::error_code EC = sys::fs::rename(LatestTmp, Latest))
    return makeError("cannot rename '" + LatestTmp + "' to '" + Latest +
                     "': " + EC.message());
  return syncDirectory(Dir);
}

Error autopar::pruneCheckpoints(StringRef Dir, int64_t Step, unsigned Keep) {
  std::vector<int64_t> Done;
  std::vector<std::string> Remove;
  std::error_code EC;
  for (sys::fs::directory_iterator It(Dir, EC), End; It != End && !EC;
       It.increment(EC)) {
    StringRef Name = sys::path::filename(It->path());
    bool Tmp = Name.consume_back(".tmp");
    std::optional<int64_t> N = parseCheckpointName(Name);
    if (!N)
      continue;
    if (Tmp) {
      if (*N <= Step)
        Remove.push_back(It->path());
    } else if (*N > Step) {
      Remove.push_back(It->path());
    } else {
      Done.push_back(*N);
    }
  }
  if (EC)
    return makeError("cannot list '" + Dir + "': " + EC.message());
  llvm::sort(Done, std::greater<int64_t>());
  for (size_t I = Keep; Keep != 0 && I < Done.size(); ++I)
    if (Done[I] != Step)
      Remove.push_back(joinPath(Dir, getCheckpointName(Done[I])));
  llvm::sort(Remove);
  for (const std::string &P : Remove)
    if (std::error_code RemoveEC = sys::fs::remove_directories(P))
      return makeError("cannot remove the old checkpoint '" + P +
                       "': " + RemoveEC.message());
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// The whole of the file Location in Dir, opened through ExternalFile.
static Expected<std::string> readSmallFile(StringRef Dir, StringRef Location,
                                           const std::string &Path) {
  Expected<ExternalFile> F = ExternalFile::open(Dir, Location);
  if (!F)
    return makeError("cannot read '" + Path + "': " + toString(F.takeError()));
  if (!F->exists())
    return makeError("cannot read '" + Path + "': No such file or directory");
  if (F->getSize() > (int64_t(64) << 20))
    return makeError("'" + Path + "' is too large (" + Twine(F->getSize()) +
                     " bytes)");
  Expected<std::vector<uint8_t>> Bytes = F->read(0, F->getSize());
  if (!Bytes)
    return makeError("cannot read '" + Path +
                     "': " + toString(Bytes.takeError()));
  return std::string(Bytes->begin(), Bytes->end());
}

Expected<std::optional<int64_t>> autopar::readLatestCheckpoint(StringRef Dir) {
  std::string Path = joinPath(Dir, "latest");
  sys::fs::file_status Status;
  if (std::error_code EC = sys::fs::status(Path, Status, /*Follow=*/false)) {
    if (EC == std::errc::no_such_file_or_directory)
      return std::nullopt;
    return makeError("cannot read '" + Path + "': " + EC.message());
  }
  Expected<std::string> Text = readSmallFile(Dir, "latest", Path);
  if (!Text)
    return Text.takeError();
  StringRef Name = StringRef(*Text).trim();
  std::optional<int64_t> Step = parseCheckpointName(Name);
  if (!Step)
    return makeError("'" + Path + "' does not name a checkpoint (step_<N>): '" +
                     Name.take_front(64) + "'");
  std::string Folder = joinPath(Dir, Name);
  if (!sys::fs::is_directory(Folder))
    return makeError("'" + Path + "' names '" + Name +
                     "', which is not a folder in '" + Dir + "'");
  return Step;
}

Expected<CheckpointIndex> autopar::readCheckpointIndex(StringRef Dir,
                                                       int64_t Step, int Rank) {
  std::string Location =
      getCheckpointName(Step) + "/" + getCheckpointIndexName(Rank);
  std::string Path = joinPath(Dir, Location);
  Expected<std::string> Text = readSmallFile(Dir, Location, Path);
  if (!Text)
    return Text.takeError();
  Expected<CheckpointIndex> Index = CheckpointIndex::parse(*Text, Path);
  if (!Index)
    return Index.takeError();
  if (Index->Step != Step || Index->Rank != Rank)
    return makeError("checkpoint index '" + Path + "' is rank " +
                     Twine(Index->Rank) + "'s of step " + Twine(Index->Step) +
                     ", not rank " + Twine(Rank) + "'s of step " + Twine(Step));
  return Index;
}

Error autopar::matchCheckpointTensors(const CheckpointIndex &Index,
                                      ArrayRef<CheckpointTensorSpec> Want,
                                      StringRef IndexPath) {
  StringMap<const CheckpointTensor *> Have;
  for (const CheckpointTensor &T : Index.Tensors)
    Have[T.Name] = &T;
  StringSet<> Wanted;
  for (const CheckpointTensorSpec &W : Want) {
    Wanted.insert(W.Name);
    const CheckpointTensor *T = Have.lookup(W.Name);
    std::string WantType = formatTensorType(W.Elem, W.Shape);
    if (!T)
      return makeError("checkpoint '" + IndexPath + "' has no tensor '" +
                       W.Name + "' (the program's parameter " + WantType + ")");
    if (T->Elem != W.Elem ||
        ArrayRef<int64_t>(T->Shape) != ArrayRef<int64_t>(W.Shape))
      return makeError("checkpoint '" + IndexPath + "': tensor '" + W.Name +
                       "' is " + formatTensorType(T->Elem, T->Shape) +
                       "; the program's parameter is " + WantType);
    SmallVector<int64_t, 4> Zero(W.Shape.size(), 0);
    ArrayRef<int64_t> WantLogical = W.LogicalShape.empty()
                                        ? ArrayRef<int64_t>(W.Shape)
                                        : ArrayRef<int64_t>(W.LogicalShape);
    ArrayRef<int64_t> WantOrigin = W.Origin.empty()
                                       ? ArrayRef<int64_t>(Zero)
                                       : ArrayRef<int64_t>(W.Origin);
    if (ArrayRef<int64_t>(T->LogicalShape) != WantLogical ||
        ArrayRef<int64_t>(T->Origin) != WantOrigin)
      return makeError("checkpoint '" + IndexPath + "': tensor '" + W.Name +
                       "' is another block of its logical tensor than the "
                       "program's parameter");
  }
  for (const CheckpointTensor &T : Index.Tensors)
    if (!Wanted.count(T.Name))
      return makeError("checkpoint '" + IndexPath + "': tensor '" + T.Name +
                       "' is not a parameter of the program");
  return Error::success();
}

Error autopar::readCheckpointTensors(
    StringRef Dir, const CheckpointIndex &Index,
    function_ref<Error(const CheckpointTensor &, ArrayRef<uint8_t>)> Take) {
  std::string Location = getCheckpointName(Index.Step) + "/" + Index.File;
  std::string Path = joinPath(Dir, Location);
  std::string Where = "checkpoint '" + Path + "'";
  Expected<ExternalFile> F = ExternalFile::open(Dir, Location);
  if (!F)
    return makeError("cannot read " + Where + ": " + toString(F.takeError()));
  if (!F->exists())
    return makeError("cannot read " + Where + ": No such file or directory");
  if (F->getSize() < int64_t(CheckpointHeaderSize))
    return makeError(Where + " is truncated: " + Twine(F->getSize()) +
                     " bytes, less than its header");
  Expected<std::vector<uint8_t>> Header = F->read(0, CheckpointHeaderSize);
  if (!Header)
    return makeError(Where + ": " + toString(Header.takeError()));
  if (std::memcmp(Header->data(), HeaderMagic, sizeof(HeaderMagic) - 1) != 0)
    return makeError(Where +
                     " is not an autopar checkpoint shard (bad header)");
  for (const CheckpointTensor &T : Index.Tensors) {
    std::string TWhere = Where + ": tensor '" + T.Name + "'";
    if (T.Offset > uint64_t(F->getSize()) ||
        T.Length > uint64_t(F->getSize()) - T.Offset)
      return makeError(TWhere + " (offset " + Twine(T.Offset) + ", length " +
                       Twine(T.Length) + ") is past the end of the file (" +
                       Twine(F->getSize()) + " bytes): it is truncated");
    Expected<std::vector<uint8_t>> Bytes =
        F->read(int64_t(T.Offset), int64_t(T.Length));
    if (!Bytes)
      return makeError(TWhere + ": " + toString(Bytes.takeError()));
    uint32_t Crc = crc32(*Bytes);
    if (Crc != T.Crc32)
      return makeError(TWhere + ": CRC32 " + formatCrc(Crc) +
                       " does not match the index's " + formatCrc(T.Crc32) +
                       ": the data is corrupt");
    if (Error E = Take(T, *Bytes))
      return E;
  }
  if (uint64_t(F->getSize()) != Index.FileSize)
    return makeError(Where + " has " + Twine(F->getSize()) +
                     " bytes; its index says " + Twine(Index.FileSize));
  return Error::success();
}
