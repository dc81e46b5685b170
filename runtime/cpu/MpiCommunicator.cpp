//===- MpiCommunicator.cpp - Communication over MPI -----------------------===//
//
// See MpiCommunicator.h. An operation posts all its sends and polls them
// and its receives (Transfers::wait): each receive is matched with
// MPI_Improbe and, when the message has the size it expects, received with
// MPI_Imrecv (a message of another size is an error naming both sizes,
// never a truncated receive); large transfers are split into messages of at
// most 1 GiB because MPI counts are ints. Between one pair of ranks, every
// operation's messages carry its kind's tag and the operations run one at a
// time in program order, so MPI's non-overtaking rule matches them; stage
// transfers (send/recv) have their own tag, as they may be pending while
// collectives run.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MpiCommunicator.h"
#include "runtime/OffloadStore.h"
#include "runtime/cpu/CpuCommunicator.h"
#include "runtime/cpu/KernelSupport.h"

#include "ir/Attributes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sched.h>
#include <thread>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

namespace {

using Clock = std::chrono::steady_clock;
using Duration = Communicator::Duration;

/// Message tags, one per kind of operation.
enum Tag : int {
  TagReduceChunks = 101,
  TagGatherChunks = 102,
  TagAllGather = 103,
  TagReduceScatter = 104,
  TagAllToAll = 105,
  TagStage = 106,
};

/// The largest message; larger transfers are split.
constexpr size_t MaxMessageBytes = size_t(1) << 30;

/// The status of a rank that aborts the job (autopar-run's RunFailure).
constexpr int AbortStatus = 3;

/// A send that has been started and not yet seen complete; owns a copy of
/// the data.
struct PendingSend {
  std::unique_ptr<char[]> Data;
  std::vector<MPI_Request> Requests;
  int Peer = 0;
};

/// The process's MPI state: created with the first communicator, finalised
/// at exit, never freed.
struct MpiProcess {
  int Rank = 0;
  int Size = 1;
  bool Failed = false;
  Duration ExitTimeout{0};
  std::vector<PendingSend> Sends;
  // Test-only faults (MpiCommunicator.h).
  int HangRank = -1, KillRank = -1, CorruptRank = -1;
  int64_t HangAt = 1, KillAt = 1, CorruptAt = 1;
  /// --verify-transfers, and the checked sends so far.
  bool VerifyTransfers = false;
  int64_t CheckedSends = 0;
  int64_t Operations = 0;
  /// Whether this host's ranks have a core each: then a wait polls hot for
  /// a few milliseconds before it sleeps; sharing cores, it sleeps almost at
  /// once so that the rank it waits for can run.
  bool HotPoll = false;
};

MpiProcess *Process = nullptr;

// What the SIGTERM handler prints: written outside it, only read inside.
char SignalRank[16];
char SignalActivity[1024];
// The SIGTERM action this process had before MPI (a driver's own handler).
struct sigaction PreviousTermAction;

void writeToStderr(const char *S) {
  size_t N = 0;
  while (S[N])
    ++N;
  while (N) {
    ssize_t Written = ::write(STDERR_FILENO, S, N);
    if (Written <= 0)
      return;
    S += Written;
    N -= size_t(Written);
  }
}

/// Appends S to Buffer (of Size bytes, NUL-terminated at Length), as far as
/// it fits; async-signal-safe.
void append(char *Buffer, size_t Size, size_t &Length, const char *S) {
  while (*S && Length + 1 < Size)
    Buffer[Length++] = *S++;
  Buffer[Length] = 0;
}

/// mpirun ends the ranks with SIGTERM when one dies, fails or aborts: say
/// what this one was doing, in one write. The handler the process had
/// before then runs (LLVM's, which removes temporary files and dies by the
/// signal; the training loop's, which stops after the step under way);
/// without one, the rank exits.
void onTerminate(int Signal, siginfo_t *Info, void *Context) {
  static char Line[sizeof(SignalActivity) + 256];
  size_t Length = 0;
  bool Chained = (PreviousTermAction.sa_flags & SA_SIGINFO)
                     ? PreviousTermAction.sa_sigaction != nullptr
                     : PreviousTermAction.sa_handler != SIG_DFL;
  append(Line, sizeof(Line), Length, "autopar-run: error: rank ");
  append(Line, sizeof(Line), Length, SignalRank);
  append(Line, sizeof(Line), Length, ": terminated by SIGTERM");
  if (SignalActivity[0]) {
    append(Line, sizeof(Line), Length, " during ");
    append(Line, sizeof(Line), Length, SignalActivity);
  }
  append(Line, sizeof(Line), Length,
         " (mpirun ends every rank when one dies, fails or times out)\n");
  writeToStderr(Line);
  if (!Chained)
    _exit(128 + Signal);
  if (PreviousTermAction.sa_flags & SA_SIGINFO)
    PreviousTermAction.sa_sigaction(Signal, Info, Context);
  else if (PreviousTermAction.sa_handler != SIG_IGN)
    PreviousTermAction.sa_handler(Signal);
}

/// Prints "autopar-run: Kind: Message" and a newline in one write, so that
/// the lines of ranks that print at once (mpirun merges their output) do
/// not interleave.
void printLine(StringRef Kind, const Twine &Message) {
  errs().flush();
  writeToStderr(("autopar-run: " + Kind + ": " + Message + "\n").str().c_str());
}

void setSignalActivity(StringRef Text) {
  size_t N = std::min(Text.size(), sizeof(SignalActivity) - 1);
  // The handler prints no activity while the first byte is 0.
  SignalActivity[0] = 0;
  if (N == 0)
    return;
  std::memcpy(SignalActivity + 1, Text.data() + 1, N - 1);
  SignalActivity[N] = 0;
  SignalActivity[0] = Text[0];
}

std::string formatSeconds(Duration D) {
  char Buffer[32];
  std::snprintf(Buffer, sizeof(Buffer), "%g", double(D.count()) / 1000.0);
  return Buffer;
}

/// Waits for a blocking MPI call (MPI_Init, MPI_Finalize) on another
/// thread; when the call has not returned within the timeout, prints
/// Message and exits the process, and mpirun then ends the job.
class BlockingWatchdog {
public:
  BlockingWatchdog(std::string Message, Duration Timeout)
      : Message(std::move(Message)), Thread([this, Timeout] {
          std::unique_lock<std::mutex> Lock(Mutex);
          if (!Done.wait_for(Lock, Timeout, [this] { return Finished; })) {
            writeToStderr(this->Message.c_str());
            _exit(AbortStatus);
          }
        }) {}
  ~BlockingWatchdog() {
    {
      std::lock_guard<std::mutex> Lock(Mutex);
      Finished = true;
    }
    Done.notify_all();
    Thread.join();
  }

private:
  std::string Message;
  std::mutex Mutex;
  std::condition_variable Done;
  bool Finished = false;
  std::thread Thread;
};

/// One operation in progress: what it is (e.g. "all-reduce") and where
/// ("on ranks [0, 1] (axis 'tp' of mesh @cluster, ...)"), for messages.
class Operation {
public:
  Operation(StringRef What, const Twine &Where)
      : What(What), Where(Where.str()) {
    StringRef Label = CommunicationLabel::current();
    if (!Label.empty())
      this->Where += " (" + Label.str() + ")";
  }
  ~Operation() { SignalActivity[0] = 0; }

  std::string describe() const { return What + " " + Where; }
  Error error(const Twine &Message) const {
    return createStringError(
        inconvertibleErrorCode(),
        ("rank " + Twine(Process->Rank) + ": " + describe() + ": " + Message)
            .str());
  }
  Error mpiError(int Code) const {
    char Text[MPI_MAX_ERROR_STRING];
    int Length = 0;
    MPI_Error_string(Code, Text, &Length);
    return error("MPI error: " + StringRef(Text, size_t(Length)));
  }

  /// Records the operation for the SIGTERM handler, makes progress on
  /// pending sends and injects the test-only faults.
  Error begin() const;

private:
  std::string What;
  std::string Where;
};

[[noreturn]] void abortJob() {
  errs().flush();
  MPI_Abort(MPI_COMM_WORLD, AbortStatus);
  std::_Exit(AbortStatus);
}

/// Tests the pending sends and forgets those that are complete.
Error progressSends(const Operation &Op) {
  for (PendingSend &S : Process->Sends) {
    int Done = 0;
    int Code = MPI_Testall(int(S.Requests.size()), S.Requests.data(), &Done,
                           MPI_STATUSES_IGNORE);
    if (Code != MPI_SUCCESS)
      return Op.mpiError(Code);
    if (Done)
      S.Requests.clear();
  }
  llvm::erase_if(Process->Sends,
                 [](const PendingSend &S) { return S.Requests.empty(); });
  return Error::success();
}

Error Operation::begin() const {
  setSignalActivity(describe());
  if (Error E = progressSends(*this))
    return E;
  int64_t N = ++Process->Operations;
  if (Process->Rank == Process->HangRank && N == Process->HangAt) {
    printLine("note", "rank " + Twine(Process->Rank) + ": hanging before " +
                          describe() + " (AUTOPAR_TEST_HANG_RANK)");
    for (;;)
      ::pause();
  }
  if (Process->Rank == Process->KillRank && N == Process->KillAt) {
    printLine("note", "rank " + Twine(Process->Rank) +
                          ": killing itself before " + describe() +
                          " (AUTOPAR_TEST_KILL_RANK)");
    std::raise(SIGKILL);
  }
  return Error::success();
}

/// The messages of one operation. A receive is matched with MPI_Improbe
/// before any buffer is given to MPI: a message of another size than the
/// receive's is an error naming the operation, the peer and both sizes, and
/// is never received (a truncated receive corrupted memory with some MPI
/// transports).
class Transfers {
public:
  void send(const void *Data, size_t Bytes, int Peer, int Tag) {
    post(const_cast<void *>(Data), Bytes, Peer, Tag, /*IsRecv=*/false);
  }
  void recv(void *Data, size_t Bytes, int Peer, int Tag) {
    post(Data, Bytes, Peer, Tag, /*IsRecv=*/true);
  }
  /// Adds a request started elsewhere.
  void add(MPI_Request Request, int Peer) {
    Message M;
    M.Request = Request;
    M.Peer = Peer;
    List.push_back(M);
  }
  /// Polls every message until all are complete. An error when MPI reports
  /// one or a message has the wrong size; on a timeout, prints it and
  /// aborts the job.
  Error wait(const Operation &Op, Duration Timeout);

private:
  struct Message {
    MPI_Request Request = MPI_REQUEST_NULL;
    int Peer = 0;
    int Tag = 0;
    int Bytes = 0;
    char *Data = nullptr;
    bool IsRecv = false;
    /// A receive: whether its message has been matched (and Request
    /// started).
    bool Matched = false;
    bool Complete = false;
    int PostCode = MPI_SUCCESS;
  };
  void post(void *Data, size_t Bytes, int Peer, int Tag, bool IsRecv);
  /// Matches receive M with its incoming message, if there is one yet.
  Error match(const Operation &Op, Message &M, bool &Found);
  /// Before an error returns: lets the matched receives finish (their
  /// buffers may be freed next), until Deadline.
  Error fail(Error E, Clock::time_point Deadline);
  [[noreturn]] void timedOut(const Operation &Op, Duration Timeout) const;

  std::vector<Message> List;
};

void Transfers::post(void *Data, size_t Bytes, int Peer, int Tag, bool IsRecv) {
  char *P = static_cast<char *>(Data);
  size_t Offset = 0;
  do {
    int Count = int(std::min(Bytes - Offset, MaxMessageBytes));
    Message M;
    M.Peer = Peer;
    M.Tag = Tag;
    M.Bytes = Count;
    M.Data = P + Offset;
    M.IsRecv = IsRecv;
    if (!IsRecv)
      M.PostCode = MPI_Isend(P + Offset, Count, MPI_BYTE, Peer, Tag,
                             MPI_COMM_WORLD, &M.Request);
    List.push_back(M);
    Offset += size_t(Count);
  } while (Offset < Bytes);
}

Error Transfers::match(const Operation &Op, Message &M, bool &Found) {
  int Flag = 0;
  MPI_Message Incoming;
  MPI_Status Status;
  int Code =
      MPI_Improbe(M.Peer, M.Tag, MPI_COMM_WORLD, &Flag, &Incoming, &Status);
  if (Code != MPI_SUCCESS)
    return Op.mpiError(Code);
  Found = Flag != 0;
  if (!Found)
    return Error::success();
  int Count = 0;
  if ((Code = MPI_Get_count(&Status, MPI_BYTE, &Count)) != MPI_SUCCESS)
    return Op.mpiError(Code);
  // The message stays unreceived: the job ends with this error.
  if (Count != M.Bytes)
    return Op.error("rank " + Twine(M.Peer) + " sent a message of " +
                    Twine(Count) + " bytes where " + Twine(M.Bytes) +
                    " were expected (the ranks' programs disagree on the "
                    "type)");
  if ((Code = MPI_Imrecv(M.Data, Count, MPI_BYTE, &Incoming, &M.Request)) !=
      MPI_SUCCESS)
    return Op.mpiError(Code);
  M.Matched = true;
  return Error::success();
}

Error Transfers::fail(Error E, Clock::time_point Deadline) {
  for (Message &M : List) {
    if (!M.IsRecv || M.Complete || M.Request == MPI_REQUEST_NULL)
      continue;
    for (;;) {
      int Done = 0;
      if (MPI_Test(&M.Request, &Done, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          Done || Clock::now() >= Deadline)
        break;
      sched_yield();
    }
  }
  return E;
}

Error Transfers::wait(const Operation &Op, Duration Timeout) {
  for (const Message &M : List)
    if (M.PostCode != MPI_SUCCESS)
      return Op.mpiError(M.PostCode);
  Clock::time_point Deadline = Clock::now() + Timeout;
  for (Message &M : List)
    M.Complete = !M.IsRecv && M.Request == MPI_REQUEST_NULL;
  size_t Left =
      llvm::count_if(List, [](const Message &M) { return !M.Complete; });
  unsigned Idle = 0;
  Clock::time_point IdleSince;
  // Receives from one peer with one tag match that peer's messages in
  // order: only the first unmatched one of each is probed.
  SmallVector<std::pair<int, int>, 8> Unmatched;
  while (Left) {
    bool Progress = false;
    Unmatched.clear();
    for (Message &M : List) {
      if (M.Complete)
        continue;
      if (M.IsRecv && !M.Matched) {
        std::pair<int, int> Source{M.Peer, M.Tag};
        if (llvm::is_contained(Unmatched, Source))
          continue;
        bool Found = false;
        if (Error E = match(Op, M, Found))
          return fail(std::move(E), Deadline);
        if (!Found) {
          Unmatched.push_back(Source);
          continue;
        }
        Progress = true;
      }
      int Done = 0;
      int Code = MPI_Test(&M.Request, &Done, MPI_STATUS_IGNORE);
      if (Code != MPI_SUCCESS)
        return fail(Op.mpiError(Code), Deadline);
      if (!Done)
        continue;
      M.Complete = true;
      Progress = true;
      --Left;
    }
    if (!Left)
      break;
    if (Progress) {
      Idle = 0;
      continue;
    }
    Clock::time_point Now = Clock::now();
    if (Now >= Deadline)
      timedOut(Op, Timeout);
    // Poll hot for a moment, then sleep a little: with a core each, for
    // up to 5 ms (sleeping at once made a small collective cost 230-280 us
    // on a 2-core machine instead of 10, bench/collective-latency.py);
    // sharing cores, for 64 polls. A long wait sleeps either way, so that
    // other jobs on the host run.
    if (Idle++ == 0)
      IdleSince = Now;
    if (Idle < 64 || (Process && Process->HotPoll &&
                      Now - IdleSince < std::chrono::milliseconds(5)))
      sched_yield();
    else
      ::usleep(Idle < 1024 ? 50 : 500);
  }
  return Error::success();
}

void Transfers::timedOut(const Operation &Op, Duration Timeout) const {
  SmallVector<int, 8> Waiting;
  for (const Message &M : List)
    if (!M.Complete && M.Peer >= 0)
      Waiting.push_back(M.Peer);
  llvm::sort(Waiting);
  Waiting.erase(std::unique(Waiting.begin(), Waiting.end()), Waiting.end());
  std::string Peers;
  for (size_t I = 0; I != Waiting.size(); ++I)
    Peers += (I ? ", " : "") + std::to_string(Waiting[I]);
  std::string Waited;
  if (!Waiting.empty())
    Waited =
        (Waiting.size() == 1 ? "; waiting for rank " : "; waiting for ranks ") +
        Peers;
  printLine("error", "rank " + Twine(Process->Rank) + ": " + Op.describe() +
                         " timed out after " + formatSeconds(Timeout) +
                         " s (a peer rank is dead or hung" + Waited + ")");
  abortJob();
}

/// An error unless Group is distinct valid ranks including this one;
/// this rank's index in it.
Expected<unsigned> checkGroup(const Operation &Op, ArrayRef<int> Group) {
  std::optional<unsigned> Self;
  SmallVector<int, 8> Sorted(Group.begin(), Group.end());
  llvm::sort(Sorted);
  for (unsigned I = 0; I != Group.size(); ++I) {
    if (Group[I] < 0 || Group[I] >= Process->Size)
      return Op.error("the job has no rank " + Twine(Group[I]) + " (it has " +
                      Twine(Process->Size) + ")");
    if (Group[I] == Process->Rank)
      Self = I;
  }
  if (std::adjacent_find(Sorted.begin(), Sorted.end()) != Sorted.end())
    return Op.error("the group names a rank twice");
  if (!Self)
    return Op.error("the group does not include this rank");
  return *Self;
}

Error checkPeer(const Operation &Op, int Peer) {
  if (Peer < 0 || Peer >= Process->Size)
    return Op.error("the job has no rank " + Twine(Peer) + " (it has " +
                    Twine(Process->Size) + ")");
  if (Peer == Process->Rank)
    return Op.error("the peer is this rank");
  return Error::success();
}

Error checkSameType(const Operation &Op, const Tensor &In, const Tensor &Out) {
  if (In.getElementType() != Out.getElementType() ||
      In.getShape() != Out.getShape())
    return Op.error("operand " + In.getTypeString() + " and result " +
                    Out.getTypeString() + " differ");
  return Error::success();
}

/// An error unless Out is Expected's shape with In's element type.
Error checkResult(const Operation &Op, const Tensor &In, const Tensor &Out,
                  ArrayRef<int64_t> Shape, const Twine &How) {
  if (In.getElementType() != Out.getElementType() || Out.getShape() != Shape)
    return Op.error(How + " makes " +
                    formatTensorType(In.getElementType(), Shape) + " from " +
                    In.getTypeString() + "; the result is " +
                    Out.getTypeString());
  return Error::success();
}

Error checkDim(const Operation &Op, const Tensor &T, unsigned Dim) {
  if (Dim >= T.getRank())
    return Op.error("dimension " + Twine(Dim) + " is not a dimension of " +
                    T.getTypeString());
  return Error::success();
}

void copyTensor(const Tensor &In, const Tensor &Out) {
  if (In.getData() != Out.getData() && In.getSizeInBytes() != 0)
    std::memcpy(Out.getData(), In.getData(), In.getSizeInBytes());
}

/// Out[k] = Parts[0][k] + Parts[1][k] + ..., added in that order in Acc.
template <typename Acc, typename LoadFn, typename StoreFn>
void sumParts(ArrayRef<const char *> Parts, char *Out, int64_t N, LoadFn Load,
              StoreFn Store) {
  std::vector<Acc> Sum(static_cast<size_t>(N));
  for (int64_t K = 0; K != N; ++K)
    Sum[K] = Load(Parts[0], K);
  for (size_t P = 1; P != Parts.size(); ++P)
    for (int64_t K = 0; K != N; ++K)
      Sum[K] += Load(Parts[P], K);
  for (int64_t K = 0; K != N; ++K)
    Store(Out, K, Sum[K]);
}

template <typename T> T loadRaw(const char *P, int64_t K) {
  T V;
  std::memcpy(&V, P + K * int64_t(sizeof(T)), sizeof(T));
  return V;
}
template <typename T> void storeRaw(char *P, int64_t K, T V) {
  std::memcpy(P + K * int64_t(sizeof(T)), &V, sizeof(T));
}

/// Integers add with wrap-around (unsigned arithmetic of their width).
template <typename U>
void sumIntegers(ArrayRef<const char *> Parts, char *Out, int64_t N) {
  sumParts<U>(Parts, Out, N, loadRaw<U>, storeRaw<U>);
}

bool canSum(ElementType Elem) { return Elem != ElementType::Bool; }

/// Out = the elementwise sum of Parts, in order. Floats narrower than f32
/// add in f32 and round once; f64 adds in f64.
void sumInOrder(ElementType Elem, ArrayRef<const char *> Parts, char *Out,
                int64_t N) {
  switch (Elem) {
  case ElementType::F32:
    return sumParts<float>(Parts, Out, N, loadRaw<float>, storeRaw<float>);
  case ElementType::F64:
    return sumParts<double>(Parts, Out, N, loadRaw<double>, storeRaw<double>);
  case ElementType::F16:
    return sumParts<float>(
        Parts, Out, N,
        [](const char *P, int64_t K) {
          return halfToFloat(loadRaw<uint16_t>(P, K));
        },
        [](char *P, int64_t K, float V) {
          storeRaw<uint16_t>(P, K, floatToHalf(V));
        });
  case ElementType::BF16:
    return sumParts<float>(
        Parts, Out, N,
        [](const char *P, int64_t K) {
          return bfloat16ToFloat(loadRaw<uint16_t>(P, K));
        },
        [](char *P, int64_t K, float V) {
          storeRaw<uint16_t>(P, K, floatToBfloat16(V));
        });
  case ElementType::F8E4M3:
    return sumParts<float>(
        Parts, Out, N,
        [](const char *P, int64_t K) {
          return float(decodeF8E4M3(uint8_t(P[K])));
        },
        [](char *P, int64_t K, float V) { P[K] = char(encodeF8E4M3(V)); });
  case ElementType::I64:
    return sumIntegers<uint64_t>(Parts, Out, N);
  case ElementType::I32:
    return sumIntegers<uint32_t>(Parts, Out, N);
  case ElementType::I8:
  case ElementType::U8:
    return sumIntegers<uint8_t>(Parts, Out, N);
  case ElementType::Bool:
    break;
  }
  llvm_unreachable("checked by canSum");
}

Error checkSummable(const Operation &Op, const Tensor &In) {
  if (!canSum(In.getElementType()))
    return Op.error("cannot sum " + In.getTypeString());
  return Error::success();
}

void parseFault(const char *Variable, int &Rank, int64_t &At) {
  const char *Value = std::getenv(Variable);
  if (!Value)
    return;
  int This = 0;
  if (const char *Current = std::getenv("AUTOPAR_LAUNCH_ATTEMPT"))
    if (StringRef(Current).getAsInteger(10, This))
      This = 0;
  // A comma-separated list of R[:N[:A]]; R:N:A fires only in `autopar
  // launch`'s attempt A; the first that applies is taken.
  SmallVector<StringRef, 2> Specs;
  StringRef(Value).split(Specs, ',');
  for (StringRef Spec : Specs) {
    auto [R, Rest] = Spec.split(':');
    auto [N, Attempt] = Rest.split(':');
    int Only = 0;
    if (!Attempt.empty() && (Attempt.getAsInteger(10, Only) || Only != This))
      continue;
    if (R.getAsInteger(10, Rank))
      Rank = -1;
    if (N.empty() || N.getAsInteger(10, At) || At < 1)
      At = 1;
    return;
  }
}

/// At exit: completes the pending sends and meets every rank at a barrier,
/// each within the timeout, then finalises MPI; aborts the job instead when
/// this rank failed or a wait timed out.
void finishMpi() {
  if (!Process)
    return;
  int Finalized = 0;
  MPI_Finalized(&Finalized);
  if (Finalized)
    return;
  if (Process->Failed)
    abortJob();
  Duration Timeout = Process->ExitTimeout;
  {
    SmallVector<int, 8> Peers;
    Transfers Sends;
    for (PendingSend &S : Process->Sends) {
      for (MPI_Request R : S.Requests)
        Sends.add(R, S.Peer);
      Peers.push_back(S.Peer);
    }
    llvm::sort(Peers);
    Peers.erase(std::unique(Peers.begin(), Peers.end()), Peers.end());
    Operation Op("completing the sends",
                 "to " + describeGroup(Peers) + " at exit");
    if (!Peers.empty())
      if (Error E = Sends.wait(Op, Timeout)) {
        printLine("error", toString(std::move(E)));
        abortJob();
      }
  }
  {
    Operation Op("the final barrier",
                 "on all " + Twine(Process->Size) + " ranks");
    setSignalActivity(Op.describe());
    auto Barrier = [&]() -> Error {
      MPI_Request Request;
      if (int Code = MPI_Ibarrier(MPI_COMM_WORLD, &Request))
        return Op.mpiError(Code);
      Transfers Wait;
      Wait.add(Request, -1);
      return Wait.wait(Op, Timeout);
    };
    if (Error E = Barrier()) {
      printLine("error", toString(std::move(E)));
      abortJob();
    }
  }
  std::snprintf(SignalActivity, sizeof(SignalActivity), "MPI_Finalize");
  BlockingWatchdog Watchdog(
      "autopar-run: error: rank " + std::to_string(Process->Rank) +
          ": MPI_Finalize timed out after " + formatSeconds(Timeout) + " s\n",
      Timeout);
  MPI_Finalize();
}

} // namespace

bool MpiCommunicator::isLaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK");
}

MpiCommunicator::MpiCommunicator(Duration Timeout) {
  if (Process) {
    Process->ExitTimeout = std::max(Process->ExitTimeout, Timeout);
    return;
  }
  int Initialized = 0;
  MPI_Initialized(&Initialized);
  if (!Initialized) {
    const char *Rank = std::getenv("OMPI_COMM_WORLD_RANK");
    BlockingWatchdog Watchdog(
        "autopar-run: error: rank " + std::string(Rank ? Rank : "?") +
            ": MPI_Init timed out after " + formatSeconds(Timeout) +
            " s (a rank did not start or is hung)\n",
        Timeout);
    int Provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &Provided);
  }
  Process = new MpiProcess;
  Process->ExitTimeout = Timeout;
  MPI_Comm_rank(MPI_COMM_WORLD, &Process->Rank);
  MPI_Comm_size(MPI_COMM_WORLD, &Process->Size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm Host;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &Host) == MPI_SUCCESS) {
    int HostRanks = 1;
    MPI_Comm_size(Host, &HostRanks);
    MPI_Comm_free(&Host);
    // The host's cores, not this rank's affinity: mpirun binds each rank
    // to a core of its own when they fit.
    Process->HotPoll =
        HostRanks <= int(std::max(1u, std::thread::hardware_concurrency()));
  }
  parseFault("AUTOPAR_TEST_HANG_RANK", Process->HangRank, Process->HangAt);
  parseFault("AUTOPAR_TEST_KILL_RANK", Process->KillRank, Process->KillAt);
  parseFault("AUTOPAR_TEST_CORRUPT_SEND", Process->CorruptRank,
             Process->CorruptAt);

  std::snprintf(SignalRank, sizeof(SignalRank), "%d", Process->Rank);
  struct sigaction Action;
  std::memset(&Action, 0, sizeof(Action));
  Action.sa_sigaction = onTerminate;
  Action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&Action.sa_mask);
  sigaction(SIGTERM, &Action, &PreviousTermAction);
  std::atexit(finishMpi);
}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::noteFailure() {
  if (Process)
    Process->Failed = true;
}

void MpiCommunicator::abortIfFailed() {
  if (Process && Process->Failed)
    abortJob();
}

int MpiCommunicator::getRank() const { return Process->Rank; }
int MpiCommunicator::getNumRanks() const { return Process->Size; }

/// The first element of chunk J when N elements are split into P chunks
/// whose sizes differ by at most one.
static int64_t chunkBegin(int64_t N, size_t P, size_t J) {
  return int64_t(J) * (N / int64_t(P)) + std::min<int64_t>(J, N % int64_t(P));
}

Error MpiCommunicator::allReduce(const Tensor &In, const Tensor &Out,
                                 ArrayRef<int> Group, Duration Timeout) {
  Operation Op("all-reduce", "on " + describeGroup(Group));
  Expected<unsigned> Self = checkGroup(Op, Group);
  if (!Self)
    return Self.takeError();
  if (Error E = checkSameType(Op, In, Out))
    return E;
  if (Error E = checkSummable(Op, In))
    return E;
  if (Error E = Op.begin())
    return E;
  size_t P = Group.size();
  if (P == 1) {
    copyTensor(In, Out);
    return Error::success();
  }
  // Reduce-scatter: member J owns chunk J and adds the group's
  // contributions to it in group order...
  int64_t N = In.getNumElements();
  size_t ES = getElementSize(In.getElementType());
  const char *InData = static_cast<const char *>(In.getData());
  char *OutData = static_cast<char *>(Out.getData());
  auto Begin = [&](size_t J) { return chunkBegin(N, P, J); };
  auto Bytes = [&](size_t J) { return size_t(Begin(J + 1) - Begin(J)) * ES; };
  size_t MyBytes = Bytes(*Self);
  std::vector<char> Received(P * MyBytes);
  Transfers Scatter;
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      Scatter.recv(Received.data() + J * MyBytes, MyBytes, Group[J],
                   TagReduceChunks);
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      Scatter.send(InData + Begin(J) * ES, Bytes(J), Group[J], TagReduceChunks);
  if (Error E = Scatter.wait(Op, Timeout))
    return E;
  SmallVector<const char *, 8> Parts;
  for (size_t J = 0; J != P; ++J)
    Parts.push_back(J == *Self ? InData + Begin(J) * ES
                               : Received.data() + J * MyBytes);
  sumInOrder(In.getElementType(), Parts, OutData + Begin(*Self) * ES,
             Begin(*Self + 1) - Begin(*Self));
  // ... then every member gets every owner's chunk.
  Transfers Gather;
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      Gather.recv(OutData + Begin(J) * ES, Bytes(J), Group[J], TagGatherChunks);
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      Gather.send(OutData + Begin(*Self) * ES, MyBytes, Group[J],
                  TagGatherChunks);
  return Gather.wait(Op, Timeout);
}

Error MpiCommunicator::allGather(const Tensor &In, const Tensor &Out,
                                 ArrayRef<int> Group, unsigned Dim,
                                 Duration Timeout) {
  Operation Op("all-gather", "on " + describeGroup(Group));
  Expected<unsigned> Self = checkGroup(Op, Group);
  if (!Self)
    return Self.takeError();
  if (Error E = checkDim(Op, In, Dim))
    return E;
  size_t P = Group.size();
  SmallVector<int64_t, 4> Shape(In.getShape().begin(), In.getShape().end());
  Shape[Dim] *= int64_t(P);
  if (Error E = checkResult(Op, In, Out, Shape,
                            "gathering " + Twine(P) +
                                " ranks along dimension " + Twine(Dim)))
    return E;
  if (Error E = Op.begin())
    return E;
  if (P == 1) {
    copyTensor(In, Out);
    return Error::success();
  }
  size_t InBytes = In.getSizeInBytes();
  bool Direct = chunksAreContiguous(Shape, Dim);
  std::vector<char> Buffer(Direct ? 0 : Out.getSizeInBytes());
  char *Chunks = Direct ? static_cast<char *>(Out.getData()) : Buffer.data();
  Transfers T;
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.recv(Chunks + J * InBytes, InBytes, Group[J], TagAllGather);
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.send(In.getData(), InBytes, Group[J], TagAllGather);
  // In place when the operand is already this rank's block of the result
  // (a parameter in its home, runtime/Executor.h).
  if (InBytes && Chunks + *Self * InBytes != In.getData())
    std::memcpy(Chunks + *Self * InBytes, In.getData(), InBytes);
  if (Error E = T.wait(Op, Timeout))
    return E;
  if (!Direct)
    unpackChunks(Chunks, Out.getData(), Shape,
                 getElementSize(In.getElementType()), Dim, int64_t(P));
  return Error::success();
}

Error MpiCommunicator::reduceScatter(const Tensor &In, const Tensor &Out,
                                     ArrayRef<int> Group, unsigned Dim,
                                     Duration Timeout) {
  Operation Op("reduce-scatter", "on " + describeGroup(Group));
  Expected<unsigned> Self = checkGroup(Op, Group);
  if (!Self)
    return Self.takeError();
  if (Error E = checkDim(Op, In, Dim))
    return E;
  if (Error E = checkSummable(Op, In))
    return E;
  size_t P = Group.size();
  if (In.getDim(Dim) % int64_t(P))
    return Op.error("dimension " + Twine(Dim) + " of " + In.getTypeString() +
                    " is not divisible by the " + Twine(P) + " ranks");
  SmallVector<int64_t, 4> Shape(In.getShape().begin(), In.getShape().end());
  Shape[Dim] /= int64_t(P);
  if (Error E = checkResult(Op, In, Out, Shape,
                            "scattering over " + Twine(P) +
                                " ranks along dimension " + Twine(Dim)))
    return E;
  if (Error E = Op.begin())
    return E;
  if (P == 1) {
    copyTensor(In, Out);
    return Error::success();
  }
  size_t ES = getElementSize(In.getElementType());
  size_t ChunkBytes = Out.getSizeInBytes();
  std::vector<char> Packed;
  const char *Chunks = static_cast<const char *>(In.getData());
  if (!chunksAreContiguous(In.getShape(), Dim)) {
    Packed.resize(In.getSizeInBytes());
    packChunks(In.getData(), Packed.data(), In.getShape(), ES, Dim, int64_t(P));
    Chunks = Packed.data();
  }
  std::vector<char> Received(P * ChunkBytes);
  Transfers T;
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.recv(Received.data() + J * ChunkBytes, ChunkBytes, Group[J],
             TagReduceScatter);
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.send(Chunks + J * ChunkBytes, ChunkBytes, Group[J], TagReduceScatter);
  if (Error E = T.wait(Op, Timeout))
    return E;
  SmallVector<const char *, 8> Parts;
  for (size_t J = 0; J != P; ++J)
    Parts.push_back(J == *Self ? Chunks + J * ChunkBytes
                               : Received.data() + J * ChunkBytes);
  sumInOrder(In.getElementType(), Parts, static_cast<char *>(Out.getData()),
             Out.getNumElements());
  return Error::success();
}

Error MpiCommunicator::allToAll(const Tensor &In, const Tensor &Out,
                                ArrayRef<int> Group, unsigned SrcDim,
                                unsigned DstDim, Duration Timeout) {
  Operation Op("all-to-all", "on " + describeGroup(Group));
  Expected<unsigned> Self = checkGroup(Op, Group);
  if (!Self)
    return Self.takeError();
  if (Error E = checkDim(Op, In, SrcDim))
    return E;
  if (Error E = checkDim(Op, In, DstDim))
    return E;
  size_t P = Group.size();
  if (In.getDim(SrcDim) % int64_t(P))
    return Op.error("dimension " + Twine(SrcDim) + " of " + In.getTypeString() +
                    " is not divisible by the " + Twine(P) + " ranks");
  SmallVector<int64_t, 4> Part(In.getShape().begin(), In.getShape().end());
  Part[SrcDim] /= int64_t(P);
  SmallVector<int64_t, 4> Shape = Part;
  Shape[DstDim] *= int64_t(P);
  if (Error E = checkResult(Op, In, Out, Shape,
                            "exchanging among " + Twine(P) +
                                " ranks from dimension " + Twine(SrcDim) +
                                " to dimension " + Twine(DstDim)))
    return E;
  if (Error E = Op.begin())
    return E;
  if (P == 1) {
    copyTensor(In, Out);
    return Error::success();
  }
  size_t ES = getElementSize(In.getElementType());
  size_t PartBytes = In.getSizeInBytes() / P;
  std::vector<char> Packed;
  const char *Sent = static_cast<const char *>(In.getData());
  if (!chunksAreContiguous(In.getShape(), SrcDim)) {
    Packed.resize(In.getSizeInBytes());
    packChunks(In.getData(), Packed.data(), In.getShape(), ES, SrcDim,
               int64_t(P));
    Sent = Packed.data();
  }
  bool Direct = chunksAreContiguous(Shape, DstDim);
  std::vector<char> Buffer(Direct ? 0 : Out.getSizeInBytes());
  char *Received = Direct ? static_cast<char *>(Out.getData()) : Buffer.data();
  Transfers T;
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.recv(Received + J * PartBytes, PartBytes, Group[J], TagAllToAll);
  for (size_t J = 0; J != P; ++J)
    if (J != *Self)
      T.send(Sent + J * PartBytes, PartBytes, Group[J], TagAllToAll);
  if (PartBytes)
    std::memcpy(Received + *Self * PartBytes, Sent + *Self * PartBytes,
                PartBytes);
  if (Error E = T.wait(Op, Timeout))
    return E;
  if (!Direct)
    unpackChunks(Received, Out.getData(), Shape, ES, DstDim, int64_t(P));
  return Error::success();
}

/// The MPI tag of a point-to-point transfer of tag Tag (>= 0).
static Expected<int> getStageTag(const Operation &Op, int Tag) {
  int *Bound = nullptr, Found = 0;
  int UB = 32767; // the least MPI_TAG_UB the standard allows
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &Bound, &Found) ==
          MPI_SUCCESS &&
      Found && Bound)
    UB = *Bound;
  if (Tag < 0 || Tag > UB - TagStage)
    return Op.error("tag " + Twine(Tag) + " is outside [0, " +
                    Twine(UB - TagStage) + "] (MPI_TAG_UB is " + Twine(UB) +
                    ")");
  return TagStage + Tag;
}

Error MpiCommunicator::send(const Tensor &In, int DstRank, Duration Timeout) {
  return send(In, DstRank, 0, Timeout);
}

Error MpiCommunicator::recv(const Tensor &Out, int SrcRank, Duration Timeout) {
  return recv(Out, SrcRank, 0, Timeout);
}

Error MpiCommunicator::send(const Tensor &In, int DstRank, int Tag, Duration) {
  Operation Op("send", "to rank " + Twine(DstRank) +
                           (Tag ? " with tag " + Twine(Tag) : Twine()));
  if (Error E = checkPeer(Op, DstRank))
    return E;
  Expected<int> MpiTag = getStageTag(Op, Tag);
  if (!MpiTag)
    return MpiTag.takeError();
  if (Error E = Op.begin())
    return E;
  size_t Payload = In.getSizeInBytes();
  // --verify-transfers: the bytes, then their CRC32C.
  size_t Bytes = Payload + (Process->VerifyTransfers ? 4 : 0);
  PendingSend S;
  S.Data.reset(new char[std::max<size_t>(Bytes, 1)]);
  if (Payload)
    std::memcpy(S.Data.get(), In.getData(), Payload);
  if (Process->VerifyTransfers) {
    uint32_t Crc = crc32c(ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(S.Data.get()), Payload));
    for (int I = 0; I != 4; ++I)
      S.Data[Payload + I] = char((Crc >> (8 * I)) & 0xff);
    if (Process->Rank == Process->CorruptRank &&
        ++Process->CheckedSends == Process->CorruptAt && Payload) {
      printLine("note", "rank " + Twine(Process->Rank) +
                            ": corrupting a byte of " + Op.describe() +
                            " (AUTOPAR_TEST_CORRUPT_SEND)");
      S.Data[Payload / 2] ^= 0x10;
    }
  }
  S.Peer = DstRank;
  size_t Offset = 0;
  do {
    int Count = int(std::min(Bytes - Offset, MaxMessageBytes));
    MPI_Request R;
    int Code = MPI_Isend(S.Data.get() + Offset, Count, MPI_BYTE, DstRank,
                         *MpiTag, MPI_COMM_WORLD, &R);
    if (Code != MPI_SUCCESS)
      return Op.mpiError(Code);
    S.Requests.push_back(R);
    Offset += size_t(Count);
  } while (Offset < Bytes);
  Process->Sends.push_back(std::move(S));
  return Error::success();
}

Error MpiCommunicator::recv(const Tensor &Out, int SrcRank, int Tag,
                            Duration Timeout) {
  Operation Op("receive", "from rank " + Twine(SrcRank) +
                              (Tag ? " with tag " + Twine(Tag) : Twine()));
  if (Error E = checkPeer(Op, SrcRank))
    return E;
  Expected<int> MpiTag = getStageTag(Op, Tag);
  if (!MpiTag)
    return MpiTag.takeError();
  if (Error E = Op.begin())
    return E;
  Transfers T;
  size_t Payload = Out.getSizeInBytes();
  if (!Process->VerifyTransfers) {
    T.recv(Out.getData(), Payload, SrcRank, *MpiTag);
    return T.wait(Op, Timeout);
  }
  std::vector<uint8_t> Message(Payload + 4);
  T.recv(Message.data(), Message.size(), SrcRank, *MpiTag);
  if (Error E = T.wait(Op, Timeout))
    return E;
  uint32_t Sent = 0;
  for (int I = 0; I != 4; ++I)
    Sent |= uint32_t(Message[Payload + I]) << (8 * I);
  uint32_t Got = crc32c(ArrayRef<uint8_t>(Message.data(), Payload));
  if (Sent != Got)
    return Op.error(formatv("CRC32C mismatch (verify-transfers): rank {0} "
                            "sent 0x{1:x-8}, the {2} bytes received give "
                            "0x{3:x-8}; the link or a buffer corrupted them",
                            SrcRank, Sent, Payload, Got)
                        .str());
  if (Payload)
    std::memcpy(Out.getData(), Message.data(), Payload);
  return Error::success();
}

Error MpiCommunicator::setVerifyTransfers(bool On) {
  Process->VerifyTransfers = On;
  return Error::success();
}
