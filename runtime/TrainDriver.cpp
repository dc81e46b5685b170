//===- TrainDriver.cpp - autopar-run's training loop ----------------------===//
//
// See TrainDriver.h. Token ids are read from the data file once; random
// data comes from a 64-bit LCG seeded with --seed, so two runs with the same
// options see the same batches. A checkpoint records where the data stands
// (the file position, the generator's state), so a resumed run sees the
// batches the uninterrupted run would have seen. SIGTERM only sets a flag,
// which the loop reads between steps.
//
//===----------------------------------------------------------------------===//

#include "runtime/TrainDriver.h"
#include "runtime/BackendFactory.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/LossScaler.h"
#include "runtime/MeshGroups.h"
#include "runtime/OffloadStore.h"
#include "runtime/ParamInit.h"
#include "runtime/RunDriver.h"
#include "runtime/RunMonitoring.h"
#include "runtime/StepProfile.h"
#include "runtime/TrainReports.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/CpuCommunicator.h"

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

using namespace autopar;
using namespace llvm;

/// Why a run stops: its exit code (TrainDriver.h) and what to print.
static Error fail(int Code, const Twine &Message = "") {
  return makeExitError(Code, Message);
}

Error TrainOptions::validate() const {
  auto Bad = [](const Twine &Message) {
    return createStringError(inconvertibleErrorCode(), Message.str());
  };
  if (ProgramFile.empty())
    return Bad("a program (PROGRAM.air) is required");
  if (Steps < 1)
    return Bad("--steps must be 1 or more");
  if (Optimizer != "adamw" && Optimizer != "sgd")
    return Bad("--optimizer must be adamw or sgd, not '" + Optimizer + "'");
  if (Lr < 0 || Eps <= 0 || WeightDecay < 0 || Beta1 < 0 || Beta1 >= 1 ||
      Beta2 < 0 || Beta2 >= 1)
    return Bad("--lr and --weight-decay must be >= 0, --eps > 0, and "
               "--beta1 and --beta2 in [0, 1)");
  if (Threads < 1)
    return Bad("--threads must be 1 or more");
  if (!(ClipGrad >= 0) || std::isinf(ClipGrad))
    return Bad("--clip-grad must be a finite norm >= 0 (0: no clipping)");
  if (Expected<LossScaler> L =
          LossScaler::parse(LossScale.empty() ? "none" : LossScale,
                            InitLossScale, LossScaleWindow);
      !L)
    return L.takeError();
  if (!parseLrDecay(LrScheduleName))
    return Bad("--lr-schedule must be constant, linear or cosine, not '" +
               LrScheduleName + "'");
  if (Error E = getSchedule().validate())
    return E;
  if (Error E = checkBackendName(Backend))
    return E;
  if (CommTimeoutSeconds < 0 || CommTimeoutSeconds > 1e9)
    return Bad("--comm-timeout must be a positive number of seconds");
  if (CheckpointEvery < 0 || KeepCheckpoints < 0 || CheckpointMinutes < 0)
    return Bad("--checkpoint-every, --checkpoint-minutes and "
               "--keep-checkpoints must be >= 0");
  if (MetricsPort < -1 || MetricsPort > 65535)
    return Bad("--metrics-port must be a port number (0: any free port)");
  if (HeartbeatSeconds < 0 || HeartbeatSeconds > 86400)
    return Bad("--heartbeat must be a number of seconds in [0, 86400]");
  if (CheckpointDir.empty() &&
      (CheckpointEvery > 0 || CheckpointMinutes > 0 || Resume))
    return Bad(Twine(Resume                  ? "--resume"
                     : CheckpointMinutes > 0 ? "--checkpoint-minutes"
                                             : "--checkpoint-every") +
               " needs --checkpoint-dir");
  return Error::success();
}

namespace {

/// Where a step's tokens come from: the seeded generator, or a file of
/// int32 tokens mapped into memory, of which each data-parallel rank reads
/// only its rows of each global batch (and checks that they are in the
/// vocabulary as it reads them). The position is part of the checkpoint.
class TokenSource {
public:
  static Expected<TokenSource> open(const TrainOptions &O, int64_t Vocab) {
    TokenSource S;
    S.Vocab = Vocab;
    S.State = O.Seed * 2654435761ULL + 1;
    if (O.Data == "random")
      return S;
    ErrorOr<std::unique_ptr<MemoryBuffer>> B = MemoryBuffer::getFile(
        O.Data, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!B)
      return createStringError(inconvertibleErrorCode(),
                               "cannot read --data '" + O.Data +
                                   "': " + B.getError().message());
    StringRef Bytes = (*B)->getBuffer();
    if (Bytes.empty() || Bytes.size() % 4)
      return createStringError(inconvertibleErrorCode(),
                               "--data '" + O.Data +
                                   "' must hold int32 tokens (a non-empty "
                                   "multiple of 4 bytes)");
    S.Path = O.Data;
    S.File = std::move(*B);
    S.NumTokens = Bytes.size() / 4;
    return S;
  }

  /// Where the source stands: the next token file position and the random
  /// generator's state.
  uint64_t getPosition() const { return Pos; }
  uint64_t getRngState() const { return State; }
  void restore(uint64_t Position, uint64_t RngState) {
    Pos = NumTokens ? size_t(Position % NumTokens) : 0;
    State = RngState;
  }

  /// Tokens [First, First + Count) of the next Total (a global batch, of
  /// which this rank keeps those rows); the source then moves past all
  /// Total. A file wraps around at its end.
  Expected<std::vector<int64_t>> next(int64_t Total, int64_t First,
                                      int64_t Count) {
    std::vector<int64_t> Out(Count);
    if (!File) {
      // Every rank draws the whole batch: the same sequence on each.
      for (int64_t I = 0; I != Total; ++I) {
        State = State * 6364136223846793005ULL + 1442695040888963407ULL;
        if (I >= First && I < First + Count)
          Out[I - First] = int64_t((State >> 33) % uint64_t(Vocab));
      }
      return Out;
    }
    const char *Bytes = File->getBufferStart();
    for (int64_t I = 0; I != Count; ++I) {
      size_t At = (Pos + size_t(First + I)) % NumTokens;
      uint32_t U = uint8_t(Bytes[4 * At]) | uint8_t(Bytes[4 * At + 1]) << 8 |
                   uint8_t(Bytes[4 * At + 2]) << 16 |
                   uint32_t(uint8_t(Bytes[4 * At + 3])) << 24;
      int32_t T;
      std::memcpy(&T, &U, 4);
      if (T < 0 || (Vocab > 0 && T >= Vocab))
        return createStringError(inconvertibleErrorCode(),
                                 "--data '" + Path + "': token " + Twine(T) +
                                     " at position " + Twine(At) +
                                     " is outside the vocabulary [0, " +
                                     Twine(Vocab) + ")");
      Out[I] = T;
    }
    Pos = (Pos + size_t(Total % int64_t(NumTokens))) % NumTokens;
    return Out;
  }

private:
  std::string Path;
  std::unique_ptr<MemoryBuffer> File;
  size_t NumTokens = 0;
  size_t Pos = 0;
  int64_t Vocab = 0;
  uint64_t State = 0;
};

} // namespace

static HostTensor scalarTensor(float V) {
  HostTensor H;
  H.Elem = ElementType::F32;
  H.Bytes.resize(4);
  std::memcpy(H.Bytes.data(), &V, 4);
  return H;
}

/// Parses and verifies the program in Path into M (kept with its SM);
/// an ExitError says what is wrong.
static Error parseProgram(StringRef Path, SourceMgr &SM,
                          std::unique_ptr<Module> &M) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return fail(RunIOError,
                "cannot read '" + Path + "': " + Buffer.getError().message());
  SM.AddNewSourceBuffer(std::move(*Buffer), SMLoc());
  DiagnosticEngine Diag(&SM, Path);
  M = parseModule(SM, Diag);
  if (!M || failed(verifyModule(*M, Diag)))
    return fail(RunInvalidInput);
  if (M->getGraphs().empty())
    return fail(RunInvalidInput, Path + ": no graph");
  return Error::success();
}

/// How many ranks a node's vocabulary is split over (`mesh`, `mesh_axis`:
/// the vocabulary-parallel embedding and loss), else 1.
static int64_t getVocabularyParts(const Node &N) {
  const Attribute *MeshName = N.getAttr("mesh");
  const Attribute *Axis = N.getAttr("mesh_axis");
  const Mesh *M = MeshName && Axis && N.getGraph()
                      ? N.getGraph()->lookupMesh(MeshName->getString())
                      : nullptr;
  return M ? M->getAxisSize(Axis->getString()).value_or(1) : 1;
}

/// The vocabulary: the classes of the loss's logits, else 0.
static int64_t findVocabulary(const Graph &G) {
  for (const Node &N : G.getNodes())
    if (N.getOp() == OpId::CrossEntropyLoss)
      return N.getOperand(0)->getType().getStaticSizes().back() *
             getVocabularyParts(N);
  // A first pipeline stage has no loss: the rows of the embedding table
  // that the first Gather of an integer tensor reads.
  for (const Node &N : G.getNodes())
    if (N.getOp() == OpId::Gather && N.getNumOperands() == 2 &&
        N.getOperand(1) &&
        !isFloatElementType(N.getOperand(1)->getType().getElementType()) &&
        N.getOperand(0)->getType().getRank() == 2 &&
        N.getOperand(0)->getType().hasStaticShape())
      return N.getOperand(0)->getType().getStaticSizes()[0] *
             getVocabularyParts(N);
  return 0;
}

namespace {

/// The environment's test hooks (TrainDriver.h).
struct TestHooks {
  unsigned StepDelayMs = 0;
  CheckpointCrash Crash = CheckpointCrash::None;
  /// AUTOPAR_TEST_OFFLOAD_FAULT: the fault, the tensor, after which step.
  std::optional<OffloadStore::Fault> OffloadFault;
  std::string OffloadFaultName;
  int64_t OffloadFaultStep = 1;
  /// AUTOPAR_TEST_INF_GRAD_STEP: the step whose loss scale is made
  /// infinite (0: none).
  int64_t InfGradStep = 0;

  static Expected<TestHooks> read() {
    TestHooks H;
    if (const char *Inf = std::getenv("AUTOPAR_TEST_INF_GRAD_STEP"))
      if (StringRef(Inf).getAsInteger(10, H.InfGradStep) || H.InfGradStep < 1)
        return createStringError(inconvertibleErrorCode(),
                                 "AUTOPAR_TEST_INF_GRAD_STEP must be a step "
                                 "number, not '" +
                                     Twine(Inf) + "'");
    if (const char *Delay = std::getenv("AUTOPAR_TEST_STEP_DELAY_MS"))
      if (StringRef(Delay).getAsInteger(10, H.StepDelayMs))
        return createStringError(inconvertibleErrorCode(),
                                 "AUTOPAR_TEST_STEP_DELAY_MS must be a number "
                                 "of milliseconds, not '" +
                                     Twine(Delay) + "'");
    if (const char *Crash = std::getenv("AUTOPAR_TEST_CRASH_IN_CHECKPOINT")) {
      StringRef C = Crash;
      if (C == "1" || C == "shard")
        H.Crash = CheckpointCrash::InShard;
      else if (C == "rename")
        H.Crash = CheckpointCrash::AfterRename;
      else if (!C.empty() && C != "0")
        return createStringError(inconvertibleErrorCode(),
                                 "AUTOPAR_TEST_CRASH_IN_CHECKPOINT must be 1, "
                                 "shard or rename, not '" +
                                     C + "'");
    }
    if (const char *Fault = std::getenv("AUTOPAR_TEST_OFFLOAD_FAULT")) {
      SmallVector<StringRef, 3> Parts;
      StringRef(Fault).split(Parts, ':');
      bool Ok = Parts.size() >= 2 && Parts.size() <= 3 && !Parts[1].empty();
      if (Ok && Parts[0] == "corrupt")
        H.OffloadFault = OffloadStore::Fault::Corrupt;
      else if (Ok && Parts[0] == "stale")
        H.OffloadFault = OffloadStore::Fault::Stale;
      else
        Ok = false;
      if (Ok && Parts.size() == 3)
        Ok = !Parts[2].getAsInteger(10, H.OffloadFaultStep);
      if (!Ok)
        return createStringError(inconvertibleErrorCode(),
                                 "AUTOPAR_TEST_OFFLOAD_FAULT must be "
                                 "corrupt:NAME[:STEP] or stale:NAME[:STEP], "
                                 "not '" +
                                     Twine(Fault) + "'");
      H.OffloadFaultName = Parts[1].str();
    }
    return H;
  }
};

/// Set by SIGTERM; read between steps.
volatile std::sig_atomic_t TermRequested = 0;

void onTerm(int) { TermRequested = 1; }

/// Catches SIGTERM while it lives; restores the previous action after.
class TermHandler {
public:
  TermHandler() {
    TermRequested = 0;
    struct sigaction Action;
    std::memset(&Action, 0, sizeof(Action));
    Action.sa_handler = onTerm;
    sigemptyset(&Action.sa_mask);
    Action.sa_flags = SA_RESTART;
    Installed = ::sigaction(SIGTERM, &Action, &Previous) == 0;
  }
  ~TermHandler() {
    if (Installed)
      ::sigaction(SIGTERM, &Previous, nullptr);
  }
  TermHandler(const TermHandler &) = delete;
  TermHandler &operator=(const TermHandler &) = delete;

private:
  struct sigaction Previous;
  bool Installed = false;
};

/// What a rank saves and loads: the program's parameters, keyed by name.
struct TrainState {
  const TrainOptions &O;
  const Graph &G;
  Executor &X;
  TokenSource &Source;
  Backend &B;
  /// This rank and the job's ranks.
  int Rank = 0, NumRanks = 1;
  /// The loss scale (runtime/LossScaler.h) and the optimizer steps taken
  /// (steps that loss scaling skipped do not count), saved and loaded with
  /// the parameters.
  LossScaler Scaler{};
  int64_t OptimizerSteps = 0;

  /// Waits until every rank of the job gets here (an all-reduce of one
  /// element over all of them).
  Error barrier() {
    if (NumRanks == 1)
      return Error::success();
    Expected<Tensor> T = B.allocate(ElementType::F32, {1});
    if (!T)
      return T.takeError();
    SmallVector<int, 8> All;
    for (int R = 0; R != NumRanks; ++R)
      All.push_back(R);
    CommunicationLabel Label("the checkpoint barrier");
    Error E = B.getCommunicator().allReduce(*T, *T, All, B.getCommTimeout());
    B.deallocate(*T);
    return E;
  }

  std::vector<CheckpointTensorSpec> getSpecs() const {
    std::vector<CheckpointTensorSpec> Specs;
    for (const std::unique_ptr<Value> &P : G.getParams()) {
      CheckpointTensorSpec S;
      S.Name = P->getName().str();
      S.Elem = P->getType().getElementType();
      ShardView V = getShardView(*P, Rank);
      S.Shape.assign(V.Local.begin(), V.Local.end());
      S.LogicalShape.assign(V.Logical.begin(), V.Logical.end());
      S.Origin = V.Origin;
      Specs.push_back(std::move(S));
    }
    return Specs;
  }

  /// Writes the checkpoint of Step.
  Error save(int64_t Step, CheckpointCrash Crash) {
    CheckpointIndex Meta;
    Meta.Step = Step;
    Meta.Rank = Rank;
    Meta.NumRanks = NumRanks;
    Meta.Program = sys::path::filename(O.ProgramFile).str();
    Meta.Graph = G.getName().str();
    Meta.Data = O.Data;
    Meta.DataPosition = Source.getPosition();
    Meta.DataRngState = Source.getRngState();
    Meta.OptimizerStep = OptimizerSteps;
    if (Scaler.Kind == LossScaler::Mode::Dynamic) {
      Meta.LossScale = Scaler.Scale;
      Meta.LossScaleGrowthTracker = Scaler.GrowthTracker;
    }
    ArrayRef<std::unique_ptr<Value>> Params = G.getParams();
    std::vector<CheckpointTensorSpec> Specs = getSpecs();
    auto Read = [&](size_t I) -> Expected<std::vector<uint8_t>> {
      Expected<HostTensor> H = X.readParam(*Params[I]);
      if (!H)
        return H.takeError();
      // A padded shard saves its rows inside the logical value (a prefix
      // of its bytes), not its padding.
      int64_t N = 1;
      for (int64_t D : Specs[I].Shape)
        N *= D;
      size_t Bytes = size_t(N) * (getElementTypeBits(Specs[I].Elem) / 8);
      if (Bytes < H->Bytes.size())
        H->Bytes.resize(Bytes);
      return std::move(H->Bytes);
    };
    std::string Where = "checkpoint of step " + std::to_string(Step) + ": ";
    if (Error E =
            writeCheckpointShard(O.CheckpointDir, Meta, Specs, Read, Crash))
      return fail(RunIOError, Where + toString(std::move(E)));
    // Rank 0 commits only when every rank's shard is on disk, and the
    // others wait for the commit (so that its pruning never meets a shard
    // still being written).
    if (Error E = barrier())
      return fail(RunFailure, Where + toString(std::move(E)));
    if (Rank == 0) {
      if (Error E = commitCheckpoint(O.CheckpointDir, Step, NumRanks, Crash))
        return fail(RunIOError, Where + toString(std::move(E)));
      unsigned Keep = unsigned(std::min<int64_t>(O.KeepCheckpoints, UINT_MAX));
      if (Error E = pruneCheckpoints(O.CheckpointDir, Step, Keep))
        WithColor::warning(errs(), "autopar-run")
            << toString(std::move(E)) << '\n';
    }
    if (Error E = barrier())
      return fail(RunFailure, Where + toString(std::move(E)));
    return Error::success();
  }

  /// Loads checkpoint Step written under another layout (another plan or
  /// rank count): every rank's shard of it is read, and each parameter's
  /// block on this rank is assembled from the blocks of its logical tensor
  /// that cover it (`logical_shape` and `origin` in the indexes).
  Error loadResharded(int64_t Step, ArrayRef<CheckpointTensorSpec> Specs) {
    StringRef Dir = O.CheckpointDir;
    std::string Where =
        "checkpoint '" + (Dir + "/" + getCheckpointName(Step)).str() + "'";
    struct Target {
      const CheckpointTensorSpec *Spec;
      const Value *Param;
      std::vector<uint8_t> Bytes, Covered;
    };
    StringMap<Target> Targets;
    ArrayRef<std::unique_ptr<Value>> Params = G.getParams();
    for (size_t I = 0; I != Specs.size(); ++I) {
      Target &T = Targets[Specs[I].Name];
      T.Spec = &Specs[I];
      T.Param = Params[I].get();
      int64_t N = 1;
      for (int64_t D : Specs[I].Shape)
        N *= D;
      T.Bytes.resize(*Params[I]->getType().getStaticSizeInBytes());
      T.Covered.assign(N, 0);
    }
    Expected<CheckpointIndex> First = readCheckpointIndex(Dir, Step, 0);
    if (!First)
      return fail(RunInvalidInput, toString(First.takeError()));
    for (int R = 0; R != First->NumRanks; ++R) {
      Expected<CheckpointIndex> Index = readCheckpointIndex(Dir, Step, R);
      if (!Index)
        return fail(RunInvalidInput, toString(Index.takeError()));
      Error E = readCheckpointTensors(
          Dir, *Index,
          [&](const CheckpointTensor &C, ArrayRef<uint8_t> Bytes) -> Error {
            auto It = Targets.find(C.Name);
            if (It == Targets.end())
              return createStringError(
                  inconvertibleErrorCode(),
                  Where + ": tensor '" + C.Name + "' (rank " + Twine(R) +
                      ") is not a parameter of the program");
            Target &T = It->second;
            auto Mismatch = [&] {
              return createStringError(
                  inconvertibleErrorCode(),
                  Where + ": tensor '" + C.Name + "' is part of " +
                      formatTensorType(C.Elem, C.LogicalShape) +
                      "; the program's parameter is part of " +
                      formatTensorType(T.Spec->Elem, T.Spec->LogicalShape));
            };
            if (C.Elem != T.Spec->Elem ||
                getNumElements(C.LogicalShape) !=
                    getNumElements(T.Spec->LogicalShape))
              return Mismatch();
            int64_t Count = 1;
            for (int64_t D : C.Shape)
              Count *= D;
            size_t ElemBytes = Count ? Bytes.size() / size_t(Count) : 1;
            // The blocks may be given in different views of the logical
            // tensor (a parameter in pieces: ParamInit.h).
            if (!copyBlockBetweenViews(Bytes, C.Shape, C.Origin, C.LogicalShape,
                                       T.Bytes, T.Spec->Shape, T.Spec->Origin,
                                       T.Spec->LogicalShape, ElemBytes))
              return Mismatch();
            std::vector<uint8_t> Ones(size_t(Count), 1);
            copyBlockBetweenViews(Ones, C.Shape, C.Origin, C.LogicalShape,
                                  T.Covered, T.Spec->Shape, T.Spec->Origin,
                                  T.Spec->LogicalShape, 1);
            return Error::success();
          });
      if (E)
        return fail(RunInvalidInput, toString(std::move(E)));
    }
    for (const CheckpointTensorSpec &S : Specs) {
      Target &T = Targets[S.Name];
      if (llvm::is_contained(T.Covered, 0))
        return fail(RunInvalidInput,
                    Where + " does not cover this rank's block of '" + S.Name +
                        "' " + formatTensorType(S.Elem, S.Shape) +
                        " (no rank saved those elements)");
      if (Error E = X.writeParam(*T.Param, T.Bytes))
        return fail(RunInvalidInput, toString(std::move(E)));
    }
    return Error::success();
  }

  /// Loads O.CheckpointDir/latest, if any, setting Step to its step (0
  /// when there is none).
  Error load(int64_t &Step) {
    Step = 0;
    StringRef Dir = O.CheckpointDir;
    Expected<std::optional<int64_t>> Latest = readLatestCheckpoint(Dir);
    if (!Latest)
      return fail(RunInvalidInput, toString(Latest.takeError()));
    if (!*Latest) {
      WithColor::note(errs(), "autopar-run")
          << "no checkpoint in '" << Dir << "' (no 'latest'); starting from "
          << "step 1\n";
      return Error::success();
    }
    // Rank 0's index says how many ranks wrote the checkpoint.
    Expected<CheckpointIndex> First = readCheckpointIndex(Dir, **Latest, 0);
    if (!First)
      return fail(RunInvalidInput, toString(First.takeError()));
    std::vector<CheckpointTensorSpec> Specs = getSpecs();
    SmallString<256> IndexPath(Dir);
    sys::path::append(IndexPath, getCheckpointName(**Latest),
                      getCheckpointIndexName(Rank));
    std::optional<CheckpointIndex> Own;
    if (First->NumRanks == NumRanks) {
      Expected<CheckpointIndex> Mine =
          Rank == 0 ? std::move(First)
                    : readCheckpointIndex(Dir, **Latest, Rank);
      if (!Mine)
        return fail(RunInvalidInput, toString(Mine.takeError()));
      Own = std::move(*Mine);
      if (Error E = matchCheckpointTensors(*Own, Specs, IndexPath)) {
        // The same tensors under another layout with as many ranks are
        // resharded; other differences are errors.
        StringMap<const CheckpointTensor *> Saved;
        for (const CheckpointTensor &T : Own->Tensors)
          Saved[T.Name] = &T;
        bool SameTensors = Saved.size() == Specs.size();
        for (const CheckpointTensorSpec &S : Specs) {
          const CheckpointTensor *T = Saved.lookup(S.Name);
          SameTensors &= T && T->Elem == S.Elem &&
                         ArrayRef<int64_t>(T->LogicalShape) ==
                             ArrayRef<int64_t>(S.LogicalShape);
        }
        if (!SameTensors)
          return fail(RunInvalidInput, toString(std::move(E)));
        consumeError(std::move(E));
        Own.reset();
      }
    }
    if (Own) {
      StringMap<const Value *> ByName;
      for (const std::unique_ptr<Value> &P : G.getParams())
        ByName[P->getName()] = P.get();
      if (Error E = readCheckpointTensors(
              Dir, *Own,
              [&](const CheckpointTensor &T, ArrayRef<uint8_t> Bytes) {
                return X.writeParam(*ByName.lookup(T.Name), Bytes);
              }))
        return fail(RunInvalidInput, toString(std::move(E)));
    } else {
      if (Error E = loadResharded(**Latest, Specs))
        return E;
      Expected<CheckpointIndex> Zero = readCheckpointIndex(Dir, **Latest, 0);
      if (!Zero)
        return fail(RunInvalidInput, toString(Zero.takeError()));
      Own = std::move(*Zero);
      IndexPath = Dir;
      sys::path::append(IndexPath, getCheckpointName(**Latest),
                        getCheckpointIndexName(0));
    }
    const CheckpointIndex *Index = &*Own;
    if (Index->Data != O.Data)
      WithColor::warning(errs(), "autopar-run")
          << "checkpoint '" << IndexPath << "' was written reading --data '"
          << Index->Data << "'; this run reads '" << O.Data << "'\n";
    Source.restore(Index->DataPosition, Index->DataRngState);
    Step = Index->Step;
    // A checkpoint without them skipped no step and scaled no loss.
    OptimizerSteps = Index->OptimizerStep.value_or(Index->Step);
    if (Scaler.Kind == LossScaler::Mode::Dynamic && Index->LossScale) {
      Scaler.Scale = *Index->LossScale;
      Scaler.GrowthTracker = Index->LossScaleGrowthTracker;
    }
    WithColor::note(errs(), "autopar-run")
        << "resumed from '" << sys::path::parent_path(IndexPath)
        << "': continuing after step " << Step << '\n';
    return Error::success();
  }
};

} // namespace

/// --memory-report: every rank's measured bytes, gathered on rank 0 and
/// printed next to the plan's prediction for the rank's pipeline stage
/// (from the plan the program records).
/// The figures of MeasuredMemory each rank sends rank 0, in this order.
static constexpr uint64_t MeasuredMemory::*GatheredFigures[] = {
    &MeasuredMemory::ParamBytes,
    &MeasuredMemory::PeakActivationBytes,
    &MeasuredMemory::OffloadedBytes,
    &MeasuredMemory::PeakGradientBytes,
    &MeasuredMemory::PeakNonGradientBytes,
    &MeasuredMemory::HostBytes,
    &MeasuredMemory::NvmeBytes,
    &MeasuredMemory::PeakFetchedBytes,
    &MeasuredMemory::UploadsAhead};

static Error reportMemory(const Module &Program, Backend &B,
                          const Mesh *Cluster, MeasuredMemory Mine) {
  Communicator &Comm = B.getCommunicator();
  std::string Text;
  for (uint64_t MeasuredMemory::*F : GatheredFigures)
    Text += (Text.empty() ? "" : " ") + std::to_string(Mine.*F);
  Expected<std::vector<std::string>> All = gatherTexts(B, Text);
  if (!All)
    return fail(RunFailure, "--memory-report: " + toString(All.takeError()));
  if (Comm.getRank() != 0)
    return Error::success();
  // The plan the program was lowered from (its module attributes) holds
  // every stage's prediction.
  std::optional<PlanRecord> Plan;
  if (Expected<PlanRecord> R = getModulePlan(Program))
    Plan = std::move(*R);
  else
    consumeError(R.takeError());
  std::vector<MeasuredMemory> Measured;
  std::vector<unsigned> Stages;
  for (int R = 0; R != int(All->size()); ++R) {
    MeasuredMemory M;
    SmallVector<StringRef, 8> Fields;
    StringRef((*All)[R]).split(Fields, ' ');
    if (Fields.size() == std::size(GatheredFigures))
      for (size_t I = 0; I != Fields.size(); ++I)
        Fields[I].getAsInteger(10, M.*GatheredFigures[I]);
    Measured.push_back(M);
    unsigned Stage = 0;
    if (Cluster)
      for (unsigned I = 0; I != Cluster->Axes.size(); ++I)
        if (Cluster->Axes[I].first == "pp")
          Stage = unsigned(getMeshCoordinates(*Cluster, R)[I]);
    Stages.push_back(Stage);
  }
  printMemoryReport(outs(), Measured, Plan ? &*Plan : nullptr, Stages);
  printPeakValues(outs(), Mine.PeakValues);
  return Error::success();
}

/// Loads the program this rank runs into SM and M, setting ProgramPath:
/// Path itself, or, for a folder that `autopar -o` wrote, its
/// `stage<S>.air` for this rank's pipeline stage S (the `pp` coordinate on
/// stage0.air's first mesh; stage0.air is parsed once).
static Error loadRankProgram(StringRef Path, const Communicator &Comm,
                             std::string &ProgramPath, SourceMgr &SM,
                             std::unique_ptr<Module> &M) {
  ProgramPath = Path.str();
  if (!sys::fs::is_directory(Path))
    return parseProgram(Path, SM, M);
  SmallString<256> First(Path);
  sys::path::append(First, "stage0.air");
  if (!sys::fs::exists(First))
    return fail(RunIOError, "'" + Path +
                                "' holds no training program (stage0.air); "
                                "`autopar MODEL -o DIR` writes them when the "
                                "plan lowers");
  ProgramPath = First.str().str();
  if (Error E = parseProgram(First, SM, M))
    return E;
  const Graph &G = *M->getGraphs().front();
  // A mesh of another size: the caller names the mismatch.
  if (G.getMeshes().empty() ||
      G.getMeshes()[0].getNumDevices() != Comm.getNumRanks())
    return Error::success();
  const Mesh &Cluster = G.getMeshes()[0];
  for (unsigned I = 0; I != Cluster.Axes.size(); ++I)
    if (Cluster.Axes[I].first == "pp") {
      int64_t Stage = getMeshCoordinates(Cluster, Comm.getRank())[I];
      if (Stage == 0)
        return Error::success();
      SmallString<256> Mine(Path);
      sys::path::append(Mine, "stage" + std::to_string(Stage) + ".air");
      ProgramPath = Mine.str().str();
      // A fresh SourceMgr: parseModule reads its first buffer.
      M.reset();
      SM = SourceMgr();
      return parseProgram(ProgramPath, SM, M);
    }
  return Error::success();
}

namespace {

/// The program this rank trains, parsed and checked against the job.
struct RankProgram {
  std::string Path;
  SourceMgr SM;
  std::unique_ptr<Module> M;
  const Graph *G = nullptr;
  /// The graph's first mesh (the job's ranks), if any.
  const Mesh *Cluster = nullptr;
  /// This rank's data-parallel replica among DataParallel of them (the
  /// token input's batch_split).
  int64_t DataParallel = 1, Replica = 0;
};

} // namespace

/// Loads this rank's program (RankProgram), checks its shapes, its mesh
/// against the job's ranks and its optimizer against --optimizer.
static Error openRankProgram(const TrainOptions &O, const Communicator &Comm,
                             RankProgram &P) {
  if (Error E = loadRankProgram(O.ProgramFile, Comm, P.Path, P.SM, P.M))
    return E;
  P.G = O.GraphName.empty() && P.M->getGraphs().size() == 1
            ? P.M->getGraphs().front().get()
            : P.M->lookupGraph(O.GraphName);
  if (!P.G)
    return fail(RunBadOptions, "name the graph to train with --graph");
  const Graph &G = *P.G;
  if (Error E = Executor::checkStaticShapes(G))
    return fail(RunInvalidInput, toString(std::move(E)));
  // A program for several ranks runs on exactly that many.
  P.Cluster = G.getMeshes().empty() ? nullptr : &G.getMeshes()[0];
  if (Comm.getNumRanks() > 1 || (P.Cluster && P.Cluster->getNumDevices() > 1)) {
    if (!P.Cluster)
      return fail(RunInvalidInput, P.Path + ": a job of " +
                                       Twine(Comm.getNumRanks()) +
                                       " ranks needs a program with a mesh");
    if (Error E = checkMeshSize(*P.Cluster, Comm.getNumRanks()))
      return fail(RunBadOptions, P.Path + ": " + toString(std::move(E)));
  }
  // The program's optimizer must be the one asked for.
  bool HasAdam = false, HasSgd = false;
  for (const Node &N : G.getNodes()) {
    HasAdam |= N.getOp() == OpId::AdamW;
    HasSgd |= N.getOp() == OpId::Sgd;
  }
  if (!HasAdam && !HasSgd)
    return fail(RunInvalidInput, O.ProgramFile +
                                     ": the program has no optimizer step; "
                                     "compile it with insert-optimizer");
  if ((O.Optimizer == "adamw") != HasAdam)
    return fail(RunBadOptions, "--optimizer " + O.Optimizer + ": " +
                                   O.ProgramFile + " was compiled for " +
                                   (HasAdam ? "adamw" : "sgd"));
  // --clip-grad sets the threshold of the program's clip-gradients.
  if (O.ClipGrad > 0 && !G.lookupValue("optimizer.max_grad_norm"))
    return fail(RunBadOptions,
                "--clip-grad: " + P.Path +
                    " has no input %optimizer.max_grad_norm; compile it "
                    "with clip-gradients");
  // --loss-scale binds the scale of a program that scales its loss.
  if (!O.LossScale.empty() && O.LossScale != "none" &&
      !G.lookupValue("optimizer.loss_scale"))
    return fail(RunBadOptions,
                "--loss-scale " + O.LossScale + ": " + P.Path +
                    " has no input %optimizer.loss_scale; compile it with "
                    "autodiff{loss-scale=1} and clip-gradients{loss-scale=1} "
                    "(as plans in fp16 are)");
  return Error::success();
}

/// The program's one token input [batch, seq] (null on a pipeline stage
/// between the first and the last, which reads none); every other input is
/// an optimizer scalar.
static Expected<const Value *> findTokenInput(const TrainOptions &O,
                                              const Graph &G) {
  const Value *TokensIn = nullptr;
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    StringRef Name = In->getName();
    if (Name.startswith("optimizer."))
      continue;
    if (TokensIn || isFloatElementType(In->getType().getElementType()) ||
        In->getType().getRank() != 2)
      return fail(RunInvalidInput,
                  O.ProgramFile + ": input %" + Name +
                      " is not the one token input [batch, seq] a "
                      "training program takes");
    TokensIn = In.get();
  }
  return TokensIn;
}

/// The step the run continues after: a checkpoint's with --resume, else 0
/// (and then --checkpoint-dir must hold none).
static Expected<int64_t> getResumedStep(const TrainOptions &O,
                                        TrainState &State) {
  int64_t Resumed = 0;
  if (O.Resume) {
    if (Error E = State.load(Resumed))
      return E;
    return Resumed;
  }
  if (O.CheckpointDir.empty())
    return Resumed;
  Expected<std::optional<int64_t>> Latest =
      readLatestCheckpoint(O.CheckpointDir);
  if (!Latest)
    return fail(RunInvalidInput, toString(Latest.takeError()));
  if (*Latest)
    return fail(RunBadOptions,
                "'" + O.CheckpointDir + "' holds checkpoints already " +
                    "(latest: " + getCheckpointName(**Latest) +
                    "); pass --resume to continue from it, or use another "
                    "folder");
  return Resumed;
}

/// Data parallelism is the token input's `batch_split` (split-batch): every
/// rank draws the global batch, in the same order on every run, and keeps
/// the rows of its replica, numbered row-major over the split's axes.
static void findReplica(const Value *TokensIn, int Rank, RankProgram &P) {
  const Attribute *Split =
      TokensIn ? TokensIn->getAttrs().get("batch_split") : nullptr;
  if (!Split)
    return;
  const Sharding &S = Split->getSharding();
  const Mesh *M = P.G->lookupMesh(S.Mesh);
  if (!M)
    return;
  SmallVector<int64_t, 4> Coords = getMeshCoordinates(*M, Rank);
  for (const std::vector<std::string> &Axes : S.DimAxes) {
    AxesPart Part = getAxesPart(*M, Axes, Coords);
    P.DataParallel *= Part.Parts;
    P.Replica = P.Replica * Part.Parts + Part.Index;
  }
}

/// The inputs of the next step: this replica's rows of the global batch's
/// tokens (TokensPerRank of them, shaped as TokensIn) and the optimizer's
/// scalars (its step count OptimizerStep, the loss scale).
static Expected<std::vector<HostTensor>>
getStepInputs(const TrainOptions &O, const RankProgram &P,
              const Value *TokensIn, TokenSource &Source, double Lr,
              int64_t OptimizerStep, double LossScale) {
  std::vector<HostTensor> Inputs;
  for (const std::unique_ptr<Value> &In : P.G->getInputs()) {
    StringRef Name = In->getName();
    if (In.get() == TokensIn) {
      SmallVector<int64_t, 2> Sizes = TokensIn->getType().getStaticSizes();
      int64_t TokensPerRank = Sizes[0] * Sizes[1];
      Expected<std::vector<int64_t>> Rows =
          Source.next(TokensPerRank * P.DataParallel, P.Replica * TokensPerRank,
                      TokensPerRank);
      if (!Rows)
        return fail(RunInvalidInput, toString(Rows.takeError()));
      std::vector<int64_t> &Ids = *Rows;
      HostTensor H;
      H.Elem = In->getType().getElementType();
      H.Shape.assign(Sizes.begin(), Sizes.end());
      if (H.Elem == ElementType::I64) {
        H.Bytes.resize(Ids.size() * 8);
        std::memcpy(H.Bytes.data(), Ids.data(), H.Bytes.size());
      } else {
        std::vector<int32_t> Narrow(Ids.begin(), Ids.end());
        H.Bytes.resize(Narrow.size() * 4);
        std::memcpy(H.Bytes.data(), Narrow.data(), H.Bytes.size());
      }
      Inputs.push_back(std::move(H));
      continue;
    }
    double V = Name == "optimizer.lr"             ? Lr
               : Name == "optimizer.beta1"        ? O.Beta1
               : Name == "optimizer.beta2"        ? O.Beta2
               : Name == "optimizer.eps"          ? O.Eps
               : Name == "optimizer.weight_decay" ? O.WeightDecay
               : Name == "optimizer.step"         ? double(OptimizerStep)
               : Name == "optimizer.loss_scale"   ? LossScale
               // No --clip-grad: a coefficient of exactly 1.
               : Name == "optimizer.max_grad_norm"
                   ? (O.ClipGrad > 0 ? O.ClipGrad
                                     : std::numeric_limits<double>::infinity())
                   : -1;
    if (V < 0)
      return fail(RunInvalidInput,
                  O.ProgramFile + ": unknown optimizer input %" + Name);
    Inputs.push_back(scalarTensor(float(V)));
  }
  return Inputs;
}

/// What --profile, --trace and --memory-report write once the steps are
/// done.
static Error finishRun(const TrainOptions &O, const RankProgram &P, Backend &B,
                       Executor &X, const OffloadStore &Store,
                       const TraceRecorder &Trace, const StepProfiler &Profile,
                       const MeasuredMemory &Peaks) {
  Communicator &Comm = B.getCommunicator();
  if (O.Profile) {
    Expected<std::vector<std::string>> All =
        gatherTexts(B, Profile.format(Comm.getRank()) + B.describeMemoryPlan());
    if (!All)
      return fail(RunFailure, "--profile: " + toString(All.takeError()));
    for (const std::string &Text : *All)
      outs() << Text;
    outs().flush();
  }
  if (!O.TracePath.empty()) {
    Expected<std::vector<std::string>> All = gatherTexts(B, Trace.toJSON());
    if (!All)
      return fail(RunFailure, "--trace: " + toString(All.takeError()));
    if (Comm.getRank() == 0)
      if (Error E = writeChromeTrace(O.TracePath, *All))
        return fail(RunIOError, toString(std::move(E)));
  }
  if (!O.MemoryReport)
    return Error::success();
  MeasuredMemory Mine = Peaks;
  // Resident: the parameters kept in backend memory, plus the offloaded
  // ones while fetched for their uses and the whole copies ZeRO's gathers
  // make of sharded ones (each at its peak).
  Mine.ParamBytes =
      X.getParamBytes() + Peaks.PeakFetchedBytes + Peaks.PeakGatheredBytes;
  Mine.HostBytes = Store.getBytes(OffloadTier::Host);
  Mine.NvmeBytes = Store.getBytes(OffloadTier::Nvme);
  Mine.OffloadedBytes = Mine.HostBytes + Mine.NvmeBytes;
  return reportMemory(*P.M, B, P.Cluster, Mine);
}

/// The steps of autopar-run: open the backend and this rank's program, the
/// token source and the executor, resume, then train step by step,
/// checkpointing as asked and stopping after a step on SIGTERM. The backend
/// goes to Kept, which the caller destroys after reporting the error.
static Error train(const TrainOptions &O, std::unique_ptr<Backend> &Kept) {
  if (Error E = O.validate())
    return fail(RunBadOptions, toString(std::move(E)));
  Expected<TestHooks> Hooks = TestHooks::read();
  if (!Hooks)
    return fail(RunBadOptions, toString(Hooks.takeError()));
  // Installed first, so that a SIGTERM while loading still ends the run
  // after a step, with a checkpoint.
  TermHandler Term;
  // The backend first: its communicator says which rank this is, and so
  // which program to run.
  Expected<std::unique_ptr<Backend>> Made =
      createBackend({O.Backend, O.Threads, O.CommTimeoutSeconds});
  if (!Made)
    return fail(RunFailure, toString(Made.takeError()));
  Kept = std::move(*Made);
  Backend &Backend = *Kept;
  Communicator &Comm = Backend.getCommunicator();
  RankProgram P;
  if (Error E = openRankProgram(O, Comm, P))
    return E;
  // --verify-transfers, or a plan that says verify-transfers=on (the
  // program records its plan).
  bool Verify = O.VerifyTransfers;
  if (Expected<PlanRecord> R = getModulePlan(*P.M))
    Verify |= R->Config.VerifyTransfers;
  else
    consumeError(R.takeError());
  if (Error E = Comm.setVerifyTransfers(Verify))
    return fail(RunBadOptions, toString(std::move(E)));
  const Graph &G = *P.G;
  Expected<const Value *> TokensIn = findTokenInput(O, G);
  if (!TokensIn)
    return TokensIn.takeError();
  findReplica(*TokensIn, Comm.getRank(), P);
  int64_t Vocab = findVocabulary(G);
  if (*TokensIn && O.Data == "random" && Vocab <= 0)
    return fail(RunBadOptions, "--data random needs a cross-entropy loss to "
                               "know the vocabulary; give --data FILE");
  Expected<TokenSource> Source = TokenSource::open(O, Vocab);
  if (!Source)
    return fail(RunIOError, toString(Source.takeError()));

  ExecutorOptions EO =
      ExecutorOptions::forProgram(P.Path, O.WeightsDir, O.Seed);
  EO.RandomInit = O.RandomInit;
  EO.RequireData = true;
  // Offloaded state (docs/Offload.md): nvme needs a folder.
  if (O.OffloadDir.empty())
    for (const std::unique_ptr<Value> &V : G.getParams())
      if (const Attribute *A = V->getAttrs().get("placement"))
        if (A->isa(Attribute::Kind::String) && A->getString() == "nvme")
          return fail(RunBadOptions,
                      P.Path + ": parameter %" + V->getName() +
                          " is offloaded to nvme; give --offload-dir DIR (a "
                          "folder on the NVMe disk)");
  Expected<std::unique_ptr<OffloadStore>> Store =
      OffloadStore::create(O.OffloadDir, Comm.getRank());
  if (!Store)
    return fail(RunIOError, toString(Store.takeError()));
  EO.Offload = Store->get();
  Expected<std::unique_ptr<Executor>> Exec = Executor::create(G, Backend, EO);
  if (!Exec)
    return fail(RunIOError, toString(Exec.takeError()));
  // The loop reads the loss, the first output, and clip-gradients'
  // `grad_norm` and `found_inf` when the program has them.
  std::optional<unsigned> GradNormOut, FoundInfOut;
  std::vector<unsigned> ReadOutputs{0};
  for (unsigned I = 0; I != G.getOutputs().size(); ++I) {
    StringRef Name = G.getOutputs()[I]->getName();
    if (Name == "grad_norm")
      GradNormOut = I;
    if (Name == "found_inf")
      FoundInfOut = I;
    if (Name == "grad_norm" || Name == "found_inf")
      ReadOutputs.push_back(I);
  }
  (*Exec)->setReadOutputs(ReadOutputs);
  if (O.MemoryReport)
    (*Exec)->setPeakValueCount(5);
  TraceRecorder Trace(Comm.getRank());
  StepProfiler Profile;
  // --metrics, --metrics-port and --heartbeat (docs/Operations.md).
  Expected<std::unique_ptr<RunMonitoring>> Monitor =
      RunMonitoring::start(O, Backend, **Exec);
  if (!Monitor)
    return Monitor.takeError();
  RunMonitoring &Watch = **Monitor;
  if (!O.TracePath.empty() || O.Profile || Watch.recordsSteps()) {
    (*Exec)->setNodeObserver([&](const Node &N,
                                 std::chrono::steady_clock::time_point Start,
                                 std::chrono::steady_clock::time_point End) {
      if (!O.TracePath.empty())
        Trace.record(N, Start, End);
      if (O.Profile)
        Profile.record(N, Start, End);
      if (Watch.recordsSteps())
        Watch.recordNode(N, Start, End);
    });
    (*Exec)->setFetchObserver([&](const OffloadPrefetcher::FetchEvent &E) {
      if (!O.TracePath.empty())
        Trace.recordFetch(E);
      if (Watch.recordsSteps())
        Watch.recordFetch(E);
    });
  }

  // Loss scaling: dynamic by default when the program scales its loss.
  bool ScalesLoss = G.lookupValue("optimizer.loss_scale") != nullptr;
  Expected<LossScaler> Scaler =
      LossScaler::parse(!O.LossScale.empty() ? StringRef(O.LossScale)
                        : ScalesLoss         ? "dynamic"
                                             : "none",
                        O.InitLossScale, O.LossScaleWindow);
  if (!Scaler)
    return fail(RunBadOptions, toString(Scaler.takeError()));
  TrainState State{
      O, G, **Exec, *Source, Backend, Comm.getRank(), Comm.getNumRanks()};
  State.Scaler = *Scaler;
  if (Hooks->InfGradStep && !ScalesLoss)
    return fail(RunBadOptions, "AUTOPAR_TEST_INF_GRAD_STEP: " + P.Path +
                                   " has no input %optimizer.loss_scale");
  Expected<int64_t> Resumed = getResumedStep(O, State);
  if (!Resumed)
    return Resumed.takeError();
  // Offloaded blocks carry the step that wrote them.
  if (*Resumed > 0)
    if (Error E = (*Exec)->setOffloadVersion(uint64_t(*Resumed)))
      return fail(RunFailure, toString(std::move(E)));
  if (*Resumed >= O.Steps) {
    WithColor::note(errs(), "autopar-run")
        << "the checkpoint is at step " << *Resumed << "; --steps " << O.Steps
        << " leaves nothing to run\n";
    return Error::success();
  }

  // The first of several steps is left out of the profile (warm-up).
  Profile.setSteps(O.Steps - *Resumed);
  int64_t TokensPerStep = 0;
  if (*TokensIn)
    TokensPerStep = (*TokensIn)->getType().getStaticNumElements().value_or(0) *
                    P.DataParallel;
  // The steps' largest computed-value footprints (--memory-report).
  MeasuredMemory Peaks;
  CheckpointCrash Crash = Hooks->Crash;
  // When the last checkpoint was saved (--checkpoint-minutes).
  auto LastSave = std::chrono::steady_clock::now();
  const LrSchedule Schedule = O.getSchedule();
  for (int64_t Step = *Resumed + 1; Step <= O.Steps; ++Step) {
    if (Hooks->StepDelayMs)
      std::this_thread::sleep_for(
          std::chrono::milliseconds(Hooks->StepDelayMs));
    const double Lr = Schedule.at(Step);
    Trace.setStep(Step);
    Profile.beginStep();
    Expected<std::vector<HostTensor>> Inputs = getStepInputs(
        O, P, *TokensIn, *Source, Lr, State.OptimizerSteps + 1,
        Step == Hooks->InfGradStep
            ? State.Scaler.Scale * std::numeric_limits<double>::infinity()
            : State.Scaler.Scale);
    if (!Inputs)
      return Inputs.takeError();
    // Dropout masks: the seed, the step and this replica's micro-batches.
    Backend.setStepRandom(StepRandom{O.Seed, Step, P.Replica});
    auto Start = std::chrono::steady_clock::now();
    Watch.beginStep(Step, Start);
    Expected<std::vector<HostTensor>> Out = (*Exec)->run(*Inputs);
    if (!Out) {
      Error E = Out.takeError();
      int Code =
          E.isA<OffloadCheckError>() ? RunOffloadCheckFailed : RunFailure;
      return fail(Code, "rank " + Twine(Comm.getRank()) + ": step " +
                            Twine(Step) + ": " + toString(std::move(E)));
    }
    auto Finish = std::chrono::steady_clock::now();
    double Seconds = std::chrono::duration<double>(Finish - Start).count();
    Profile.endStep(Seconds);
    Peaks.PeakActivationBytes =
        std::max(Peaks.PeakActivationBytes, (*Exec)->getPeakActivationBytes());
    Peaks.PeakGradientBytes =
        std::max(Peaks.PeakGradientBytes, (*Exec)->getPeakGradientBytes());
    if ((*Exec)->getPeakNonGradientBytes() > Peaks.PeakNonGradientBytes)
      Peaks.PeakValues = (*Exec)->getPeakValues();
    Peaks.PeakNonGradientBytes = std::max(Peaks.PeakNonGradientBytes,
                                          (*Exec)->getPeakNonGradientBytes());
    Peaks.PeakFetchedBytes =
        std::max(Peaks.PeakFetchedBytes, (*Exec)->getPeakFetchedBytes());
    Peaks.UploadsAhead = (*Exec)->getUploadsAhead();
    Peaks.PeakGatheredBytes =
        std::max(Peaks.PeakGatheredBytes, (*Exec)->getPeakGatheredBytes());
    if (Hooks->OffloadFault && Step == Hooks->OffloadFaultStep &&
        (*Store)->contains(Hooks->OffloadFaultName))
      if (Error E = (*Store)->injectFault(Hooks->OffloadFaultName,
                                          *Hooks->OffloadFault))
        return fail(RunFailure, toString(std::move(E)));
    // Output I when the program has it and it is one f32.
    auto ReadScalar = [&](std::optional<unsigned> I) -> std::optional<float> {
      if (!I || *I >= Out->size() || (*Out)[*I].Bytes.size() != 4)
        return std::nullopt;
      float V;
      std::memcpy(&V, (*Out)[*I].Bytes.data(), 4);
      return V;
    };
    std::optional<float> LossOut = ReadScalar(0u);
    if (!LossOut)
      return fail(RunInvalidInput,
                  O.ProgramFile + ": the first output must be the f32 loss");
    float Loss = *LossOut;
    // metrics: grad_norm (the global norm before clipping, every rank's)
    std::optional<double> GradNorm;
    if (std::optional<float> Norm = ReadScalar(GradNormOut))
      GradNorm = *Norm;
    // metrics: loss_scale (the scale this step used, when scaling is on)
    std::optional<double> LossScale;
    if (State.Scaler.Kind != LossScaler::Mode::None)
      LossScale = State.Scaler.Scale;
    // found_inf: 0, or NaN when a gradient of any rank was not finite (the
    // program skipped its optimizer steps).
    std::optional<float> Found = ReadScalar(FoundInfOut);
    bool Skipped = Found && !(*Found == 0.0f);
    if (!Skipped)
      ++State.OptimizerSteps;
    State.Scaler.update(Skipped);
    StepFigures Figures;
    Figures.Loss = Loss;
    Figures.Lr = Lr;
    Figures.TokensPerSecond = Seconds > 0 ? TokensPerStep / Seconds : 0.0;
    Figures.GradNorm = GradNorm;
    Figures.LossScale = LossScale;
    if (Comm.getRank() == 0) {
      outs() << "step " << Step << " loss " << format("%.9g", Loss);
      if (GradNorm && O.ClipGrad > 0)
        outs() << " grad_norm " << format("%.9g", *GradNorm);
      if (LossScale)
        outs() << " loss_scale " << format("%.9g", *LossScale);
      if (Skipped)
        outs() << " skipped";
      outs() << " time_ms " << format("%.3f", Seconds * 1e3) << " tokens_per_s "
             << format("%.1f", Figures.TokensPerSecond);
      // The step's rate, when it changes from step to step.
      if (!Schedule.isConstant())
        outs() << " lr " << format("%.9g", Lr);
      outs() << "\n";
    }
    outs().flush();
    if (Error E = Watch.endStep(Finish, Figures))
      return E;

    bool Stop = TermRequested != 0;
    // --checkpoint-minutes: rank 0's clock decides, so that every rank
    // saves the same step.
    bool Due = false;
    if (O.CheckpointMinutes > 0) {
      uint8_t Mine = std::chrono::steady_clock::now() - LastSave >=
                     std::chrono::duration<double>(O.CheckpointMinutes * 60);
      Expected<std::vector<uint8_t>> All = gatherBytes(Backend, Mine);
      if (!All)
        return fail(RunFailure,
                    "rank " + Twine(Comm.getRank()) +
                        ": --checkpoint-minutes: " + toString(All.takeError()));
      Due = All->front() != 0;
    }
    if (!O.CheckpointDir.empty() &&
        (Stop || Due || Step == O.Steps ||
         (O.CheckpointEvery > 0 && Step % O.CheckpointEvery == 0))) {
      if (Error E = State.save(Step, Crash))
        return E;
      Crash = CheckpointCrash::None;
      LastSave = std::chrono::steady_clock::now();
    }
    if (Stop) {
      WithColor::note(errs(), "autopar-run")
          << "SIGTERM: stopped after step " << Step;
      if (O.CheckpointDir.empty()) {
        errs() << " (no --checkpoint-dir: nothing saved)\n";
      } else {
        SmallString<256> Path(O.CheckpointDir);
        sys::path::append(Path, getCheckpointName(Step));
        errs() << "; saved checkpoint '" << Path << "'\n";
      }
      break;
    }
  }
  return finishRun(O, P, Backend, **Exec, **Store, Trace, Profile, Peaks);
}

int autopar::runTraining(const TrainOptions &O) {
  // The backend outlives the report of the run's error: a failed rank's
  // backend ends the job (MPI_Abort) as it goes, and the message would be
  // lost.
  std::unique_ptr<Backend> Kept;
  int Code = reportExitError(train(O, Kept), "autopar-run", RunFailure);
  Kept.reset();
  return Code;
}
