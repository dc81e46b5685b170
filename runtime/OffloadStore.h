//===- OffloadStore.h - Offloaded parameters and states ---------*- C++ -*-===//
//
// Where offloaded tensors live between uses (docs/Offload.md): blocks keyed
// by the tensor's name, each holding the bytes, a version (the optimizer
// step that wrote it) and a CRC32C of the bytes (ISA-L's crc32_iscsi). Two
// tiers: `host` (memory of its own, apart from the executor's resident
// tensors) and `nvme` (one file per block per rank, DIR/rank<R>/<name>.blk,
// written with pwrite to a temporary file and renamed over the block, read
// with pread). A fetch checks the version the caller expects and the CRC:
// a stale or corrupt block is an OffloadCheckError naming the tensor, the
// file and what to do; it is never used. Thread safe: the prefetcher
// (OffloadPrefetcher) fetches on its own thread while the executor stores.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OFFLOADSTORE_H
#define AUTOPAR_RUNTIME_OFFLOADSTORE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace autopar {

/// CRC32C (Castagnoli, iSCSI) of Bytes: ISA-L's crc32_iscsi with the
/// standard pre- and post-inversion ("123456789" -> 0xE3069283).
uint32_t crc32c(llvm::ArrayRef<uint8_t> Bytes);

enum class OffloadTier { Host, Nvme };

/// "host" or "nvme" (the `placement` annotation's values); None otherwise.
std::optional<OffloadTier> parseOffloadTier(llvm::StringRef Placement);
llvm::StringRef getOffloadTierName(OffloadTier T);

/// A fetched block that fails its checks: stale (another version than the
/// one expected) or corrupt (its CRC32C or its header does not match).
/// autopar-run exits with RunOffloadCheckFailed (RunDriver.h).
class OffloadCheckError : public llvm::ErrorInfo<OffloadCheckError> {
public:
  static char ID;
  explicit OffloadCheckError(std::string Message)
      : Message(std::move(Message)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string Message;
};

class OffloadStore {
public:
  /// A store whose nvme blocks go to Dir/rank<Rank>/ (created); Dir may be
  /// empty when no tensor is placed on nvme (putting one is then an error).
  static llvm::Expected<std::unique_ptr<OffloadStore>>
  create(llvm::StringRef Dir, int Rank);
  ~OffloadStore();

  /// Stores Bytes as Name's block on tier T at Version, replacing the block
  /// Name had (a tensor keeps its tier).
  llvm::Error put(llvm::StringRef Name, OffloadTier T,
                  llvm::ArrayRef<uint8_t> Bytes, uint64_t Version);
  /// Name's bytes, checked: an OffloadCheckError unless the block holds
  /// Version and its bytes match their CRC32C.
  llvm::Expected<std::vector<uint8_t>> get(llvm::StringRef Name,
                                           uint64_t Version) const;

  /// Drops Name's block (its file too), if any.
  void erase(llvm::StringRef Name);

  /// The bytes stored on tier T (the blocks' payloads).
  uint64_t getBytes(OffloadTier T) const;
  bool contains(llvm::StringRef Name) const;
  /// The tier of Name's block, if it has one.
  std::optional<OffloadTier> getTier(llvm::StringRef Name) const;
  /// The file of Name's nvme block (empty for a host block).
  std::string getPath(llvm::StringRef Name) const;

  /// Test hooks: flip one byte of Name's stored payload (Corrupt), or
  /// rewrite its block with the version before the stored one (Stale).
  enum class Fault { Corrupt, Stale };
  llvm::Error injectFault(llvm::StringRef Name, Fault F);

private:
  OffloadStore(std::string Dir) : Dir(std::move(Dir)) {}
  struct Block {
    OffloadTier Tier = OffloadTier::Host;
    uint64_t Size = 0, Version = 0;
    uint32_t Crc = 0;
    /// Host tier: the bytes. Nvme tier: the file.
    std::vector<uint8_t> Bytes;
    std::string Path;
  };
  llvm::Error writeFile(const Block &B, llvm::StringRef Name,
                        llvm::ArrayRef<uint8_t> Bytes, uint64_t Version) const;

  std::string Dir;
  mutable std::mutex Mutex;
  llvm::StringMap<Block> Blocks;
};

/// Fetches blocks on a background thread, one request after another, so
/// that reading the next use's tensors overlaps the current node.
class OffloadPrefetcher {
public:
  /// One fetch's figures (for the trace).
  struct FetchEvent {
    std::string Name;
    /// Where the block was read from.
    OffloadTier Tier = OffloadTier::Host;
    uint64_t Bytes = 0;
    /// Requests queued or in flight when this one was issued (itself
    /// included).
    unsigned Depth = 0;
    /// Issued ahead of the node that needs it (else on demand).
    bool Prefetched = false;
    std::chrono::steady_clock::time_point Start, End;
  };

  explicit OffloadPrefetcher(const OffloadStore &Store);
  ~OffloadPrefetcher();

  /// Starts fetching Name at Version unless it already is.
  void prefetch(llvm::StringRef Name, uint64_t Version, bool Ahead = true);
  /// Whether a fetch of Name at Version has completed (take then returns
  /// at once).
  bool isReady(llvm::StringRef Name, uint64_t Version);
  /// Name's bytes at Version: the prefetched ones (waiting for them), or
  /// fetched now.
  llvm::Expected<std::vector<uint8_t>> take(llvm::StringRef Name,
                                            uint64_t Version);
  /// The fetches completed since the last call.
  std::vector<FetchEvent> drainEvents();

private:
  struct Request {
    std::string Name;
    uint64_t Version = 0;
    unsigned Depth = 0;
    bool Ahead = false;
    bool Done = false;
    /// The result: the bytes, or an error's message (CheckFailed: an
    /// OffloadCheckError's).
    std::vector<uint8_t> Bytes;
    std::string ErrorMessage;
    bool Failed = false, CheckFailed = false;
  };
  void loop();

  const OffloadStore &Store;
  std::mutex Mutex;
  std::condition_variable Wake, Finished;
  std::deque<std::shared_ptr<Request>> Queue;
  llvm::StringMap<std::shared_ptr<Request>> ByName;
  std::vector<FetchEvent> Events;
  unsigned InFlight = 0;
  bool Stopping = false;
  std::thread Worker;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_OFFLOADSTORE_H
