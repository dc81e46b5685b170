//===- OffloadStore.cpp - Offloaded parameters and optimizer state --------===//
//
// An nvme block's file: a 64-byte header (the magic `AUTOPAR-OFFLOAD1`,
// then little-endian u64 version, u64 payload size, u32 CRC32C of the
// payload, u32 CRC32C of the header's first 36 bytes, zeros), then the
// payload. Written whole to `<file>.tmp` with pwrite and renamed over the
// block, so a reader sees the old block or the new one, never a torn one;
// a torn temporary is never read. No fsync: the blocks are scratch state of
// one run (checkpoints are the durable copy, docs/Offload.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/OffloadStore.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

char OffloadCheckError::ID = 0;

/// Clears the upper halves of the vector registers. ISA-L's AVX-512 CRC
/// code returns with them dirty, and then every SSE instruction this
/// thread runs afterwards (the kernels compiled for the baseline ISA) pays
/// a merge with them: the CPU attention gradient ran 4-6x slower after an
/// offload store's CRC (Intel's optimization manual, "Mixing AVX code and
/// SSE code"). Nothing to clear without AVX.
#if defined(__x86_64__)
__attribute__((target("avx"))) static void zeroUpper() { _mm256_zeroupper(); }
static void clearUpperVectorHalves() {
  static const bool HasAvx = __builtin_cpu_supports("avx");
  if (HasAvx)
    zeroUpper();
}
#else
static void clearUpperVectorHalves() {}
#endif

uint32_t autopar::crc32c(ArrayRef<uint8_t> Bytes) {
  // crc32_iscsi neither inverts its initial value nor its result: the
  // standard CRC32C starts from ~0 and inverts at the end.
  uint32_t Crc = ~0u;
  const uint8_t *P = Bytes.data();
  size_t Left = Bytes.size();
  while (Left) {
    int Chunk = int(std::min<size_t>(Left, size_t(1) << 30));
    Crc = crc32_iscsi(const_cast<uint8_t *>(P), Chunk, Crc);
    P += Chunk;
    Left -= size_t(Chunk);
  }
  clearUpperVectorHalves();
  return ~Crc;
}

std::optional<OffloadTier> autopar::parseOffloadTier(StringRef Placement) {
  if (Placement == "host")
    return OffloadTier::Host;
  if (Placement == "nvme")
    return OffloadTier::Nvme;
  return std::nullopt;
}

StringRef autopar::getOffloadTierName(OffloadTier T) {
  switch (T) {
  case OffloadTier::Host:
    return "host";
  case OffloadTier::Nvme:
    return "nvme";
  }
  llvm_unreachable("unknown offload tier");
}

static constexpr char Magic[16] = {'A', 'U', 'T', 'O', 'P', 'A', 'R', '-',
                                   'O', 'F', 'F', 'L', 'O', 'A', 'D', '1'};
static constexpr size_t HeaderSize = 64;

static Error ioError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

static Error checkError(StringRef Name, StringRef File, const Twine &What) {
  std::string M;
  raw_string_ostream OS(M);
  OS << "offloaded tensor '" << Name << "'";
  if (!File.empty())
    OS << " (block '" << File << "')";
  OS << ": " << What
     << "; it is not used: remove the offload folder's blocks and restart "
        "from the last checkpoint (--resume)";
  return make_error<OffloadCheckError>(OS.str());
}

Expected<std::unique_ptr<OffloadStore>> OffloadStore::create(StringRef Dir,
                                                             int Rank) {
  std::string RankDir;
  if (!Dir.empty()) {
    SmallString<256> P(Dir);
    sys::path::append(P, "rank" + std::to_string(Rank));
    if (std::error_code EC = sys::fs::create_directories(P))
      return ioError("--offload-dir: cannot create '" + P +
                     "': " + EC.message());
    RankDir = P.str().str();
  }
  return std::unique_ptr<OffloadStore>(new OffloadStore(RankDir));
}

OffloadStore::~OffloadStore() {
  for (auto &Entry : Blocks)
    if (!Entry.second.Path.empty())
      sys::fs::remove(Entry.second.Path);
}

/// The block file's name: the tensor name with characters other than
/// letters, digits, '.', '-' and '_' written as %XX.
static std::string getBlockFileName(StringRef Name) {
  std::string F;
  for (char C : Name) {
    if (isAlnum(C) || C == '.' || C == '-' || C == '_')
      F += C;
    else
      F += "%" + utohexstr(uint8_t(C), false, 2);
  }
  return F + ".blk";
}

static void putLE(uint8_t *P, uint64_t V, unsigned N) {
  for (unsigned I = 0; I != N; ++I)
    P[I] = uint8_t(V >> (8 * I));
}
static uint64_t getLE(const uint8_t *P, unsigned N) {
  uint64_t V = 0;
  for (unsigned I = 0; I != N; ++I)
    V |= uint64_t(P[I]) << (8 * I);
  return V;
}

static Error pwriteAll(int FD, const uint8_t *P, size_t N, off_t Offset) {
  while (N) {
    ssize_t W = ::pwrite(FD, P, std::min<size_t>(N, size_t(1) << 30), Offset);
    if (W < 0 && errno == EINTR)
      continue;
    if (W <= 0)
      return errorCodeToError(std::error_code(errno, std::generic_category()));
    P += W;
    N -= size_t(W);
    Offset += W;
  }
  return Error::success();
}

static Expected<size_t> preadAll(int FD, uint8_t *P, size_t N, off_t Offset) {
  size_t Done = 0;
  while (Done != N) {
    ssize_t R = ::pread(FD, P + Done, std::min<size_t>(N - Done, 1u << 30),
                        Offset + off_t(Done));
    if (R < 0 && errno == EINTR)
      continue;
    if (R < 0)
      return errorCodeToError(std::error_code(errno, std::generic_category()));
    if (R == 0)
      break;
    Done += size_t(R);
  }
  return Done;
}

Error OffloadStore::writeFile(const Block &B, StringRef Name,
                              ArrayRef<uint8_t> Bytes, uint64_t Version) const {
  uint8_t Header[HeaderSize] = {};
  std::memcpy(Header, Magic, sizeof(Magic));
  putLE(Header + 16, Version, 8);
  putLE(Header + 24, Bytes.size(), 8);
  putLE(Header + 32, crc32c(Bytes), 4);
  putLE(Header + 36, crc32c(ArrayRef<uint8_t>(Header, 36)), 4);
  std::string Tmp = B.Path + ".tmp";
  int FD = ::open(Tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (FD < 0)
    return ioError("offloaded tensor '" + Name + "': cannot create '" + Tmp +
                   "': " + std::strerror(errno));
  Error E = pwriteAll(FD, Header, HeaderSize, 0);
  if (!E)
    E = pwriteAll(FD, Bytes.data(), Bytes.size(), HeaderSize);
  if (::close(FD) != 0 && !E)
    E = errorCodeToError(std::error_code(errno, std::generic_category()));
  if (E)
    return ioError("offloaded tensor '" + Name + "': cannot write '" + Tmp +
                   "': " + toString(std::move(E)));
  if (std::error_code EC = sys::fs::rename(Tmp, B.Path))
    return ioError("offloaded tensor '" + Name + "': cannot rename '" + Tmp +
                   "' to '" + B.Path + "': " + EC.message());
  return Error::success();
}

Error OffloadStore::put(StringRef Name, OffloadTier T, ArrayRef<uint8_t> Bytes,
                        uint64_t Version) {
  Block Copy;
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    auto [It, New] = Blocks.try_emplace(Name);
    Block &B = It->second;
    if (New) {
      B.Tier = T;
      if (T == OffloadTier::Nvme) {
        if (Dir.empty())
          return ioError("offloaded tensor '" + Name +
                         "' is placed on nvme: give autopar-run "
                         "--offload-dir DIR (a folder on the NVMe disk)");
        SmallString<256> P(Dir);
        sys::path::append(P, getBlockFileName(Name));
        B.Path = P.str().str();
      }
    }
    assert(B.Tier == T && "a tensor changes its offload tier");
    B.Size = Bytes.size();
    B.Version = Version;
    B.Crc = crc32c(Bytes);
    if (T == OffloadTier::Host) {
      B.Bytes.assign(Bytes.begin(), Bytes.end());
      return Error::success();
    }
    Copy.Path = B.Path;
  }
  // One writer per tensor (the executor's thread): the file is written
  // outside the lock.
  return writeFile(Copy, Name, Bytes, Version);
}

Expected<std::vector<uint8_t>> OffloadStore::get(StringRef Name,
                                                 uint64_t Version) const {
  Block B;
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    auto It = Blocks.find(Name);
    if (It == Blocks.end())
      return ioError("offloaded tensor '" + Name + "' was never stored");
    const Block &S = It->second;
    B.Tier = S.Tier;
    B.Size = S.Size;
    B.Version = S.Version;
    B.Crc = S.Crc;
    B.Path = S.Path;
    if (S.Tier == OffloadTier::Host)
      B.Bytes = S.Bytes;
  }
  auto Hex = [](uint32_t V) {
    std::string S;
    raw_string_ostream(S) << format_hex(V, 10);
    return S;
  };
  if (B.Tier == OffloadTier::Host) {
    if (B.Version != Version)
      return checkError(Name, "",
                        "host block holds step " + Twine(B.Version) +
                            "'s version where step " + Twine(Version) +
                            "'s is expected (stale)");
    uint32_t Crc = crc32c(B.Bytes);
    if (Crc != B.Crc)
      return checkError(Name, "",
                        "host block fails its CRC32C check (stored " +
                            Hex(B.Crc) + ", computed " + Hex(Crc) +
                            "): the memory was overwritten");
    return std::move(B.Bytes);
  }

  int FD = ::open(B.Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (FD < 0)
    return checkError(Name, B.Path,
                      Twine("cannot open it: ") + std::strerror(errno));
  auto Close = make_scope_exit([&] { ::close(FD); });
  uint8_t Header[HeaderSize];
  Expected<size_t> Got = preadAll(FD, Header, HeaderSize, 0);
  if (!Got)
    return checkError(Name, B.Path,
                      "cannot read it: " + toString(Got.takeError()));
  if (*Got != HeaderSize || std::memcmp(Header, Magic, sizeof(Magic)) ||
      getLE(Header + 36, 4) != crc32c(ArrayRef<uint8_t>(Header, 36)))
    return checkError(Name, B.Path,
                      "its header is damaged (not an autopar offload block, "
                      "or the file was changed)");
  uint64_t FileVersion = getLE(Header + 16, 8), Size = getLE(Header + 24, 8);
  uint32_t StoredCrc = uint32_t(getLE(Header + 32, 4));
  if (FileVersion != Version)
    return checkError(Name, B.Path,
                      "the block holds step " + Twine(FileVersion) +
                          "'s version where step " + Twine(Version) +
                          "'s is expected (stale: another run wrote it, or "
                          "a write was lost)");
  if (Size != B.Size)
    return checkError(Name, B.Path,
                      "the block holds " + Twine(Size) + " bytes where " +
                          Twine(B.Size) + " are expected");
  std::vector<uint8_t> Bytes(Size);
  Got = preadAll(FD, Bytes.data(), Size, HeaderSize);
  if (!Got)
    return checkError(Name, B.Path,
                      "cannot read it: " + toString(Got.takeError()));
  if (*Got != Size)
    return checkError(Name, B.Path,
                      "the file is truncated (" + Twine(*Got) + " of " +
                          Twine(Size) + " payload bytes)");
  uint32_t Crc = crc32c(Bytes);
  if (Crc != StoredCrc || Crc != B.Crc)
    return checkError(Name, B.Path,
                      "the block fails its CRC32C check (stored " +
                          Hex(StoredCrc) + ", computed " + Hex(Crc) +
                          "): the file was changed or the disk is failing");
  return Bytes;
}

uint64_t OffloadStore::getBytes(OffloadTier T) const {
  std::lock_guard<std::mutex> Lock(Mutex);
  uint64_t N = 0;
  for (const auto &Entry : Blocks)
    if (Entry.second.Tier == T)
      N += Entry.second.Size;
  return N;
}

void OffloadStore::erase(StringRef Name) {
  std::string Path;
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    auto It = Blocks.find(Name);
    if (It == Blocks.end())
      return;
    Path = It->second.Path;
    Blocks.erase(It);
  }
  if (!Path.empty())
    sys::fs::remove(Path);
}

bool OffloadStore::contains(StringRef Name) const {
  std::lock_guard<std::mutex> Lock(Mutex);
  return Blocks.count(Name);
}

std::optional<OffloadTier> OffloadStore::getTier(StringRef Name) const {
  std::lock_guard<std::mutex> Lock(Mutex);
  auto It = Blocks.find(Name);
  if (It == Blocks.end())
    return std::nullopt;
  return It->second.Tier;
}

std::string OffloadStore::getPath(StringRef Name) const {
  std::lock_guard<std::mutex> Lock(Mutex);
  auto It = Blocks.find(Name);
  return It == Blocks.end() ? std::string() : It->second.Path;
}

Error OffloadStore::injectFault(StringRef Name, Fault F) {
  std::unique_lock<std::mutex> Lock(Mutex);
  auto It = Blocks.find(Name);
  if (It == Blocks.end())
    return ioError("test hook: no offloaded tensor '" + Name + "'");
  Block &B = It->second;
  if (F == Fault::Stale) {
    if (B.Version == 0)
      return ioError("test hook: '" + Name + "' has no earlier version");
    Lock.unlock();
    Expected<std::vector<uint8_t>> Bytes = get(Name, B.Version);
    if (!Bytes)
      return Bytes.takeError();
    Block Copy;
    Copy.Path = B.Path;
    if (B.Tier == OffloadTier::Host) {
      B.Version -= 1;
      return Error::success();
    }
    return writeFile(Copy, Name, *Bytes, B.Version - 1);
  }
  if (B.Size == 0)
    return ioError("test hook: '" + Name + "' is empty");
  if (B.Tier == OffloadTier::Host) {
    B.Bytes[B.Size / 2] ^= 0x20;
    return Error::success();
  }
  int FD = ::open(B.Path.c_str(), O_RDWR | O_CLOEXEC);
  if (FD < 0)
    return ioError("test hook: cannot open '" + B.Path + "'");
  uint8_t C = 0;
  off_t At = off_t(HeaderSize + B.Size / 2);
  Error E = Error::success();
  if (::pread(FD, &C, 1, At) != 1)
    E = ioError("test hook: cannot read '" + B.Path + "'");
  C ^= 0x20;
  if (!E && ::pwrite(FD, &C, 1, At) != 1)
    E = ioError("test hook: cannot write '" + B.Path + "'");
  ::close(FD);
  return E;
}

//===----------------------------------------------------------------------===//
// OffloadPrefetcher
//===----------------------------------------------------------------------===//

OffloadPrefetcher::OffloadPrefetcher(const OffloadStore &Store)
    : Store(Store), Worker([this] { loop(); }) {}

OffloadPrefetcher::~OffloadPrefetcher() {
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    Stopping = true;
  }
  Wake.notify_all();
  Worker.join();
}

void OffloadPrefetcher::prefetch(StringRef Name, uint64_t Version, bool Ahead) {
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    auto It = ByName.find(Name);
    if (It != ByName.end() && It->second->Version == Version)
      return;
    auto R = std::make_shared<Request>();
    R->Name = Name.str();
    R->Version = Version;
    R->Ahead = Ahead;
    R->Depth = ++InFlight;
    ByName[Name] = R;
    Queue.push_back(R);
  }
  Wake.notify_all();
}

bool OffloadPrefetcher::isReady(StringRef Name, uint64_t Version) {
  std::lock_guard<std::mutex> Lock(Mutex);
  auto It = ByName.find(Name);
  return It != ByName.end() && It->second->Version == Version &&
         It->second->Done;
}

Expected<std::vector<uint8_t>> OffloadPrefetcher::take(StringRef Name,
                                                       uint64_t Version) {
  prefetch(Name, Version, /*Ahead=*/false);
  std::unique_lock<std::mutex> Lock(Mutex);
  std::shared_ptr<Request> R = ByName.lookup(Name);
  Finished.wait(Lock, [&] { return R->Done; });
  ByName.erase(Name);
  if (!R->Failed)
    return std::move(R->Bytes);
  if (R->CheckFailed)
    return make_error<OffloadCheckError>(R->ErrorMessage);
  return createStringError(inconvertibleErrorCode(), R->ErrorMessage);
}

std::vector<OffloadPrefetcher::FetchEvent> OffloadPrefetcher::drainEvents() {
  std::lock_guard<std::mutex> Lock(Mutex);
  return std::exchange(Events, {});
}

void OffloadPrefetcher::loop() {
  std::unique_lock<std::mutex> Lock(Mutex);
  for (;;) {
    Wake.wait(Lock, [&] { return Stopping || !Queue.empty(); });
    if (Stopping)
      return;
    std::shared_ptr<Request> R = Queue.front();
    Queue.pop_front();
    Lock.unlock();
    FetchEvent E;
    E.Name = R->Name;
    E.Depth = R->Depth;
    E.Prefetched = R->Ahead;
    E.Tier = Store.getTier(R->Name).value_or(OffloadTier::Host);
    E.Start = std::chrono::steady_clock::now();
    Expected<std::vector<uint8_t>> Bytes = Store.get(R->Name, R->Version);
    E.End = std::chrono::steady_clock::now();
    Lock.lock();
    if (Bytes) {
      E.Bytes = Bytes->size();
      R->Bytes = std::move(*Bytes);
    } else {
      R->Failed = true;
      Error Err = Bytes.takeError();
      R->CheckFailed = Err.isA<OffloadCheckError>();
      R->ErrorMessage = toString(std::move(Err));
    }
    R->Done = true;
    --InFlight;
    Events.push_back(std::move(E));
    Finished.notify_all();
  }
}
