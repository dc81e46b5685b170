//===- NcclCommunicator.cpp - Communication over NCCL ---------------------===//

#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/cpu/CpuCommunicator.h"
#include "runtime/cpu/MpiCommunicator.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaStreams.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

using namespace autopar;
using namespace llvm;

using Clock = std::chrono::steady_clock;

static std::string formatSeconds(Communicator::Duration D) {
  double S = D.count() / 1000.0;
  char Buffer[32];
  std::snprintf(Buffer, sizeof(Buffer), "%g", S);
  return Buffer;
}

static std::string describeRanks(ArrayRef<int> Ranks) {
  std::string S = Ranks.size() == 1 ? "rank " : "ranks [";
  for (size_t I = 0; I != Ranks.size(); ++I)
    S += (I ? ", " : "") + std::to_string(Ranks[I]);
  return Ranks.size() == 1 ? S : S + "]";
}

namespace {

/// One NCCL communicator over an ordered list of ranks, with its stream.
struct NcclComm {
  std::string Key;
  SmallVector<int, 8> Ranks;
  ncclComm_t Comm = nullptr;
  cudaStream_t Stream = nullptr;
  bool Aborted = false;
};

/// An operation the watchdog watches until its event completes.
struct Watched {
  EventRef Done;
  NcclComm *Comm;
  Clock::time_point Deadline;
  std::string What;
  Communicator::Duration Timeout;
};

} // namespace

struct NcclCommunicator::Impl {
  CudaStreams &Streams;
  std::unique_ptr<MpiCommunicator> Mpi;
  int Rank = 0, Size = 1;
  Duration InitTimeout;
  std::map<std::string, std::unique_ptr<NcclComm>> Comms;

  std::mutex Mutex;
  std::condition_variable Wake;
  std::vector<Watched> Pending;
  bool Stop = false;
  std::atomic<bool> Faulted{false};
  std::thread Watchdog;

  Impl(CudaStreams &Streams, Duration Timeout)
      : Streams(Streams), InitTimeout(Timeout) {
    if (MpiCommunicator::isLaunchedByMpi()) {
      Mpi = std::make_unique<MpiCommunicator>(Timeout);
      Rank = Mpi->getRank();
      Size = Mpi->getNumRanks();
    }
  }

  Error error(const Twine &Message) {
    return createStringError(inconvertibleErrorCode(),
                             "rank " + Twine(Rank) + ": " + Message);
  }

  /// What an operation is, with the label of the node it serves.
  static std::string describe(const Twine &What) {
    StringRef Label = CommunicationLabel::current();
    return Label.empty() ? What.str() : (What + " (" + Label + ")").str();
  }

  Error checkFault() {
    if (std::optional<std::string> F = Streams.getFault())
      return createStringError(inconvertibleErrorCode(), *F);
    return Error::success();
  }

  /// Polls a non-blocking communicator until its last call is done.
  Error settle(NcclComm &C, ncclResult_t R, const std::string &What,
               Duration Timeout) {
    Clock::time_point Deadline = Clock::now() + Timeout;
    while (R == ncclInProgress) {
      // The watchdog may have aborted the communicators.
      if (Faulted) {
        if (Error E = checkFault())
          return E;
        return error(What + ": aborted");
      }
      if (Clock::now() > Deadline) {
        abortAll();
        return error(What + " timed out after " + formatSeconds(Timeout) +
                     " s (a peer rank is dead or hung)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (ncclCommGetAsyncError(C.Comm, &R) != ncclSuccess)
        break;
    }
    if (R != ncclSuccess)
      return error(What + " failed: " + ncclGetErrorString(R) + " (" +
                   ncclGetLastError(C.Comm) + ")");
    return Error::success();
  }

  Error checkGroup(ArrayRef<int> Group, const std::string &What) {
    SmallVector<int, 8> Sorted(Group.begin(), Group.end());
    llvm::sort(Sorted);
    for (int R : Group)
      if (R < 0 || R >= Size)
        return error(What + ": the job has no rank " + Twine(R) + " (it has " +
                     Twine(Size) + ")");
    if (std::adjacent_find(Sorted.begin(), Sorted.end()) != Sorted.end())
      return error(What + ": the group names a rank twice");
    if (!llvm::is_contained(Group, Rank))
      return error(What + ": the group does not include this rank");
    return Error::success();
  }

  /// The communicator over Ranks (in this order) named Key; created on
  /// first use with the members' help.
  Expected<NcclComm *> getComm(const std::string &Key, ArrayRef<int> Ranks,
                               Duration Timeout) {
    auto It = Comms.find(Key);
    if (It != Comms.end())
      return It->second.get();
    std::string What =
        "creating the NCCL communicator of " + describeRanks(Ranks);
    // The id travels with the key: 128 bytes of key, then the id.
    constexpr size_t KeyBytes = 128;
    static_assert(sizeof(ncclUniqueId) <= 128, "ncclUniqueId grew");
    std::vector<uint8_t> Message(KeyBytes + sizeof(ncclUniqueId), 0);
    std::memcpy(Message.data(), Key.data(), std::min(Key.size(), KeyBytes));
    ncclUniqueId Id;
    Tensor Host(ElementType::U8, {int64_t(Message.size())}, Message.data());
    if (Ranks.front() == Rank) {
      if (ncclResult_t R = ncclGetUniqueId(&Id))
        return error(What + ": ncclGetUniqueId: " + ncclGetErrorString(R));
      std::memcpy(Message.data() + KeyBytes, &Id, sizeof(Id));
      for (int Peer : Ranks.drop_front())
        if (Error E = Mpi->send(Host, Peer, Timeout))
          return E;
    } else {
      if (Error E = Mpi->recv(Host, Ranks.front(), Timeout))
        return E;
      if (std::memcmp(Message.data(), Key.data(),
                      std::min(Key.size(), KeyBytes)) != 0)
        return error(What + ": rank " + Twine(Ranks.front()) +
                     " sent the id of another communicator (the ranks "
                     "reach their communication in different orders)");
      std::memcpy(&Id, Message.data() + KeyBytes, sizeof(Id));
    }
    auto C = std::make_unique<NcclComm>();
    C->Key = Key;
    C->Ranks.assign(Ranks.begin(), Ranks.end());
    if (cudaError_t E =
            cudaStreamCreateWithFlags(&C->Stream, cudaStreamNonBlocking))
      return error(What + ": cudaStreamCreate: " + cudaGetErrorString(E));
    ncclConfig_t Config = NCCL_CONFIG_INITIALIZER;
    Config.blocking = 0;
    int Me = int(llvm::find(Ranks, Rank) - Ranks.begin());
    ncclResult_t R =
        ncclCommInitRankConfig(&C->Comm, int(Ranks.size()), Id, Me, &Config);
    if (R != ncclSuccess && R != ncclInProgress) {
      cudaStreamDestroy(C->Stream);
      return error(What + ": " + ncclGetErrorString(R));
    }
    NcclComm *Raw = C.get();
    Comms[Key] = std::move(C);
    if (Error E = settle(*Raw, R, What, Timeout))
      return E;
    return Raw;
  }

  Expected<NcclComm *> getGroupComm(ArrayRef<int> Group, Duration Timeout) {
    std::string Key = "group";
    for (int R : Group)
      Key += ":" + std::to_string(R);
    return getComm(Key, Group, Timeout);
  }

  Expected<NcclComm *> getPairComm(int Src, int Dst, Duration Timeout) {
    int Pair[2] = {Src, Dst};
    return getComm("p2p:" + std::to_string(Src) + ">" + std::to_string(Dst),
                   Pair, Timeout);
  }

  /// Queues an operation on C's stream: Run makes the NCCL calls. Reads
  /// and Writes are the buffers it touches.
  Error enqueue(NcclComm &C, const std::string &What, Duration Timeout,
                ArrayRef<void *> Reads, ArrayRef<void *> Writes,
                function_ref<ncclResult_t()> Run,
                function_ref<Error()> After = nullptr) {
    if (Error E = checkFault())
      return E;
    SmallVector<void *, 4> All(Reads.begin(), Reads.end());
    All.append(Writes.begin(), Writes.end());
    if (Error E = Streams.prepareSide(C.Stream, All))
      return error(What + ": " + toString(std::move(E)));
    if (Error E = settle(C, Run(), What, Timeout))
      return E;
    if (After)
      if (Error E = After())
        return E;
    Expected<EventRef> Done = Streams.noteSideWork(C.Stream, Reads, Writes);
    if (!Done)
      return error(What + ": " + toString(Done.takeError()));
    std::lock_guard<std::mutex> Lock(Mutex);
    Pending.push_back(Watched{*Done, &C, Clock::now() + Timeout,
                              "rank " + Twine(Rank).str() + ": " + What,
                              Timeout});
    if (!Watchdog.joinable())
      Watchdog = std::thread([this, Device = currentDevice()] {
        cudaSetDevice(Device);
        watch();
      });
    return Error::success();
  }

  static int currentDevice() {
    int Device = 0;
    cudaGetDevice(&Device);
    return Device;
  }

  void abortAll() {
    std::lock_guard<std::mutex> Lock(Mutex);
    Faulted = true;
    for (auto &Entry : Comms)
      if (!Entry.second->Aborted) {
        ncclCommAbort(Entry.second->Comm);
        Entry.second->Aborted = true;
      }
  }

  /// The watchdog: every 5 ms, drops completed operations and looks for
  /// timeouts and NCCL errors.
  void watch() {
    std::unique_lock<std::mutex> Lock(Mutex);
    while (!Stop) {
      Wake.wait_for(Lock, std::chrono::milliseconds(5));
      std::optional<std::string> Fault;
      Clock::time_point Now = Clock::now();
      Pending.erase(
          std::remove_if(Pending.begin(), Pending.end(),
                         [&](const Watched &W) {
                           if (cudaEventQuery(W.Done->get()) == cudaSuccess)
                             return true;
                           if (Fault)
                             return false;
                           ncclResult_t R = ncclSuccess;
                           ncclCommGetAsyncError(W.Comm->Comm, &R);
                           if (R != ncclSuccess && R != ncclInProgress)
                             Fault =
                                 W.What + " failed: " + ncclGetErrorString(R);
                           else if (Now > W.Deadline)
                             Fault = W.What + " timed out after " +
                                     formatSeconds(W.Timeout) +
                                     " s (a peer rank is dead or hung)";
                           return false;
                         }),
          Pending.end());
      if (Fault) {
        Streams.setFault(*Fault);
        Faulted = true;
        for (const Watched &W : Pending)
          if (!W.Comm->Aborted) {
            ncclCommAbort(W.Comm->Comm);
            W.Comm->Aborted = true;
          }
        Pending.clear();
      }
    }
  }

  /// A device copy on the compute stream (a one-rank collective).
  Error copy(const std::string &What, const Tensor &In, const Tensor &Out) {
    if (In.getSizeInBytes() != Out.getSizeInBytes())
      return error(What + ": operand " + In.getTypeString() + " and result " +
                   Out.getTypeString() + " differ in size");
    if (In.getData() == Out.getData() || In.getSizeInBytes() == 0)
      return Error::success();
    if (Error E = Streams.beforeCompute({In.getData()}, {Out.getData()}))
      return E;
    if (cudaError_t E =
            cudaMemcpyAsync(Out.getData(), In.getData(), In.getSizeInBytes(),
                            cudaMemcpyDeviceToDevice, Streams.getCompute()))
      return error(What + ": " + cudaGetErrorString(E));
    return Error::success();
  }

  /// Device scratch, freed (after the side stream's use) by the caller.
  Expected<void *> scratch(size_t Bytes) {
    return Streams.getAllocator().allocate(Bytes);
  }

  /// Copies Src (shape S) so that each of the P chunks of dimension Dim is
  /// contiguous (Pack), or back (unpack), on Stream.
  static cudaError_t moveChunks(bool Pack, const void *Src, void *Dst,
                                ArrayRef<int64_t> S, size_t ElemSize,
                                unsigned Dim, int64_t P, cudaStream_t Stream) {
    int64_t Outer = getNumElements(S.take_front(Dim));
    int64_t L = getNumElements(S.drop_front(Dim)) / P;
    cuda::Dims D;
    D.Rank = 3;
    D.Size[0] = P;
    D.Size[1] = Outer;
    D.Size[2] = L;
    cuda::Strides Packed, Spread;
    Packed.S[0] = Outer * L;
    Packed.S[1] = L;
    Packed.S[2] = 1;
    Spread.S[0] = L;
    Spread.S[1] = P * L;
    Spread.S[2] = 1;
    return cuda::copyStrided(Dst, 0, Pack ? Packed : Spread, Src, 0,
                             Pack ? Spread : Packed, D, int(ElemSize), Stream);
  }
};

static std::optional<ncclDataType_t> getSumType(ElementType T) {
  switch (T) {
  case ElementType::F32:
    return ncclFloat32;
  case ElementType::F16:
    return ncclFloat16;
  case ElementType::BF16:
    return ncclBfloat16;
  case ElementType::F64:
    return ncclFloat64;
  case ElementType::I64:
    return ncclInt64;
  case ElementType::I32:
    return ncclInt32;
  case ElementType::I8:
    return ncclInt8;
  case ElementType::U8:
    return ncclUint8;
  default:
    return std::nullopt;
  }
}

NcclCommunicator::NcclCommunicator(CudaStreams &Streams, Duration Timeout)
    : P(std::make_unique<Impl>(Streams, Timeout)) {}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> Lock(P->Mutex);
    P->Stop = true;
  }
  P->Wake.notify_all();
  if (P->Watchdog.joinable())
    P->Watchdog.join();
  bool Failed = P->Faulted || P->Streams.getFault().has_value();
  for (auto &Entry : P->Comms) {
    NcclComm &C = *Entry.second;
    if (!C.Aborted) {
      if (Failed) {
        ncclCommAbort(C.Comm);
      } else {
        // Flush, with the creation timeout, then free.
        ncclResult_t R = ncclCommFinalize(C.Comm);
        Clock::time_point Deadline = Clock::now() + P->InitTimeout;
        while (R == ncclInProgress && Clock::now() < Deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          ncclCommGetAsyncError(C.Comm, &R);
        }
        if (R == ncclSuccess)
          ncclCommDestroy(C.Comm);
        else
          ncclCommAbort(C.Comm);
      }
    }
    cudaStreamDestroy(C.Stream);
  }
}

std::string NcclCommunicator::getVersionString() {
  int V = 0;
  ncclGetVersion(&V);
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return "NCCL " + std::to_string(V / 10000) + "." +
         std::to_string(V / 100 % 100) + "." + std::to_string(V % 100);
}

int NcclCommunicator::getRank() const { return P->Rank; }
int NcclCommunicator::getNumRanks() const { return P->Size; }

Error NcclCommunicator::allReduce(const Tensor &In, const Tensor &Out,
                                  ArrayRef<int> Group, Duration Timeout) {
  std::string What = Impl::describe("all-reduce on " + describeRanks(Group));
  if (Error E = P->checkGroup(Group, What))
    return E;
  if (Group.size() == 1)
    return P->copy(What, In, Out);
  std::optional<ncclDataType_t> Type = getSumType(In.getElementType());
  if (!Type)
    return P->error(What + ": " + In.getTypeString() +
                    " cannot be summed by NCCL");
  if (In.getShape() != Out.getShape() ||
      In.getElementType() != Out.getElementType())
    return P->error(What + ": operand " + In.getTypeString() + " and result " +
                    Out.getTypeString() + " differ");
  Expected<NcclComm *> C = P->getGroupComm(Group, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  return P->enqueue(Comm, What, Timeout, {In.getData()}, {Out.getData()}, [&] {
    return ncclAllReduce(In.getData(), Out.getData(),
                         size_t(In.getNumElements()), *Type, ncclSum, Comm.Comm,
                         Comm.Stream);
  });
}

Error NcclCommunicator::allGather(const Tensor &In, const Tensor &Out,
                                  ArrayRef<int> Group, unsigned Dim,
                                  Duration Timeout) {
  std::string What = Impl::describe("all-gather along dimension " + Twine(Dim) +
                                    " on " + describeRanks(Group));
  if (Error E = P->checkGroup(Group, What))
    return E;
  if (Group.size() == 1)
    return P->copy(What, In, Out);
  int64_t Parts = int64_t(Group.size());
  if (Out.getSizeInBytes() != In.getSizeInBytes() * size_t(Parts) ||
      Dim >= Out.getRank() || Out.getDim(Dim) % Parts)
    return P->error(What + ": result " + Out.getTypeString() +
                    " is not the operand " + In.getTypeString() + " times " +
                    Twine(Parts) + " along dimension " + Twine(Dim));
  Expected<NcclComm *> C = P->getGroupComm(Group, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  size_t Bytes = In.getSizeInBytes();
  if (chunksAreContiguous(Out.getShape(), Dim))
    return P->enqueue(Comm, What, Timeout, {In.getData()}, {Out.getData()},
                      [&] {
                        return ncclAllGather(In.getData(), Out.getData(), Bytes,
                                             ncclUint8, Comm.Comm, Comm.Stream);
                      });
  Expected<void *> Temp = P->scratch(Out.getSizeInBytes());
  if (!Temp)
    return P->error(What + ": " + toString(Temp.takeError()));
  Error E = P->enqueue(
      Comm, What, Timeout, {In.getData()}, {Out.getData(), *Temp},
      [&] {
        return ncclAllGather(In.getData(), *Temp, Bytes, ncclUint8, Comm.Comm,
                             Comm.Stream);
      },
      [&]() -> Error {
        if (cudaError_t CE = Impl::moveChunks(
                /*Pack=*/false, *Temp, Out.getData(), Out.getShape(),
                getElementSize(Out.getElementType()), Dim, Parts, Comm.Stream))
          return P->error(What + ": " + cudaGetErrorString(CE));
        return Error::success();
      });
  P->Streams.release(*Temp);
  return E;
}

Error NcclCommunicator::reduceScatter(const Tensor &In, const Tensor &Out,
                                      ArrayRef<int> Group, unsigned Dim,
                                      Duration Timeout) {
  std::string What = Impl::describe("reduce-scatter along dimension " +
                                    Twine(Dim) + " on " + describeRanks(Group));
  if (Error E = P->checkGroup(Group, What))
    return E;
  if (Group.size() == 1)
    return P->copy(What, In, Out);
  std::optional<ncclDataType_t> Type = getSumType(In.getElementType());
  if (!Type)
    return P->error(What + ": " + In.getTypeString() +
                    " cannot be summed by NCCL");
  int64_t Parts = int64_t(Group.size());
  if (In.getSizeInBytes() != Out.getSizeInBytes() * size_t(Parts) ||
      Dim >= In.getRank() || In.getDim(Dim) % Parts ||
      In.getElementType() != Out.getElementType())
    return P->error(What + ": operand " + In.getTypeString() +
                    " is not the result " + Out.getTypeString() + " times " +
                    Twine(Parts) + " along dimension " + Twine(Dim));
  Expected<NcclComm *> C = P->getGroupComm(Group, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  size_t Count = size_t(Out.getNumElements());
  const void *Src = In.getData();
  void *Temp = nullptr;
  if (!chunksAreContiguous(In.getShape(), Dim)) {
    Expected<void *> T = P->scratch(In.getSizeInBytes());
    if (!T)
      return P->error(What + ": " + toString(T.takeError()));
    Temp = *T;
    // Pack on the compute stream, where In was written.
    if (Error E = P->Streams.beforeCompute({In.getData()}, {Temp}))
      return E;
    if (cudaError_t CE = Impl::moveChunks(
            /*Pack=*/true, In.getData(), Temp, In.getShape(),
            getElementSize(In.getElementType()), Dim, Parts,
            P->Streams.getCompute())) {
      P->Streams.release(Temp);
      return P->error(What + ": " + cudaGetErrorString(CE));
    }
    Src = Temp;
  }
  Error E = P->enqueue(
      Comm, What, Timeout, {const_cast<void *>(Src)}, {Out.getData()}, [&] {
        return ncclReduceScatter(Src, Out.getData(), Count, *Type, ncclSum,
                                 Comm.Comm, Comm.Stream);
      });
  if (Temp)
    P->Streams.release(Temp);
  return E;
}

Error NcclCommunicator::allToAll(const Tensor &In, const Tensor &Out,
                                 ArrayRef<int> Group, unsigned SrcDim,
                                 unsigned DstDim, Duration Timeout) {
  std::string What = Impl::describe("all-to-all on " + describeRanks(Group));
  if (Error E = P->checkGroup(Group, What))
    return E;
  if (Group.size() == 1)
    return P->copy(What, In, Out);
  int64_t Parts = int64_t(Group.size());
  if (In.getSizeInBytes() != Out.getSizeInBytes() || SrcDim >= In.getRank() ||
      In.getDim(SrcDim) % Parts || DstDim >= Out.getRank() ||
      Out.getDim(DstDim) % Parts)
    return P->error(What + ": operand " + In.getTypeString() + " and result " +
                    Out.getTypeString() + " do not split into " + Twine(Parts) +
                    " parts");
  Expected<NcclComm *> C = P->getGroupComm(Group, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  size_t Elem = getElementSize(In.getElementType());
  size_t Chunk = In.getSizeInBytes() / size_t(Parts);
  Expected<void *> Sent = P->scratch(In.getSizeInBytes());
  if (!Sent)
    return P->error(What + ": " + toString(Sent.takeError()));
  Expected<void *> Got = P->scratch(Out.getSizeInBytes());
  if (!Got) {
    P->Streams.release(*Sent);
    return P->error(What + ": " + toString(Got.takeError()));
  }
  auto Finish = [&](Error E) {
    P->Streams.release(*Sent);
    P->Streams.release(*Got);
    return E;
  };
  if (Error E = P->Streams.beforeCompute({In.getData()}, {*Sent}))
    return Finish(std::move(E));
  if (cudaError_t CE =
          Impl::moveChunks(/*Pack=*/true, In.getData(), *Sent, In.getShape(),
                           Elem, SrcDim, Parts, P->Streams.getCompute()))
    return Finish(P->error(What + ": " + cudaGetErrorString(CE)));
  return Finish(P->enqueue(
      Comm, What, Timeout, {*Sent}, {*Got, Out.getData()},
      [&] {
        ncclGroupStart();
        for (int64_t R = 0; R != Parts; ++R) {
          ncclSend(static_cast<char *>(*Sent) + R * Chunk, Chunk, ncclUint8,
                   int(R), Comm.Comm, Comm.Stream);
          ncclRecv(static_cast<char *>(*Got) + R * Chunk, Chunk, ncclUint8,
                   int(R), Comm.Comm, Comm.Stream);
        }
        return ncclGroupEnd();
      },
      [&]() -> Error {
        if (cudaError_t CE = Impl::moveChunks(/*Pack=*/false, *Got,
                                              Out.getData(), Out.getShape(),
                                              Elem, DstDim, Parts, Comm.Stream))
          return P->error(What + ": " + cudaGetErrorString(CE));
        return Error::success();
      }));
}

Error NcclCommunicator::send(const Tensor &In, int DstRank, Duration Timeout) {
  std::string What = Impl::describe("send to rank " + Twine(DstRank));
  if (P->Size == 1 || DstRank == P->Rank || DstRank < 0 || DstRank >= P->Size)
    return P->error(What + ": the job of " + Twine(P->Size) +
                    " ranks has no such peer");
  Expected<NcclComm *> C = P->getPairComm(P->Rank, DstRank, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  return P->enqueue(Comm, What, Timeout, {In.getData()}, {}, [&] {
    return ncclSend(In.getData(), In.getSizeInBytes(), ncclUint8, 1, Comm.Comm,
                    Comm.Stream);
  });
}

Error NcclCommunicator::recv(const Tensor &Out, int SrcRank, Duration Timeout) {
  std::string What = Impl::describe("receive from rank " + Twine(SrcRank));
  if (P->Size == 1 || SrcRank == P->Rank || SrcRank < 0 || SrcRank >= P->Size)
    return P->error(What + ": the job of " + Twine(P->Size) +
                    " ranks has no such peer");
  Expected<NcclComm *> C = P->getPairComm(SrcRank, P->Rank, Timeout);
  if (!C)
    return C.takeError();
  NcclComm &Comm = **C;
  return P->enqueue(Comm, What, Timeout, {}, {Out.getData()}, [&] {
    return ncclRecv(Out.getData(), Out.getSizeInBytes(), ncclUint8, 0,
                    Comm.Comm, Comm.Stream);
  });
}
