//===- Executor.cpp - Runs a program on a backend -------------------------===//

#include "runtime/Executor.h"
#include "runtime/ParamInit.h"

#include "ir/Graph.h"
#include "runtime/KernelArgs.h"
#include "runtime/KernelFamily.h"
#include "runtime/ShardPlace.h"
#include "weights/WeightReader.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

static Error valueError(const Value &V, const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           ("value '%" + V.getName() + "': " + Message).str());
}

/// The parameter whose buffer result V is written into (an optimizer step's
/// result), else null.
static const Value *getUpdatedParam(const Value &V) {
  const Node *N = V.getDefiningNode();
  if (!N)
    return nullptr;
  std::optional<unsigned> Op =
      getUpdatedOperand(N->getOp(), V.getResultIndex());
  return Op ? N->getOperand(*Op) : nullptr;
}

/// Optimizer steps update parameters in place: the operand they replace must
/// be a parameter that no later node reads.
static Error checkInPlaceUpdates(ArrayRef<const Node *> Nodes) {
  DenseMap<const Value *, const Node *> Updated;
  for (const Node *N : Nodes) {
    for (Value *V : N->getOperands())
      if (const Node *By = Updated.lookup(V))
        if (By != N)
          return createStringError(
              inconvertibleErrorCode(),
              "node '" + N->getName() + "' (" + N->getOpName() + ") reads %" +
                  V->getName() + " after the " + By->getOpName() +
                  " step that overwrites it");
    for (unsigned R = 0; R != N->getNumResults(); ++R)
      if (std::optional<unsigned> Op = getUpdatedOperand(N->getOp(), R)) {
        Value *P = N->getOperand(*Op);
        if (!P->isParam())
          return createStringError(inconvertibleErrorCode(),
                                   "node '" + N->getName() + "' (" +
                                       N->getOpName() +
                                       ") must update a "
                                       "parameter, not %" +
                                       P->getName());
        Updated[P] = N;
      }
  }
  return Error::success();
}

/// An error unless V's shape is static and its size fits in memory sizes.
static Error checkStatic(const Value &V) {
  const TensorType &Ty = V.getType();
  if (!Ty.hasStaticShape())
    return valueError(V, "type " + Ty.str() +
                             " is not static; the runtime needs static shapes "
                             "(bind the symbols with --dim when importing)");
  if (!Ty.getStaticSizeInBytes())
    return valueError(V, "type " + Ty.str() + " is too large");
  return Error::success();
}

Error Executor::checkStaticShapes(const Graph &G) {
  for (const std::unique_ptr<Value> &V : G.getInputs())
    if (Error E = checkStatic(*V))
      return E;
  for (const std::unique_ptr<Value> &V : G.getParams())
    if (Error E = checkStatic(*V))
      return E;
  for (const Node &N : G.getNodes())
    for (unsigned I = 0; I != N.getNumResults(); ++I)
      if (Error E = checkStatic(*N.getResult(I)))
        return E;
  return Error::success();
}

Expected<std::unique_ptr<Executor>>
Executor::create(const Graph &G, Backend &B, const ExecutorOptions &Options) {
  if (Error E = checkStaticShapes(G))
    return E;
  std::unique_ptr<Executor> X(new Executor(G, B));
  X->Offload = Options.Offload;
  for (const Node &N : G.getNodes())
    X->Nodes.push_back(&N);
  if (Error E = checkInPlaceUpdates(X->Nodes))
    return E;
  X->planGatherHomes();
  if (Error E = X->loadParams(Options))
    return E;
  if (Error E = X->readOffloadLists())
    return E;
  X->planFrees();
  X->findGradients();
  X->findGatheredParams();
  return X;
}

ExecutorOptions ExecutorOptions::forProgram(StringRef ProgramFile,
                                            StringRef WeightsDir,
                                            uint64_t InitSeed) {
  ExecutorOptions O;
  O.WeightsDir = WeightsDir.str();
  if (O.WeightsDir.empty()) {
    StringRef Parent = sys::path::parent_path(ProgramFile);
    O.WeightsDir = Parent.empty() ? "." : Parent.str();
  }
  O.InitSeed = InitSeed;
  return O;
}

Executor::~Executor() {
  Prefetcher.reset();
  for (auto &Entry : Params)
    if (!Homes.count(Entry.first))
      B.deallocate(Entry.second);
  for (auto &Entry : Homes)
    if (Entry.second.Whole.isPresent())
      B.deallocate(Entry.second.Whole);
}

void Executor::planGatherHomes() {
  HomeAt.assign(Nodes.size(), nullptr);
  DenseMap<const Value *, unsigned> Gathers;
  for (const Node *N : Nodes)
    if (N->getOp() == OpId::AllGather && N->getNumOperands() &&
        N->getOperand(0) && N->getOperand(0)->isParam())
      ++Gathers[N->getOperand(0)];
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node *N = Nodes[I];
    if (N->getOp() != OpId::AllGather || N->getNumResults() != 1 ||
        !N->getNumOperands())
      continue;
    const Value *P = N->getOperand(0), *Y = N->getResult(0);
    // Gathered once (ZeRO-3 gathers per use and frees the copy), along
    // dimension 0, so that the shard is one contiguous block.
    KernelArgs A{*N, {}, {}};
    if (!P || !P->isParam() || Gathers.lookup(P) != 1 || !Y ||
        A.intAttr("dim", -1) != 0 ||
        P->getType().getElementType() != Y->getType().getElementType() ||
        P->getType().getRank() != Y->getType().getRank() ||
        P->getType().getRank() == 0)
      continue;
    // An offloaded parameter lives in its store.
    if (getStoredTier(*P))
      continue;
    Expected<ShardPlace> Place = getCollectivePlace(A, B.getCommunicator());
    if (!Place) {
      // The gather reports it when it runs.
      consumeError(Place.takeError());
      continue;
    }
    SmallVector<int64_t, 4> Whole = P->getType().getStaticSizes();
    Whole[0] *= int64_t(Place->Ranks.size());
    if (ArrayRef<int64_t>(Whole) !=
        ArrayRef<int64_t>(Y->getType().getStaticSizes()))
      continue;
    Homes[P] = GatherHome{Y, Place->Index, Tensor()};
    HomeOfResult[Y] = P;
    HomeAt[I] = P;
  }
}

std::optional<OffloadTier> Executor::getStoredTier(const Value &P) const {
  if (!Offload)
    return std::nullopt;
  const Attribute *A = P.getAttrs().get("placement");
  if (!A || !A->isa(Attribute::Kind::String))
    return std::nullopt;
  return parseOffloadTier(A->getString());
}

Error Executor::loadParams(const ExecutorOptions &Options) {
  ParamSource Source;
  Source.WeightsDir = Options.WeightsDir;
  Source.Seed = Options.InitSeed;
  Source.RandomInit = Options.RandomInit;
  Source.RequireData = Options.RequireData;
  Source.Rank = B.getCommunicator().getRank();
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    Expected<std::vector<uint8_t>> Bytes = loadParamBytes(*P, Source);
    if (!Bytes)
      return Bytes.takeError();
    if (std::optional<OffloadTier> Tier = getStoredTier(*P)) {
      OffloadTiers[P.get()] = *Tier;
      Versions[P.get()] = 0;
      if (Error E = Offload->put(P->getName(), *Tier, *Bytes, 0))
        return E;
      continue;
    }
    const TensorType &Ty = P->getType();
    auto Home = Homes.find(P.get());
    const TensorType &HeldTy =
        Home != Homes.end() ? Home->second.Result->getType() : Ty;
    Expected<Tensor> T =
        B.allocate(HeldTy.getElementType(), HeldTy.getStaticSizes());
    if (!T)
      return valueError(*P, toString(T.takeError()));
    if (Home != Homes.end()) {
      // The parameter is its block of the home.
      Home->second.Whole = *T;
      *T = Tensor(Ty.getElementType(), Ty.getStaticSizes(),
                  static_cast<char *>(T->getData()) +
                      Home->second.Index * *Ty.getStaticSizeInBytes());
    }
    Params[P.get()] = *T;
    if (Error E = B.copyFromHost(*T, *Bytes))
      return valueError(*P, toString(std::move(E)));
  }
  return Error::success();
}

uint64_t Executor::getParamBytes() const {
  uint64_t Bytes = 0;
  for (const auto &Entry : Params) {
    auto Home = Homes.find(Entry.first);
    Bytes += Home != Homes.end() ? Home->second.Whole.getSizeInBytes()
                                 : Entry.second.getSizeInBytes();
  }
  return Bytes;
}

Error Executor::readOffloadLists() {
  FetchAt.assign(Nodes.size(), {});
  WritebackAt.assign(Nodes.size(), {});
  PrefetchAt.assign(Nodes.size(), {});
  EvictAt.assign(Nodes.size(), {});
  UploadAt.assign(Nodes.size(), {});
  if (!Offload)
    return Error::success();
  auto NodeError = [](const Node &N, const Twine &Message) {
    std::string Name = N.getName().str();
    if (Name.empty() && N.getNumResults())
      Name = "%" + N.getResult(0)->getName().str();
    return createStringError(inconvertibleErrorCode(), "node '" + Name + "' (" +
                                                           N.getOpName() +
                                                           "): " + Message);
  };
  StringMap<const Value *> ByName;
  for (auto &Entry : OffloadTiers)
    ByName[Entry.first->getName()] = Entry.first;
  // Offloaded gradients: results of their node, written to its tier.
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    const Attribute *A = N.getAttrs().get("offload_evict");
    if (!A)
      continue;
    const Attribute *T = N.getAttrs().get("offload_tier");
    std::optional<OffloadTier> Tier = T && T->isa(Attribute::Kind::String)
                                          ? parseOffloadTier(T->getString())
                                          : std::nullopt;
    if (!Tier)
      return NodeError(N, "offload_evict needs offload_tier \"host\" or "
                          "\"nvme\"");
    for (const Attribute &Item : A->getList()) {
      const Value *V = nullptr;
      for (unsigned R = 0; R != N.getNumResults(); ++R)
        if (Item.isa(Attribute::Kind::String) &&
            N.getResult(R)->getName() == Item.getString())
          V = N.getResult(R);
      if (!V)
        return NodeError(N, "offload_evict names no result of the node");
      EvictedTiers[V] = *Tier;
      EvictAt[I].push_back(V);
      ByName[V->getName()] = V;
    }
  }
  if (ByName.empty())
    return Error::success();
  Prefetcher = std::make_unique<OffloadPrefetcher>(*Offload);
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    for (auto [Name, List] :
         {std::pair<StringRef, std::vector<const Value *> *>{"offload_fetch",
                                                             &FetchAt[I]},
          {"offload_writeback", &WritebackAt[I]},
          {"offload_prefetch", &PrefetchAt[I]}}) {
      const Attribute *A = N.getAttrs().get(Name);
      if (!A)
        continue;
      for (const Attribute &Item : A->getList()) {
        const Value *P = Item.isa(Attribute::Kind::String)
                             ? ByName.lookup(Item.getString())
                             : nullptr;
        if (!P)
          return NodeError(N, Name + " names " +
                                  (Item.isa(Attribute::Kind::String)
                                       ? "'" + Item.getString() + "'"
                                       : std::string("a non-string")) +
                                  ", which is no offloaded tensor");
        List->push_back(P);
      }
    }
    for (const Value *V : N.getOperands())
      if (V && (OffloadTiers.count(V) || EvictedTiers.count(V)) &&
          !is_contained(FetchAt[I], V))
        return NodeError(N, "reads the offloaded tensor %" + V->getName() +
                                " without fetching it (offload_fetch); run "
                                "the `offload` pass");
    for (const Value *V : FetchAt[I])
      if (EvictedTiers.count(V))
        LastFetch[V] = I;
    for (const Value *P : WritebackAt[I])
      if (!is_contained(FetchAt[I], P))
        return NodeError(N, "writes back %" + P->getName() +
                                ", which it does not fetch");
  }
  // The parameters each node prefetches, with the node of the use each is
  // for: the next one that fetches it.
  DenseMap<const Value *, unsigned> NextFetch;
  for (unsigned I = Nodes.size(); I-- != 0;) {
    for (const Value *P : PrefetchAt[I])
      if (OffloadTiers.count(P))
        if (auto It = NextFetch.find(P); It != NextFetch.end())
          UploadAt[I].push_back({P, It->second});
    for (const Value *P : FetchAt[I])
      NextFetch[P] = I;
  }
  return Error::success();
}

Expected<std::vector<uint8_t>> Executor::fetchBytes(const Value &P) {
  return Prefetcher->take(P.getName(), Versions.lookup(&P));
}

Error Executor::setOffloadVersion(uint64_t V) {
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    auto It = OffloadTiers.find(P.get());
    if (It == OffloadTiers.end())
      continue;
    Expected<std::vector<uint8_t>> Bytes =
        Offload->get(P->getName(), Versions.lookup(P.get()));
    if (!Bytes)
      return Bytes.takeError();
    if (Error E = Offload->put(P->getName(), It->second, *Bytes, V))
      return E;
    Versions[P.get()] = V;
  }
  OffloadVersion = V;
  return Error::success();
}

Expected<HostTensor> Executor::readStored(const Value &V) const {
  Expected<std::vector<uint8_t>> Bytes =
      Offload->get(V.getName(), Versions.lookup(&V));
  if (!Bytes)
    return Bytes.takeError();
  HostTensor H;
  H.Elem = V.getType().getElementType();
  H.Shape = V.getType().getStaticSizes();
  H.Bytes = std::move(*Bytes);
  return H;
}

Error Executor::storeBlock(const Value &V, const Tensor &T, OffloadTier Tier) {
  std::vector<uint8_t> Bytes(T.getSizeInBytes());
  if (Error E = B.copyToHost(T, Bytes))
    return valueError(V, toString(std::move(E)));
  if (Error E = Offload->put(V.getName(), Tier, Bytes, OffloadVersion + 1))
    return E;
  Versions[&V] = OffloadVersion + 1;
  return Error::success();
}

Expected<HostTensor> Executor::readParam(const Value &P) const {
  if (OffloadTiers.count(&P))
    return readStored(P);
  auto It = Params.find(&P);
  if (It == Params.end())
    return valueError(P, "is not a parameter of the graph");
  const Tensor &T = It->second;
  HostTensor H;
  H.Elem = T.getElementType();
  H.Shape.assign(T.getShape().begin(), T.getShape().end());
  H.Bytes.resize(T.getSizeInBytes());
  if (Error E = B.copyToHost(T, H.Bytes))
    return valueError(P, toString(std::move(E)));
  return H;
}

Error Executor::writeParam(const Value &P, ArrayRef<uint8_t> Bytes) {
  auto Tier = OffloadTiers.find(&P);
  if (Tier != OffloadTiers.end()) {
    uint64_t Size = *P.getType().getStaticSizeInBytes();
    if (Bytes.size() != Size)
      return valueError(P, Twine(Bytes.size()) + " bytes given for " +
                               P.getType().str() + " (" + Twine(Size) +
                               " bytes)");
    return Offload->put(P.getName(), Tier->second, Bytes, Versions.lookup(&P));
  }
  auto It = Params.find(&P);
  if (It == Params.end())
    return valueError(P, "is not a parameter of the graph");
  const Tensor &T = It->second;
  if (Bytes.size() != T.getSizeInBytes())
    return valueError(P, Twine(Bytes.size()) + " bytes given for " +
                             T.getTypeString() + " (" +
                             Twine(T.getSizeInBytes()) + " bytes)");
  if (Error E = B.copyFromHost(T, Bytes))
    return valueError(P, toString(std::move(E)));
  return Error::success();
}

void Executor::findGradients() {
  for (const Node *N : Nodes)
    for (const Value *V : getStepGradientTerms(*N)) {
      Gradients.insert(V);
      // A view holds no bytes: the tensor it views holds the gradient.
      if (const Value *Root = ViewRoots.lookup(V))
        Gradients.insert(Root);
    }
}

void Executor::findGatheredParams() {
  for (const Node *N : Nodes) {
    if (N->getOp() != OpId::AllGather || !N->getOperand(0))
      continue;
    const Value *From = N->getOperand(0);
    if (const Node *D = From->getDefiningNode())
      if (D->getOp() == OpId::Cast && D->getOperand(0))
        From = D->getOperand(0);
    // A home is counted with the parameters.
    if (From->isParam() && !HomeOfResult.count(N->getResult(0)))
      Gathered.insert(N->getResult(0));
  }
}

void Executor::planViews() {
  ViewOf.assign(Nodes.size(), nullptr);
  ViewRoots.clear();
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    if (getKernelFamily(N.getOp()) != KernelFamily::ReshapeLike ||
        N.getNumResults() != 1 || N.getNumOperands() < 1)
      continue;
    const Value *X = N.getOperand(0), *Y = N.getResult(0);
    // Parameters are updated in place and offloaded gradients leave the
    // device: a view of either could see other bytes.
    if (!X || !Y || X->isParam() || getUpdatedParam(*X) ||
        getUpdatedParam(*Y) || EvictedTiers.count(X) || EvictedTiers.count(Y) ||
        X->getType().getElementType() != Y->getType().getElementType() ||
        !X->getType().getStaticNumElements() ||
        X->getType().getStaticNumElements() !=
            Y->getType().getStaticNumElements())
      continue;
    // A shape computed at run time is the kernel's to check.
    if (any_of(N.getOperands().drop_front(), [](const Value *O) {
          return O && (!O->getDefiningNode() ||
                       O->getDefiningNode()->getOp() != OpId::Constant);
        }))
      continue;
    const Value *Root = ViewRoots.lookup(X);
    ViewOf[I] = Root ? Root : X;
    ViewRoots[Y] = ViewOf[I];
  }
}

void Executor::setReadOutputs(ArrayRef<unsigned> Positions) {
  OutputRead.assign(G.getOutputs().size(), false);
  for (unsigned P : Positions)
    if (P < OutputRead.size())
      OutputRead[P] = true;
  planFrees();
}

void Executor::planFrees() {
  planViews();
  UnusedInputs.clear();
  // The outputs run reads back live to the end of the run.
  DenseSet<const Value *> Outputs;
  for (unsigned P = 0; P != G.getOutputs().size(); ++P)
    if (isReadOutput(P))
      Outputs.insert(G.getOutputs()[P]);
  DenseMap<const Value *, unsigned> LastUse;
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    for (Value *V : Nodes[I]->getOperands())
      if (V && !V->isParam() && !getUpdatedParam(*V))
        LastUse[V] = I;
    // A result that no node uses dies with its node.
    for (unsigned R = 0; R != Nodes[I]->getNumResults(); ++R)
      if (!getUpdatedParam(*Nodes[I]->getResult(R)))
        LastUse.try_emplace(Nodes[I]->getResult(R), I);
  }
  // A tensor and its views live until the last use of any of them; none
  // is freed when one of them is an output.
  DenseMap<const Value *, unsigned> GroupEnd;
  DenseSet<const Value *> KeptGroups;
  for (auto &[View, Root] : ViewRoots) {
    unsigned &End =
        GroupEnd.try_emplace(Root, LastUse.lookup(Root)).first->second;
    End = std::max(End, LastUse.lookup(View));
    if (Outputs.count(View) || Outputs.count(Root))
      KeptGroups.insert(Root);
  }
  auto FreeAt = [&](const Value *V) -> std::optional<unsigned> {
    const Value *Root = ViewRoots.lookup(V);
    if (!Root && GroupEnd.count(V))
      Root = V;
    // A gathered parameter's home outlives the run.
    if (HomeOfResult.count(Root ? Root : V))
      return std::nullopt;
    if (!Root)
      return Outputs.count(V) ? std::nullopt
                              : std::optional<unsigned>(LastUse.lookup(V));
    if (KeptGroups.count(Root))
      return std::nullopt;
    return GroupEnd.lookup(Root);
  };
  FreeAfter.assign(Nodes.size(), {});
  // Visit values in a fixed order (inputs, then results by node) so that
  // frees happen in the same order every run.
  for (const std::unique_ptr<Value> &V : G.getInputs()) {
    if (Outputs.count(V.get()))
      continue;
    if (!LastUse.count(V.get()))
      UnusedInputs.push_back(V.get());
    else if (std::optional<unsigned> At = FreeAt(V.get()))
      FreeAfter[*At].push_back(V.get());
  }
  for (const Node *N : Nodes)
    for (unsigned R = 0; R != N->getNumResults(); ++R) {
      const Value *V = N->getResult(R);
      // Offloaded gradients are freed when written to their tier.
      if (getUpdatedParam(*V) || EvictedTiers.count(V))
        continue;
      if (std::optional<unsigned> At = FreeAt(V))
        FreeAfter[*At].push_back(V);
    }
  planInPlaceAdds();
  // Groups depend on which Adds run in place.
  planStepGroups();
}

void Executor::planStepGroups() {
  GroupEnd.assign(Nodes.size(), 0);
  // A node that moves offloaded state, or whose results are not all
  // updates in place of its operands, runs alone.
  auto Plain = [&](unsigned I) {
    return FetchAt[I].empty() && WritebackAt[I].empty() &&
           PrefetchAt[I].empty() && EvictAt[I].empty() && UploadAt[I].empty() &&
           !HomeAt[I] && !ViewOf[I];
  };
  auto Groupable = [&](unsigned I) {
    const Node &N = *Nodes[I];
    if (N.getOp() != OpId::AdamW || !Plain(I) || InPlaceOperand[I])
      return false;
    for (unsigned R = 0; R != N.getNumResults(); ++R)
      if (!getUpdatedOperand(N.getOp(), R))
        return false;
    return true;
  };
  // The hyper-parameters and step: AdamW's operands from 4 on.
  auto SameScalars = [&](unsigned A, unsigned B) {
    return Nodes[A]->getOperands().drop_front(4) ==
           Nodes[B]->getOperands().drop_front(4);
  };
  // A Linear and the Gelu or Add right after it that reads its result (a
  // fusable epilogue), each computing a new value.
  auto Epilogue = [&](unsigned I) {
    if (I + 1 >= Nodes.size() || !Plain(I) || !Plain(I + 1) ||
        InPlaceOperand[I])
      return false;
    const Node &L = *Nodes[I], &E = *Nodes[I + 1];
    if (L.getOp() != OpId::Linear || L.getNumResults() != 1 ||
        getUpdatedParam(*L.getResult(0)) ||
        (E.getOp() != OpId::Gelu && E.getOp() != OpId::Add) ||
        E.getNumResults() != 1 || getUpdatedParam(*E.getResult(0)))
      return false;
    return is_contained(E.getOperands(), L.getResult(0));
  };
  for (unsigned I = 0; I != Nodes.size();) {
    unsigned J = I + 1;
    if (Epilogue(I))
      J = I + 2;
    else if (Groupable(I))
      while (J != Nodes.size() && Groupable(J) && SameScalars(I, J))
        ++J;
    GroupEnd[I] = J;
    I = J;
  }
}

unsigned Executor::getStepGroupCount() const {
  unsigned Count = 0;
  for (unsigned I = 0; I != GroupEnd.size(); ++I)
    Count += GroupEnd[I] > I + 1;
  return Count;
}

void Executor::planInPlaceAdds() {
  InPlaceOperand.assign(Nodes.size(), nullptr);
  DenseSet<const Value *> HasViews;
  for (auto &Entry : ViewRoots)
    HasViews.insert(Entry.second);
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    if (N.getOp() != OpId::Add || N.getNumResults() != 1 ||
        N.getNumOperands() != 2 || !N.getResult(0) ||
        getUpdatedParam(*N.getResult(0)))
      continue;
    const TensorType &Ty = N.getResult(0)->getType();
    for (const Value *X : N.getOperands()) {
      // Dies here (FreeAfter holds no parameter, output, optimizer result
      // or offloaded gradient), has the result's type and shares its
      // tensor with no view.
      auto Dies = find(FreeAfter[I], X);
      if (!X || Dies == FreeAfter[I].end() || X->getType() != Ty ||
          ViewRoots.count(X) || HasViews.count(X) ||
          N.getOperand(0) == N.getOperand(1) || !Ty.getStaticNumElements())
        continue;
      InPlaceOperand[I] = X;
      FreeAfter[I].erase(Dies);
      break;
    }
  }
}

namespace {

/// The tensors of one run; whatever is left is freed at the end.
class RunState {
public:
  RunState(Backend &B, const DenseSet<const Value *> &Gradients,
           const DenseSet<const Value *> &Gathered, unsigned TopCount)
      : B(B), Gradients(Gradients), Gathered(Gathered), TopCount(TopCount) {}
  ~RunState() {
    for (auto &Entry : Live)
      if (!Views.count(Entry.first))
        B.deallocate(Entry.second);
  }

  /// V as a view of a live tensor's bytes (T): no bytes of its own.
  Tensor addView(const Value &V, Tensor T) {
    Live[&V] = T;
    Views.insert(&V);
    return T;
  }

  Expected<Tensor> allocate(const Value &V) {
    const TensorType &Ty = V.getType();
    Expected<Tensor> T = B.allocate(Ty.getElementType(), Ty.getStaticSizes());
    if (!T)
      return valueError(V, toString(T.takeError()));
    return hold(V, *T);
  }
  /// V takes From's tensor (an in-place update): From is no longer live.
  Tensor rename(const Value *From, const Value &V) {
    return hold(V, release(From));
  }
  void free(const Value *V) {
    if (Views.erase(V)) {
      Live.erase(V);
      return;
    }
    B.deallocate(release(V));
  }
  const Tensor *lookup(const Value *V) const {
    auto It = Live.find(V);
    return It == Live.end() ? nullptr : &It->second;
  }
  uint64_t getPeak() const { return Peak; }
  /// The largest bytes held in gradients, and in everything else.
  uint64_t getPeakGradients() const { return PeakGradients; }
  uint64_t getPeakActivations() const { return PeakActivations; }
  uint64_t getPeakGathered() const { return PeakGathered; }
  /// The largest activations live at the peak (as last noted).
  const std::vector<std::pair<uint64_t, std::string>> &getTop() const {
    return Top;
  }

private:
  /// V holds T from now on: its bytes count, and the peaks follow.
  Tensor hold(const Value &V, Tensor T) {
    Live[&V] = T;
    uint64_t Size = T.getSizeInBytes();
    Bytes += Size;
    if (Gradients.count(&V))
      GradientBytes += Size;
    if (Gathered.count(&V))
      GatheredBytes += Size;
    // The gathered copies count as parameters (getPeakGatheredBytes).
    Peak = std::max(Peak, Bytes - GatheredBytes);
    PeakGradients = std::max(PeakGradients, GradientBytes);
    PeakGathered = std::max(PeakGathered, GatheredBytes);
    uint64_t Activations = Bytes - GradientBytes - GatheredBytes;
    // A copy of the largest live activations at most every 1% of growth of
    // the peak, so that noting them stays cheap.
    if (TopCount && Activations > PeakActivations &&
        Activations >= Noted + Noted / 100) {
      noteTop();
      Noted = Activations;
    }
    PeakActivations = std::max(PeakActivations, Activations);
    return T;
  }
  /// V's tensor, no longer held (nor counted).
  Tensor release(const Value *V) {
    auto It = Live.find(V);
    assert(It != Live.end() && "releasing a value that is not live");
    Tensor T = It->second;
    Live.erase(It);
    uint64_t Size = T.getSizeInBytes();
    Bytes -= Size;
    if (Gradients.count(V))
      GradientBytes -= Size;
    if (Gathered.count(V))
      GatheredBytes -= Size;
    return T;
  }
  void noteTop() {
    Top.clear();
    for (auto &[V, T] : Live)
      if (!Gradients.count(V) && !Gathered.count(V) && !Views.count(V))
        Top.push_back({T.getSizeInBytes(), V->getName().str()});
    // Largest first, then by name: the same list whatever the map's order.
    llvm::sort(Top, [](const auto &A, const auto &B) {
      return A.first != B.first ? A.first > B.first : A.second < B.second;
    });
    if (Top.size() > TopCount)
      Top.resize(TopCount);
  }

  Backend &B;
  const DenseSet<const Value *> &Gradients, &Gathered;
  unsigned TopCount;
  uint64_t Noted = 0;
  std::vector<std::pair<uint64_t, std::string>> Top;
  DenseMap<const Value *, Tensor> Live;
  DenseSet<const Value *> Views;
  uint64_t Bytes = 0, Peak = 0, GradientBytes = 0, PeakGradients = 0,
           PeakActivations = 0, GatheredBytes = 0, PeakGathered = 0;
};

} // namespace

Expected<std::vector<HostTensor>> Executor::run(ArrayRef<HostTensor> Inputs) {
  ArrayRef<std::unique_ptr<Value>> GraphInputs = G.getInputs();
  if (Inputs.size() != GraphInputs.size())
    return createStringError(inconvertibleErrorCode(),
                             "the graph takes " + Twine(GraphInputs.size()) +
                                 " inputs; " + Twine(Inputs.size()) +
                                 " were given");
  // Ended after State frees what is left: every buffer of the run.
  B.beginRun(this);
  auto EndRun = make_scope_exit([&] { B.endRun(); });
  RunState State(B, Gradients, Gathered, PeakValueCount);
  for (unsigned I = 0; I != Inputs.size(); ++I) {
    const Value &V = *GraphInputs[I];
    const TensorType &Ty = V.getType();
    if (Inputs[I].Elem != Ty.getElementType() ||
        ArrayRef<int64_t>(Inputs[I].Shape) !=
            ArrayRef<int64_t>(Ty.getStaticSizes()))
      return valueError(V, "input of type " + Inputs[I].getTypeString() +
                               " given for " + Ty.str());
    Expected<Tensor> T = State.allocate(V);
    if (!T)
      return T.takeError();
    if (Error E = B.copyFromHost(*T, Inputs[I].Bytes))
      return valueError(V, toString(std::move(E)));
  }
  for (const Value *V : UnusedInputs)
    State.free(V);

  // Offloaded parameters fetched for the node under way; freed however
  // the run ends.
  DenseMap<const Value *, Tensor> Fetched;
  uint64_t FetchedBytes = 0;
  // The next use's parameters: prefetches in flight (Pending, with the
  // node of the use), and those already on the device (Uploaded, at the
  // version they were read at), copied as soon as their bytes are in, and
  // at the latest before the node ahead of the use runs, so that the copy
  // overlaps the nodes before the use (CUDA: on its copy stream).
  struct Upload {
    Tensor T;
    uint64_t Version = 0;
  };
  SmallVector<std::pair<const Value *, unsigned>, 8> Pending;
  auto IsPending = [&](const Value *P) {
    return any_of(Pending, [&](const auto &E) { return E.first == P; });
  };
  DenseMap<const Value *, Upload> Uploaded;
  uint64_t AheadBytes = 0;
  auto FreeFetched = make_scope_exit([&] {
    for (auto &Entry : Fetched)
      B.deallocate(Entry.second);
    for (auto &Entry : Uploaded)
      B.deallocate(Entry.second.T);
  });
  // Before node I: uploads the pending parameters whose bytes are in, and
  // those node I + 1 uses (waiting for their bytes).
  auto UploadReady = [&](unsigned I) -> Error {
    for (unsigned J = 0; J != Pending.size();) {
      const Value *P = Pending[J].first;
      uint64_t Version = Versions.lookup(P);
      if (Pending[J].second > I + 1 &&
          !Prefetcher->isReady(P->getName(), Version)) {
        ++J;
        continue;
      }
      Pending.erase(Pending.begin() + J);
      Expected<std::vector<uint8_t>> Bytes = fetchBytes(*P);
      if (!Bytes)
        return Bytes.takeError();
      const TensorType &Ty = P->getType();
      Expected<Tensor> T = B.allocate(Ty.getElementType(), Ty.getStaticSizes());
      if (!T)
        return valueError(*P, toString(T.takeError()));
      Uploaded[P] = {*T, Version};
      if (Error E = B.copyFromHostAhead(*T, *Bytes))
        return valueError(*P, toString(std::move(E)));
      ++UploadsAhead;
    }
    return Error::success();
  };
  auto ParamTensor = [&](const Value *P) {
    auto It = Fetched.find(P);
    return It != Fetched.end() ? It->second : Params.lookup(P);
  };
  auto ReportFetches = [&] {
    if (Prefetcher)
      for (const OffloadPrefetcher::FetchEvent &E : Prefetcher->drainEvents())
        if (OnFetch)
          OnFetch(E);
  };
  if (Prefetcher) {
    PeakFetchedBytes = 0;
    UploadsAhead = 0;
  }

  // A node's operand tensors.
  auto Operand = [&](const Value *V) {
    if (!V)
      return Tensor();
    if (V->isParam())
      return ParamTensor(V);
    if (const Value *P = getUpdatedParam(*V))
      return ParamTensor(P);
    return *State.lookup(V);
  };
  // Result R of node I, whose operands are In: the parameter an optimizer
  // step updates, the operand an in-place Add takes over, a gathered
  // parameter's home, a view of the operand's bytes, or a new tensor.
  auto Result = [&](unsigned I, unsigned R,
                    ArrayRef<Tensor> In) -> Expected<Tensor> {
    const Node &N = *Nodes[I];
    const Value &Y = *N.getResult(R);
    if (std::optional<unsigned> Op = getUpdatedOperand(N.getOp(), R))
      return ParamTensor(N.getOperand(*Op));
    if (const Value *X = InPlaceOperand[I])
      return State.rename(X, Y);
    if (const Value *P = HomeAt[I])
      // The gather fills its parameter's home around the shard.
      return State.addView(Y, Homes.find(P)->second.Whole);
    if (ViewOf[I])
      return State.addView(Y, Tensor(Y.getType().getElementType(),
                                     Y.getType().getStaticSizes(),
                                     In[0].getData()));
    return State.allocate(Y);
  };
  // Nodes [I, End) of a group (planStepGroups), run by the backend at once.
  auto RunGroup = [&](unsigned I, unsigned End) -> Error {
    std::vector<SmallVector<Tensor, 10>> Ins(End - I), Outs(End - I);
    std::vector<ArrayRef<Tensor>> InRefs, OutRefs;
    std::vector<const Node *> Group;
    for (unsigned K = I; K != End; ++K) {
      const Node &N = *Nodes[K];
      for (Value *V : N.getOperands())
        Ins[K - I].push_back(Operand(V));
      for (unsigned R = 0; R != N.getNumResults(); ++R) {
        Expected<Tensor> T = Result(K, R, Ins[K - I]);
        if (!T)
          return T.takeError();
        Outs[K - I].push_back(*T);
      }
      Group.push_back(&N);
      InRefs.push_back(Ins[K - I]);
      OutRefs.push_back(Outs[K - I]);
    }
    CurrentNode.store(Group.front(), std::memory_order_relaxed);
    auto Start = std::chrono::steady_clock::now();
    if (Error E = B.runNodes(Group, InRefs, OutRefs))
      return E;
    auto Finish = std::chrono::steady_clock::now();
    if (Observer) {
      // Optimizer steps share the group's time by their elements; a fused
      // epilogue's time counts with its GEMM (the first node).
      bool ByElements = Group.front()->getOp() == OpId::AdamW;
      std::vector<double> Weights;
      for (const Node *N : Group)
        Weights.push_back(ByElements ? double(N->getOperand(0)
                                                  ->getType()
                                                  .getStaticNumElements()
                                                  .value_or(0))
                                     : double(N == Group.front()));
      double Total = 0, Done = 0;
      for (double W : Weights)
        Total += W;
      auto At = [&](double Share) {
        return Start +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   (Finish - Start) * (Total ? Share / Total : 0.0));
      };
      for (size_t K = 0; K != Group.size(); ++K) {
        Observer(*Group[K], At(Done), At(Done + Weights[K]));
        Done += Weights[K];
      }
    }
    for (unsigned K = I; K != End; ++K)
      for (const Value *V : FreeAfter[K])
        State.free(V);
    return Error::success();
  };

  SmallVector<Tensor, 6> In, Out;
  for (unsigned I = 0; I != Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    In.clear();
    Out.clear();
    if (!Prefetcher && GroupEnd[I] > I + 1) {
      if (Error E = RunGroup(I, GroupEnd[I]))
        return E;
      I = GroupEnd[I] - 1;
      ReportFetches();
      continue;
    }
    if (Prefetcher)
      if (Error E = UploadReady(I))
        return E;
    for (const Value *P : FetchAt[I]) {
      auto Up = Uploaded.find(P);
      if (Up != Uploaded.end()) {
        Upload U = Up->second;
        Uploaded.erase(Up);
        AheadBytes -= U.T.getSizeInBytes();
        if (U.Version == Versions.lookup(P)) {
          // Uploaded ahead.
          Fetched[P] = U.T;
          FetchedBytes += U.T.getSizeInBytes();
          continue;
        }
        B.deallocate(U.T); // Written back since it was read.
      }
      if (OffloadTiers.count(P) && IsPending(P)) {
        Pending.erase(
            find_if(Pending, [&](const auto &E) { return E.first == P; }));
        AheadBytes -= *P->getType().getStaticSizeInBytes();
      }
      Expected<std::vector<uint8_t>> Bytes = fetchBytes(*P);
      if (!Bytes)
        return Bytes.takeError();
      Expected<Tensor> T = Tensor();
      if (EvictedTiers.count(P)) {
        // A gradient: a computed value again while its user runs.
        T = State.allocate(*P);
        if (!T)
          return T.takeError();
      } else {
        const TensorType &Ty = P->getType();
        T = B.allocate(Ty.getElementType(), Ty.getStaticSizes());
        if (!T)
          return valueError(*P, toString(T.takeError()));
        Fetched[P] = *T;
        FetchedBytes += T->getSizeInBytes();
      }
      if (Error E = B.copyFromHost(*T, *Bytes))
        return valueError(*P, toString(std::move(E)));
    }
    // One use ahead: the next use's fetches overlap this node, and their
    // uploads the nodes up to it. Their buffers count as resident (the
    // double buffer).
    for (const Value *P : PrefetchAt[I])
      Prefetcher->prefetch(P->getName(), Versions.lookup(P));
    for (auto [P, Use] : UploadAt[I])
      if (!Uploaded.count(P) && !IsPending(P)) {
        Pending.push_back({P, Use});
        AheadBytes += *P->getType().getStaticSizeInBytes();
      }
    PeakFetchedBytes = std::max(PeakFetchedBytes, FetchedBytes + AheadBytes);
    for (Value *V : N.getOperands())
      In.push_back(Operand(V));
    for (unsigned R = 0; R != N.getNumResults(); ++R) {
      Expected<Tensor> T = Result(I, R, In);
      if (!T)
        return T.takeError();
      Out.push_back(*T);
    }
    CurrentNode.store(&N, std::memory_order_relaxed);
    auto Start = std::chrono::steady_clock::now();
    if (!ViewOf[I])
      if (Error E = B.runNode(N, In, Out))
        return E;
    if (Observer)
      Observer(N, Start, std::chrono::steady_clock::now());
    for (const Value *V : FreeAfter[I])
      State.free(V);
    for (const Value *P : WritebackAt[I])
      if (Error E =
              storeBlock(*P, Fetched.find(P)->second, OffloadTiers.lookup(P)))
        return E;
    for (const Value *V : EvictAt[I]) {
      if (Error E = storeBlock(*V, *State.lookup(V), EvictedTiers.lookup(V)))
        return E;
      State.free(V);
    }
    for (const Value *P : FetchAt[I]) {
      if (EvictedTiers.count(P)) {
        State.free(P);
        // Its last use: the block goes too, unless it is an output.
        if (LastFetch.lookup(P) == I && !P->getNumOutputUses())
          Offload->erase(P->getName());
        continue;
      }
      auto It = Fetched.find(P);
      FetchedBytes -= It->second.getSizeInBytes();
      B.deallocate(It->second);
      Fetched.erase(It);
    }
    ReportFetches();
  }
  if (Prefetcher)
    ++OffloadVersion;

  std::vector<HostTensor> Results;
  Results.reserve(G.getOutputs().size());
  for (unsigned Pos = 0; Pos != G.getOutputs().size(); ++Pos) {
    const Value *V = G.getOutputs()[Pos];
    if (!isReadOutput(Pos)) {
      HostTensor H;
      H.Elem = V->getType().getElementType();
      auto Sizes = V->getType().getStaticSizes();
      H.Shape.assign(Sizes.begin(), Sizes.end());
      Results.push_back(std::move(H));
      continue;
    }
    if (OffloadTiers.count(V) ||
        (getUpdatedParam(*V) && OffloadTiers.count(getUpdatedParam(*V)))) {
      // An offloaded parameter as an output: its stored bytes.
      Expected<HostTensor> H =
          readParam(V->isParam() ? *V : *getUpdatedParam(*V));
      if (!H)
        return H.takeError();
      Results.push_back(std::move(*H));
      continue;
    }
    if (EvictedTiers.count(V)) {
      // An offloaded gradient as an output: its stored bytes.
      Expected<HostTensor> H = readStored(*V);
      if (!H)
        return H.takeError();
      Results.push_back(std::move(*H));
      continue;
    }
    const Tensor *T = V->isParam() ? &Params.find(V)->second : State.lookup(V);
    if (!T)
      if (const Value *P = getUpdatedParam(*V))
        T = &Params.find(P)->second;
    assert(T && "an output is not live");
    HostTensor H;
    H.Elem = T->getElementType();
    H.Shape.assign(T->getShape().begin(), T->getShape().end());
    H.Bytes.resize(T->getSizeInBytes());
    if (Error E = B.copyToHost(*T, H.Bytes))
      return valueError(*V, toString(std::move(E)));
    Results.push_back(std::move(H));
  }
  PeakBytes = State.getPeak();
  PeakGradientBytes = State.getPeakGradients();
  PeakNonGradientBytes = State.getPeakActivations();
  PeakGatheredBytes = State.getPeakGathered();
  PeakValues = State.getTop();
  return Results;
}
