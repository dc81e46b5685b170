//===- CudaBackend.cpp - The CUDA backend ---------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/DropoutStream.h"
#include "runtime/ShardPlace.h"
#include "runtime/cpu/CollectiveKernels.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/MpiCommunicator.h"
#include "runtime/cuda/CudaAllocator.h"
#include "runtime/cuda/CudaOps.h"
#include "runtime/cuda/CudaShardedOps.h"
#include "runtime/cuda/CudaStreams.h"
#include "runtime/cuda/NcclCommunicator.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace autopar;
using namespace llvm;

static Error cudaError(cudaError_t E, const Twine &What) {
  return createStringError(inconvertibleErrorCode(),
                           What + ": " + cudaGetErrorString(E));
}

Expected<int> autopar::getCudaDeviceCount() {
  int Count = 0;
  cudaError_t E = cudaGetDeviceCount(&Count);
  if (E != cudaSuccess) {
    cudaGetLastError();
    return createStringError(inconvertibleErrorCode(),
                             Twine("no CUDA device: cudaGetDeviceCount: ") +
                                 cudaGetErrorString(E));
  }
  if (Count == 0)
    return createStringError(inconvertibleErrorCode(),
                             "no CUDA device: cudaGetDeviceCount found none");
  return Count;
}

/// The node-local rank the launcher gives, or 0.
static int getLocalRank() {
  for (const char *Name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char *V = std::getenv(Name)) {
      int R = 0;
      if (!StringRef(V).getAsInteger(10, R) && R >= 0)
        return R;
    }
  return 0;
}

namespace {

/// A node's host-path results, kept on the device with the operand bytes
/// they came from.
struct HostResults {
  /// The node they were computed for: a node of a later program may have
  /// the address of one destroyed since.
  OpId Op = OpId(0);
  AttrDict Attrs;
  std::vector<uint8_t> Key;
  std::vector<void *> Device;
  std::vector<size_t> Sizes;
  std::vector<std::vector<uint8_t>> Bytes;
};

constexpr size_t HostPathLimit = 64 * 1024;
constexpr size_t HostCopyLimit = 4 * 1024;
constexpr size_t StagingBytes = size_t(16) << 20;
/// The copy stream's pinned slots: an upload waits for a slot's previous
/// copy only when all of them are in flight.
constexpr unsigned CopySlots = 4;

/// Pinned host buffers of StagingBytes that copies to the device go
/// through, round-robin, each reused once its last copy (Done) is over.
struct PinnedRing {
  llvm::SmallVector<void *, CopySlots> Buf;
  llvm::SmallVector<std::unique_ptr<CudaEvent>, CopySlots> Done;
  unsigned Next = 0;

  cudaError_t allocate(unsigned Slots) {
    for (unsigned I = 0; I != Slots; ++I) {
      Done.push_back(std::make_unique<CudaEvent>());
      Buf.push_back(nullptr);
      if (cudaError_t E = cudaMallocHost(&Buf.back(), StagingBytes))
        return E;
    }
    return cudaSuccess;
  }
  ~PinnedRing() {
    for (void *B : Buf)
      if (B)
        cudaFreeHost(B);
  }
};

} // namespace

struct CudaBackend::Impl : public CudaContext {
  CudaBackendOptions Options;
  int Device = 0;
  cudaDeviceProp Props{};
  cudaStream_t Compute = nullptr;
  cublasHandle_t Cublas = nullptr;
  void *CublasWorkspace = nullptr;
  CudaAllocator Alloc;
  std::unique_ptr<CudaStreams> Streams;
  std::unique_ptr<NcclCommunicator> Comm;
  /// Pinned host memory for the compute stream's transfers (one slot), and
  /// the copy stream of uploads ahead of use (offloaded parameters) with
  /// its slots. Allocated once the device is chosen (events belong to a
  /// device).
  PinnedRing Staging, CopyRing;
  cudaStream_t Copy = nullptr;
  /// The device word of failed checks, its host mirror, and the messages
  /// of its codes (code I + 1 is Messages[I]).
  int *ErrorWord = nullptr;
  int *HostErrorWord = nullptr;
  std::vector<std::string> Messages;
  StringMap<int> MessageCodes;
  std::string LastNode;
  /// Host copies of small tensors written from the host.
  DenseMap<void *, std::vector<uint8_t>> HostCopies;
  std::unique_ptr<CpuBackend> Host;
  DenseMap<const Node *, HostResults> HostCache;
  Stats S;
  bool Failed = false;
  // The step's random state (Backend::getStepRandom), for dropout masks.
  StepRandom Random;

  ~Impl() override {
    if (Compute)
      cudaStreamSynchronize(Compute);
    if (Copy) {
      cudaStreamSynchronize(Copy);
      cudaStreamDestroy(Copy);
    }
    Comm.reset();
    for (auto &Entry : HostCache)
      for (void *P : Entry.second.Device)
        Alloc.free(P);
    if (Cublas)
      cublasDestroy(Cublas);
    if (CublasWorkspace)
      cudaFree(CublasWorkspace);
    if (HostErrorWord)
      cudaFreeHost(HostErrorWord);
    if (ErrorWord)
      cudaFree(ErrorWord);
    Streams.reset();
    if (Compute)
      cudaStreamDestroy(Compute);
  }

  // CudaContext.
  cudaStream_t getStream() override { return Compute; }
  cublasHandle_t getCublas() override { return Cublas; }
  bool allowTF32() const override { return Options.AllowTF32; }
  Expected<std::vector<uint8_t>> readToHost(const Tensor &T) override {
    auto It = HostCopies.find(T.getData());
    if (It != HostCopies.end() && It->second.size() == T.getSizeInBytes())
      return It->second;
    ++S.HostReads;
    std::vector<uint8_t> Bytes(T.getSizeInBytes());
    if (Error E = copyOut(T, Bytes))
      return E;
    return Bytes;
  }
  Expected<Tensor> allocateScratch(ElementType Elem,
                                   ArrayRef<int64_t> Shape) override {
    return allocate(Elem, Shape);
  }
  void freeScratch(const Tensor &T) override { Streams->release(T.getData()); }
  int *getErrorWord() override { return ErrorWord; }
  Error waitForCommunication(ArrayRef<void *> Buffers) override {
    return Streams->beforeCompute(Buffers, {});
  }
  int getErrorCode(const Node &N, const Twine &Message) override {
    std::string Text = describeNode(N) + ": " + Message.str();
    auto [It, New] = MessageCodes.try_emplace(Text, int(Messages.size()) + 1);
    if (New)
      Messages.push_back(Text);
    return It->second;
  }

  Expected<Tensor> allocate(ElementType Elem, ArrayRef<int64_t> Shape) {
    for (int64_t D : Shape)
      if (D < 0)
        return createStringError(inconvertibleErrorCode(),
                                 "cannot allocate " +
                                     formatTensorType(Elem, Shape) +
                                     ": negative dimension");
    Tensor Probe(Elem, Shape, nullptr);
    Expected<void *> P = Alloc.allocate(Probe.getSizeInBytes());
    if (!P)
      return createStringError(inconvertibleErrorCode(),
                               "cannot allocate " + Probe.getTypeString() +
                                   ": " + toString(P.takeError()));
    return Tensor(Elem, Shape, *P);
  }

  /// The device check word's state: an error naming the failed check.
  Error takeCheckFailure() {
    if (*HostErrorWord == 0)
      return Error::success();
    int Code = *HostErrorWord;
    *HostErrorWord = 0;
    cudaMemsetAsync(ErrorWord, 0, sizeof(int), Compute);
    Failed = true;
    std::string Message = Code >= 1 && size_t(Code) <= Messages.size()
                              ? Messages[Code - 1]
                              : "a device-side check failed";
    return createStringError(inconvertibleErrorCode(), Message);
  }

  /// Waits for the compute stream (after the check word's copy), then
  /// reports a failed check.
  Error waitCompute(StringRef What) {
    if (cudaError_t E = cudaMemcpyAsync(HostErrorWord, ErrorWord, sizeof(int),
                                        cudaMemcpyDeviceToHost, Compute))
      return cudaError(E, What);
    CudaEvent Done;
    if (cudaError_t E = cudaEventRecord(Done.get(), Compute))
      return cudaError(E, What);
    if (Error E = Streams->wait(Done.get(), What)) {
      Failed = true;
      if (!LastNode.empty())
        return createStringError(inconvertibleErrorCode(),
                                 toString(std::move(E)) +
                                     " (the last node queued: " + LastNode +
                                     ")");
      return E;
    }
    return takeCheckFailure();
  }

  /// Device to host through the staging buffer.
  Error copyOut(const Tensor &Src, MutableArrayRef<uint8_t> Bytes) {
    if (Error E = Streams->beforeCompute({Src.getData()}, {}))
      return E;
    const char *From = Src.data<char>();
    for (size_t Done = 0; Done < Bytes.size();) {
      size_t N = std::min(StagingBytes, Bytes.size() - Done);
      if (cudaError_t E = cudaMemcpyAsync(Staging.Buf[0], From + Done, N,
                                          cudaMemcpyDeviceToHost, Compute))
        return cudaError(E, "copying " + Src.getTypeString() + " to the host");
      if (Error E =
              waitCompute("copying " + Src.getTypeString() + " to the host"))
        return E;
      std::memcpy(Bytes.data() + Done, Staging.Buf[0], N);
      Done += N;
    }
    if (Bytes.empty())
      return waitCompute("waiting for the device");
    return Error::success();
  }

  /// Host to device on Stream through Ring's pinned slots (queued; a slot
  /// is reused once its last copy is done).
  Error stageIn(PinnedRing &Ring, cudaStream_t Stream, const Tensor &Dst,
                ArrayRef<uint8_t> Bytes) {
    char *To = Dst.data<char>();
    for (size_t Done = 0; Done < Bytes.size();) {
      size_t N = std::min(StagingBytes, Bytes.size() - Done);
      unsigned Slot = Ring.Next;
      Ring.Next = (Ring.Next + 1) % Ring.Buf.size();
      if (Error E =
              Streams->wait(Ring.Done[Slot]->get(), "copying to the device"))
        return E;
      std::memcpy(Ring.Buf[Slot], Bytes.data() + Done, N);
      if (cudaError_t E = cudaMemcpyAsync(To + Done, Ring.Buf[Slot], N,
                                          cudaMemcpyHostToDevice, Stream))
        return cudaError(E,
                         "copying " + Dst.getTypeString() + " to the device");
      if (cudaError_t E = cudaEventRecord(Ring.Done[Slot]->get(), Stream))
        return cudaError(E, "cudaEventRecord");
      Done += N;
    }
    return Error::success();
  }

  /// Host to device, on the compute stream; Ahead (an upload ahead of use,
  /// Backend::copyFromHostAhead): on the copy stream, after the compute
  /// stream's queued work (Dst may be a block the compute stream freed)
  /// and other side streams' work on Dst, so that the kernels queued
  /// meanwhile run alongside and one that reads Dst waits for the copy
  /// (CudaStreams::beforeCompute).
  Error copyIn(const Tensor &Dst, ArrayRef<uint8_t> Bytes, bool Ahead = false) {
    if (!Ahead) {
      if (Error E = Streams->beforeCompute({}, {Dst.getData()}))
        return E;
      return stageIn(Staging, Compute, Dst, Bytes);
    }
    if (std::optional<std::string> F = Streams->getFault())
      return createStringError(inconvertibleErrorCode(), *F);
    if (Error E = Streams->prepareSide(Copy, {Dst.getData()}))
      return E;
    if (Error E = stageIn(CopyRing, Copy, Dst, Bytes))
      return E;
    return Streams->noteSideWork(Copy, {}, {Dst.getData()}).takeError();
  }

  /// copyFromHost (Ahead: copyFromHostAhead): copyIn of Bytes, whose size
  /// must be Dst's, remembering small ones (noteHostCopy).
  Error copyFromHost(const Tensor &Dst, ArrayRef<uint8_t> Bytes, bool Ahead) {
    if (Bytes.size() != Dst.getSizeInBytes())
      return createStringError(inconvertibleErrorCode(),
                               "cannot copy " + Twine(Bytes.size()) +
                                   " bytes into " + Dst.getTypeString());
    if (Error E = copyIn(Dst, Bytes, Ahead))
      return E;
    noteHostCopy(Dst, Bytes);
    return Error::success();
  }

  void noteHostCopy(const Tensor &T, ArrayRef<uint8_t> Bytes) {
    if (Bytes.size() <= HostCopyLimit)
      HostCopies[T.getData()].assign(Bytes.begin(), Bytes.end());
    else
      HostCopies.erase(T.getData());
  }

  /// Ops that read their operands' shapes only.
  static bool readsNoData(OpId Op) {
    return Op == OpId::Shape || Op == OpId::Size;
  }

  /// Whether N runs on the host path.
  static bool isHostPathNode(const Node &N, ArrayRef<Tensor> In,
                             ArrayRef<Tensor> Out) {
    OpId Op = N.getOp();
    if (readsNoData(Op) || Op == OpId::Constant || Op == OpId::ConstantOfShape)
      return true;
    if (isCommunicationOp(Op) || !CpuBackend::hasKernel(Op) ||
        N.getAttr("mesh_axis"))
      return false;
    for (const Tensor &T : In)
      if (T.isPresent() && (isFloatElementType(T.getElementType()) ||
                            T.getSizeInBytes() > HostPathLimit))
        return false;
    for (const Tensor &T : Out)
      if (T.isPresent() && T.getSizeInBytes() > HostPathLimit)
        return false;
    return true;
  }

  Error runHostPath(const Node &N, ArrayRef<Tensor> In, ArrayRef<Tensor> Out) {
    ++S.HostPathNodes;
    OpId Op = N.getOp();
    // The operands' bytes (Shape and Size read no data).
    std::vector<std::vector<uint8_t>> Operands(In.size());
    std::vector<uint8_t> Key;
    static uint8_t NoData[8];
    for (size_t I = 0; I != In.size(); ++I) {
      if (!In[I].isPresent() || readsNoData(Op))
        continue;
      Expected<std::vector<uint8_t>> Bytes = readToHost(In[I]);
      if (!Bytes)
        return createNodeError(N, toString(Bytes.takeError()));
      Operands[I] = std::move(*Bytes);
      Key.insert(Key.end(), Operands[I].begin(), Operands[I].end());
      Key.push_back(uint8_t(I)); // Separates operands of different sizes.
    }
    HostResults &R = HostCache[&N];
    bool Hit = !R.Device.empty() && R.Op == Op && R.Key == Key &&
               R.Sizes.size() == Out.size() && R.Attrs == N.getAttrs();
    for (size_t I = 0; Hit && I != Out.size(); ++I)
      Hit = !Out[I].isPresent() || R.Sizes[I] == Out[I].getSizeInBytes();
    if (!Hit) {
      if (!Host)
        Host = std::make_unique<CpuBackend>();
      SmallVector<Tensor, 4> HostIn, HostOut;
      std::vector<std::vector<uint8_t>> Results(Out.size());
      for (size_t I = 0; I != In.size(); ++I) {
        if (!In[I].isPresent())
          HostIn.push_back(Tensor());
        else
          HostIn.push_back(
              Tensor(In[I].getElementType(), In[I].getShape(),
                     readsNoData(Op) ? NoData : Operands[I].data()));
      }
      for (size_t I = 0; I != Out.size(); ++I) {
        if (!Out[I].isPresent()) {
          HostOut.push_back(Tensor());
          continue;
        }
        // Never a null pointer, even for an empty result.
        Results[I].resize(std::max<size_t>(Out[I].getSizeInBytes(), 1));
        HostOut.push_back(Tensor(Out[I].getElementType(), Out[I].getShape(),
                                 Results[I].data()));
      }
      if (Error E = Host->runNode(N, HostIn, HostOut))
        return E;
      for (void *P : R.Device)
        Alloc.free(P);
      R = HostResults();
      R.Op = Op;
      R.Attrs = N.getAttrs();
      R.Key = std::move(Key);
      for (size_t I = 0; I != Out.size(); ++I) {
        size_t Size = Out[I].isPresent() ? Out[I].getSizeInBytes() : 0;
        Results[I].resize(Size);
        Expected<void *> P = Alloc.allocate(Size);
        if (!P)
          return createNodeError(N, toString(P.takeError()));
        R.Device.push_back(*P);
        R.Sizes.push_back(Size);
        if (Error E = copyIn(Tensor(ElementType::U8, {int64_t(Size)}, *P),
                             Results[I]))
          return createNodeError(N, toString(std::move(E)));
        R.Bytes.push_back(std::move(Results[I]));
      }
    } else {
      ++S.HostPathCached;
    }
    for (size_t I = 0; I != Out.size(); ++I) {
      if (!Out[I].isPresent())
        continue;
      if (Error E = Streams->beforeCompute({}, {Out[I].getData()}))
        return createNodeError(N, toString(std::move(E)));
      if (R.Sizes[I])
        if (cudaError_t E =
                cudaMemcpyAsync(Out[I].getData(), R.Device[I], R.Sizes[I],
                                cudaMemcpyDeviceToDevice, Compute))
          return createNodeError(N, Twine("cudaMemcpyAsync: ") +
                                        cudaGetErrorString(E));
      noteHostCopy(Out[I], R.Bytes[I]);
    }
    return Error::success();
  }

  /// Orders the compute stream after the side work on N's buffers, before
  /// N's kernels.
  Error beforeDeviceNode(const Node &N, ArrayRef<Tensor> In,
                         ArrayRef<Tensor> Out) {
    ++S.DeviceNodes;
    SmallVector<void *, 6> Reads, Writes;
    for (const Tensor &T : In)
      if (T.isPresent())
        Reads.push_back(T.getData());
    for (const Tensor &T : Out)
      if (T.isPresent()) {
        Writes.push_back(T.getData());
        HostCopies.erase(T.getData());
      }
    if (Error E = Streams->beforeCompute(Reads, Writes))
      return createNodeError(N, toString(std::move(E)));
    LastNode = describeNode(N);
    return Error::success();
  }

  Error runOnDevice(const Node &N, ArrayRef<Tensor> In, ArrayRef<Tensor> Out) {
    if (Error E = beforeDeviceNode(N, In, Out))
      return E;
    // A node that draws a dropout mask gets its block of the random tensor.
    if (drawsDropoutMask(N)) {
      Expected<DropoutBlock> B =
          getDropoutBlock(KernelArgs{N, In, Out}, *Comm, Random);
      if (!B)
        return B.takeError();
      return runCudaKernel(KernelArgs{N, In, Out, &*B}, *this);
    }
    return runCudaKernel(KernelArgs{N, In, Out}, *this);
  }

  Error runNode(const Node &N, ArrayRef<Tensor> In, ArrayRef<Tensor> Out) {
    if (std::optional<std::string> F = Streams->getFault())
      return createNodeError(N, *F);
    OpId Op = N.getOp();
    if (Op == OpId::SendRecv) {
      // A whole-model program's stage crossing: a copy on one rank.
      if (Comm->getNumRanks() != 1)
        return createNodeError(N, "moves a value between the stages of a "
                                  "whole-model program; per-rank programs "
                                  "use Send and Recv");
      if (In.empty() || !In[0].isPresent() || Out.empty() ||
          In[0].getShape() != Out[0].getShape() ||
          In[0].getElementType() != Out[0].getElementType())
        return createNodeError(N, "needs an operand and a result of its type");
      HostCopies.erase(Out[0].getData());
      if (Error E =
              Streams->beforeCompute({In[0].getData()}, {Out[0].getData()}))
        return createNodeError(N, toString(std::move(E)));
      if (In[0].getData() != Out[0].getData() && In[0].getSizeInBytes())
        if (cudaError_t E = cudaMemcpyAsync(Out[0].getData(), In[0].getData(),
                                            In[0].getSizeInBytes(),
                                            cudaMemcpyDeviceToDevice, Compute))
          return createNodeError(N, Twine("cudaMemcpyAsync: ") +
                                        cudaGetErrorString(E));
      return Error::success();
    }
    if (isCommunicationOp(Op)) {
      for (const Tensor &T : Out)
        if (T.isPresent())
          HostCopies.erase(T.getData());
      LastNode = describeNode(N);
      return runCommunication(KernelArgs{N, In, Out}, *Comm,
                              Options.CommTimeout);
    }
    if (isShardedKernel(N)) {
      // Kernels with collectives between them (CudaShardedOps.cpp).
      if (Error E = beforeDeviceNode(N, In, Out))
        return E;
      return cuda::runShardedOp(KernelArgs{N, In, Out}, *this, *Comm,
                                Options.CommTimeout);
    }
    if (isHostPathNode(N, In, Out))
      return runHostPath(N, In, Out);
    if (!hasCudaKernel(Op))
      return createNodeError(N, "no CUDA kernel");
    return runOnDevice(N, In, Out);
  }
};

CudaBackend::CudaBackend(std::unique_ptr<Impl> P) : P(std::move(P)) {}

CudaBackend::~CudaBackend() {
  bool Failed = P->Failed;
  P.reset();
  if (Failed)
    MpiCommunicator::noteFailure();
  MpiCommunicator::abortIfFailed();
}

Expected<std::unique_ptr<CudaBackend>>
CudaBackend::create(const CudaBackendOptions &Options) {
  Expected<int> Count = getCudaDeviceCount();
  if (!Count)
    return Count.takeError();
  auto P = std::make_unique<Impl>();
  P->Options = Options;
  P->Device = Options.Device >= 0 ? Options.Device : getLocalRank() % *Count;
  if (P->Device >= *Count)
    return createStringError(inconvertibleErrorCode(),
                             "CUDA device " + Twine(P->Device) +
                                 " does not exist (there are " + Twine(*Count) +
                                 ")");
  if (cudaError_t E = cudaSetDevice(P->Device))
    return cudaError(E, "cudaSetDevice");
  if (cudaError_t E = cudaGetDeviceProperties(&P->Props, P->Device))
    return cudaError(E, "cudaGetDeviceProperties");
  if (cudaError_t E =
          cudaStreamCreateWithFlags(&P->Compute, cudaStreamNonBlocking))
    return cudaError(E, "cudaStreamCreate");
  if (cudaError_t E =
          cudaStreamCreateWithFlags(&P->Copy, cudaStreamNonBlocking))
    return cudaError(E, "cudaStreamCreate");
  if (cudaError_t E = P->Staging.allocate(1))
    return cudaError(E, "allocating pinned host memory");
  if (cudaError_t E = P->CopyRing.allocate(CopySlots))
    return cudaError(E, "allocating pinned host memory");
  if (cublasStatus_t S = cublasCreate(&P->Cublas))
    return createStringError(inconvertibleErrorCode(),
                             Twine("cublasCreate: ") +
                                 cublasGetStatusString(S));
  // cuBLAS's guidance for Hopper: a 32 MiB workspace ("cuBLAS Library
  // User Guide", cublasSetWorkspace).
  constexpr size_t Workspace = size_t(32) << 20;
  if (cudaError_t E = cudaMalloc(&P->CublasWorkspace, Workspace))
    return cudaError(E, "allocating the cuBLAS workspace");
  cublasSetWorkspace(P->Cublas, P->CublasWorkspace, Workspace);
  cublasSetStream(P->Cublas, P->Compute);
  if (cudaError_t E = cudaMallocHost(
          reinterpret_cast<void **>(&P->HostErrorWord), sizeof(int)))
    return cudaError(E, "allocating pinned host memory");
  *P->HostErrorWord = 0;
  if (cudaError_t E =
          cudaMalloc(reinterpret_cast<void **>(&P->ErrorWord), sizeof(int)))
    return cudaError(E, "cudaMalloc");
  cudaMemsetAsync(P->ErrorWord, 0, sizeof(int), P->Compute);
  P->Streams = std::make_unique<CudaStreams>(P->Compute, P->Alloc);
  P->Comm =
      std::make_unique<NcclCommunicator>(*P->Streams, Options.CommTimeout);
  if (Error E = P->waitCompute("initialising the device"))
    return E;
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(P)));
}

Expected<Tensor> CudaBackend::allocate(ElementType Elem,
                                       ArrayRef<int64_t> Shape) {
  return P->allocate(Elem, Shape);
}

void CudaBackend::deallocate(const Tensor &T) {
  if (!T.isPresent())
    return;
  P->HostCopies.erase(T.getData());
  P->Streams->release(T.getData());
}

Error CudaBackend::copyFromHost(const Tensor &Dst, ArrayRef<uint8_t> Bytes) {
  return P->copyFromHost(Dst, Bytes, /*Ahead=*/false);
}

Error CudaBackend::copyFromHostAhead(const Tensor &Dst,
                                     ArrayRef<uint8_t> Bytes) {
  return P->copyFromHost(Dst, Bytes, /*Ahead=*/true);
}

Error CudaBackend::copyToHost(const Tensor &Src,
                              MutableArrayRef<uint8_t> Bytes) {
  if (Bytes.size() != Src.getSizeInBytes())
    return createStringError(inconvertibleErrorCode(),
                             "cannot copy " + Src.getTypeString() + " into " +
                                 Twine(Bytes.size()) + " bytes");
  return P->copyOut(Src, Bytes);
}

Error CudaBackend::runNode(const Node &N, ArrayRef<Tensor> Inputs,
                           ArrayRef<Tensor> Outputs) {
  P->Random = getStepRandom();
  Error E = P->runNode(N, Inputs, Outputs);
  if (E) {
    P->Failed = true;
    MpiCommunicator::noteFailure();
  }
  return E;
}

Communicator &CudaBackend::getCommunicator() { return *P->Comm; }

Communicator::Duration CudaBackend::getCommTimeout() const {
  return P->Options.CommTimeout;
}

Error CudaBackend::synchronize() {
  if (Error E = P->Streams->synchronize())
    return E;
  return P->waitCompute("waiting for the device");
}

std::string CudaBackend::describeDevice() const {
  int Runtime = 0;
  cudaRuntimeGetVersion(&Runtime);
  return std::string(P->Props.name) + " (sm_" + std::to_string(P->Props.major) +
         std::to_string(P->Props.minor) + ", " +
         std::to_string(P->Props.totalGlobalMem >> 30) +
         " GiB), CUDA runtime " + std::to_string(Runtime / 1000) + "." +
         std::to_string(Runtime % 1000 / 10) + ", " +
         NcclCommunicator::getVersionString();
}

CudaBackend::Stats CudaBackend::getStats() const {
  Stats S = P->S;
  S.PeakBytesInUse = P->Alloc.getStats().PeakInUse;
  S.PeakBytesReserved = P->Alloc.getStats().PeakReserved;
  return S;
}
