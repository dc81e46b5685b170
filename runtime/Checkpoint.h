//===- Checkpoint.h - Training state on disk, per rank ----------*- C++ -*-===//
//
// A checkpoint of step N is the folder D/step_<N>/ with, for each rank R:
//   rank<R>.bin   a 64-byte header ("AUTOPAR-CHECKPOINT 1\n", then zeros),
//                 then each tensor's bytes (the layout of
//                 weights/TensorBytes.h) at a 64-byte aligned offset;
//   rank<R>.json  its index (CheckpointIndex): the step, the rank and the
//                 number of ranks, the program and graph, the data position
//                 (--data, the token file position, the random generator's
//                 state), the optimizer's step count and the loss scale
//                 (runtime/LossScaler.h; both optional: older checkpoints
//                 lack them), the shard file's name and size, and one entry per
//                 tensor: name, dtype, shape, offset, length and CRC32.
// D/latest names the newest complete checkpoint ("step_<N>\n").
//
// Writing is crash safe. Every rank writes its shard into D/step_<N>.tmp/
// and fsyncs the files and the folder (writeCheckpointShard); after a
// barrier over the ranks, rank 0 renames the folder to D/step_<N> and
// fsyncs D, then writes D/latest.tmp, fsyncs it, renames it to D/latest and
// fsyncs D again (commitCheckpoint); only then are older checkpoints
// deleted (pruneCheckpoints). A crash at any point leaves D/latest naming a
// complete checkpoint, or missing when none was committed yet.
//
// Tensors are keyed by parameter name, never by position, so that a program
// compiled under another plan loads a checkpoint whenever its logical
// tensors match (matchCheckpointTensors); a multi-rank loader reads every
// rank's index and reshards. Reading (readCheckpointIndex,
// readCheckpointTensors) trusts nothing in the files: the index is checked
// (format, version, names, dtypes, shapes, every range inside the shard)
// and every tensor's CRC32 is verified; errors name the file and the
// tensor. Files are opened through weights/ExternalFile.h (no symbolic
// links, no hard links, ranges checked before reading).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CHECKPOINT_H
#define AUTOPAR_RUNTIME_CHECKPOINT_H

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// The logical tensor a checkpoint entry holds: what a program's parameter
/// must be to load it.
struct CheckpointTensorSpec {
  std::string Name;
  ElementType Elem = ElementType::F32;
  llvm::SmallVector<int64_t, 4> Shape;
  /// Where this block lies in the logical tensor it is part of (a shard of
  /// a `local = 1` parameter): the logical shape and the block's first
  /// index per dimension. A whole tensor has LogicalShape = Shape and a
  /// zero Origin. Loaders under another plan assemble their blocks from
  /// these.
  llvm::SmallVector<int64_t, 4> LogicalShape, Origin;
};

/// One tensor of a shard: its index entry.
struct CheckpointTensor : CheckpointTensorSpec {
  /// Where its bytes are in the shard file.
  uint64_t Offset = 0, Length = 0;
  /// llvm::crc32 of those bytes.
  uint32_t Crc32 = 0;
};

/// A rank's index file (rank<R>.json).
struct CheckpointIndex {
  static constexpr int64_t Version = 1;

  /// The step whose optimizer update the state includes.
  int64_t Step = 0;
  int Rank = 0, NumRanks = 1;
  /// The program file's name and the graph trained (informational: a
  /// checkpoint loads into any program whose parameters match).
  std::string Program, Graph;
  /// The data the rank read (--data) and where it stands after Step: the
  /// next token file position, and the random generator's state.
  std::string Data;
  uint64_t DataPosition = 0, DataRngState = 0;
  /// The optimizer steps taken up to Step: Step less the steps loss
  /// scaling skipped (`optimizer_step`; absent in older checkpoints, which
  /// mean Step).
  std::optional<int64_t> OptimizerStep;
  /// A dynamic loss scale after Step and its growth tracker (`loss_scale`:
  /// {scale, growth_tracker}; absent when the run scaled no loss).
  std::optional<double> LossScale;
  int64_t LossScaleGrowthTracker = 0;
  /// The shard file's name (in the checkpoint folder) and size.
  std::string File;
  uint64_t FileSize = 0;
  std::vector<CheckpointTensor> Tensors;

  /// The JSON text of the index.
  std::string toJSON() const;
  /// Parses and checks index text read from Path (named in errors): the
  /// format and version, the fields' types, known dtypes, non-negative
  /// shapes, unique names, each length equal to its type's size, and each
  /// range after the header and inside file_size.
  static llvm::Expected<CheckpointIndex> parse(llvm::StringRef Text,
                                               llvm::StringRef Path);
};

/// The size in bytes of the shard header.
constexpr uint64_t CheckpointHeaderSize = 64;

/// "step_<N>", and the step of such a name (none for any other name).
std::string getCheckpointName(int64_t Step);
std::optional<int64_t> parseCheckpointName(llvm::StringRef Name);
/// "rank<R>.bin" and "rank<R>.json".
std::string getCheckpointShardName(int Rank);
std::string getCheckpointIndexName(int Rank);

/// Where a test makes a checkpoint write crash (runtime tests only).
enum class CheckpointCrash {
  None,
  /// raise(SIGKILL) after writing part of the shard file.
  InShard,
  /// raise(SIGKILL) after renaming the folder, before updating D/latest.
  AfterRename,
};

/// Gives the bytes (Spec's size exactly) of the I-th tensor to save.
using CheckpointTensorReader =
    llvm::function_ref<llvm::Expected<std::vector<uint8_t>>(size_t I)>;

/// Writes this rank's shard of step Meta.Step into Dir/step_<N>.tmp/
/// (created with Dir when missing): Meta gives everything but the tensor
/// entries, the file name and its size; Tensors the logical tensors, whose
/// bytes Read gives one at a time. The files and the folder are fsync'ed.
llvm::Error writeCheckpointShard(llvm::StringRef Dir,
                                 const CheckpointIndex &Meta,
                                 llvm::ArrayRef<CheckpointTensorSpec> Tensors,
                                 CheckpointTensorReader Read,
                                 CheckpointCrash Crash = CheckpointCrash::None);

/// Rank 0, once the shards of all NumRanks ranks are written: checks that
/// their indexes are there, renames Dir/step_<N>.tmp to Dir/step_<N>
/// (replacing a leftover of a crash that Dir/latest does not name) and
/// points Dir/latest at it, fsync'ing as described above.
llvm::Error commitCheckpoint(llvm::StringRef Dir, int64_t Step, int NumRanks,
                             CheckpointCrash Crash = CheckpointCrash::None);

/// Rank 0, after commitCheckpoint(Dir, Step): deletes the checkpoints
/// older than the newest Keep up to Step (Keep 0 keeps them all), those
/// after Step (a crashed run's, which D/latest no longer names), and
/// unfinished step_<M>.tmp folders with M <= Step.
llvm::Error pruneCheckpoints(llvm::StringRef Dir, int64_t Step, unsigned Keep);

/// The step Dir/latest names; none when Dir/latest does not exist. An
/// error when it cannot be read, does not hold "step_<N>", or names a
/// folder that does not exist.
llvm::Expected<std::optional<int64_t>>
readLatestCheckpoint(llvm::StringRef Dir);

/// Reads and checks Dir/step_<Step>/rank<Rank>.json; an error unless it is
/// that step's and that rank's.
llvm::Expected<CheckpointIndex> readCheckpointIndex(llvm::StringRef Dir,
                                                    int64_t Step, int Rank);

/// An error unless Index holds exactly the tensors Want, with their dtypes
/// and shapes: it names the first tensor missing, extra or of another type.
/// IndexPath names the index in messages.
llvm::Error matchCheckpointTensors(const CheckpointIndex &Index,
                                   llvm::ArrayRef<CheckpointTensorSpec> Want,
                                   llvm::StringRef IndexPath);

/// Reads Index's shard (in Dir/step_<Index.Step>/), checks its header, each
/// tensor's range and CRC32 and the file's size, and hands each tensor's
/// bytes to Take in index order. Errors name the file and the tensor.
llvm::Error
readCheckpointTensors(llvm::StringRef Dir, const CheckpointIndex &Index,
                      llvm::function_ref<llvm::Error(const CheckpointTensor &,
                                                     llvm::ArrayRef<uint8_t>)>
                          Take);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CHECKPOINT_H
