//===- TrainReports.cpp - Traces and memory reports of a training run -----===//

#include "runtime/TrainReports.h"

#include "runtime/Backend.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpFlops.h"
#include "ir/OpRegistry.h"
#include "runtime/StepProfile.h"

#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

using namespace autopar;
using namespace llvm;

void TraceRecorder::record(const Node &N,
                           std::chrono::steady_clock::time_point Start,
                           std::chrono::steady_clock::time_point End) {
  using Us = std::chrono::duration<double, std::micro>;
  Event E;
  E.Name =
      N.getNumResults() ? N.getResult(0)->getName().str() : N.getName().str();
  if (E.Name.empty())
    E.Name = getOpInfo(N.getOp()).Name;
  E.Op = getOpInfo(N.getOp()).Name;
  E.Communication = isCommunicationOp(N.getOp());
  E.Step = Step;
  E.StartUs = Us(Start.time_since_epoch()).count();
  E.DurationUs = Us(End - Start).count();
  auto [It, New] = NodeFigures.try_emplace(&N);
  if (New)
    It->second = {getForwardFlops(N).value_or(-1),
                  uint64_t(getTouchedBytes(N))};
  std::tie(E.Flops, E.Bytes) = It->second;
  Events.push_back(std::move(E));
}

void TraceRecorder::recordFetch(const OffloadPrefetcher::FetchEvent &F) {
  using Us = std::chrono::duration<double, std::micro>;
  Event E;
  E.Name = "fetch " + F.Name;
  E.Communication = false;
  E.Step = Step;
  E.StartUs = Us(F.Start.time_since_epoch()).count();
  E.DurationUs = Us(F.End - F.Start).count();
  E.Fetch = true;
  E.Prefetched = F.Prefetched;
  E.Bytes = F.Bytes;
  E.Depth = F.Depth;
  Events.push_back(std::move(E));
}

std::string TraceRecorder::toJSON() const {
  json::Array A;
  A.push_back(json::Object{
      {"name", "process_name"},
      {"ph", "M"},
      {"pid", Rank},
      {"args", json::Object{{"name", "rank " + std::to_string(Rank)}}}});
  static const char *const Threads[] = {"compute", "communication", "offload"};
  for (int Tid : {0, 1, 2})
    A.push_back(json::Object{{"name", "thread_name"},
                             {"ph", "M"},
                             {"pid", Rank},
                             {"tid", Tid},
                             {"args", json::Object{{"name", Threads[Tid]}}}});
  for (const Event &E : Events) {
    if (E.Fetch) {
      A.push_back(
          json::Object{{"name", E.Name},
                       {"cat", "offload"},
                       {"ph", "X"},
                       {"pid", Rank},
                       {"tid", 2},
                       {"ts", E.StartUs},
                       {"dur", E.DurationUs},
                       {"args", json::Object{{"bytes", int64_t(E.Bytes)},
                                             {"prefetch", E.Prefetched},
                                             {"depth", int64_t(E.Depth)},
                                             {"step", E.Step}}}});
      A.push_back(
          json::Object{{"name", "offload prefetch depth"},
                       {"ph", "C"},
                       {"pid", Rank},
                       {"ts", E.StartUs},
                       {"args", json::Object{{"depth", int64_t(E.Depth)}}}});
      continue;
    }
    A.push_back(json::Object{
        {"name", E.Name},
        {"cat", E.Communication ? "communication" : "compute"},
        {"ph", "X"},
        {"pid", Rank},
        {"tid", E.Communication ? 1 : 0},
        {"ts", E.StartUs},
        {"dur", E.DurationUs},
        {"args", [&] {
           json::Object Args{
               {"op", E.Op}, {"step", E.Step}, {"bytes", int64_t(E.Bytes)}};
           if (E.Flops >= 0)
             Args["flops"] = E.Flops;
           return Args;
         }()}});
  }
  std::string S;
  raw_string_ostream(S) << json::Value(std::move(A));
  return S;
}

Expected<std::vector<uint8_t>> autopar::gatherBytes(Backend &B,
                                                    ArrayRef<uint8_t> Mine) {
  Communicator &Comm = B.getCommunicator();
  int N = Comm.getNumRanks();
  Expected<Tensor> In = B.allocate(ElementType::U8, {int64_t(Mine.size())});
  if (!In)
    return In.takeError();
  Expected<Tensor> Out =
      B.allocate(ElementType::U8, {int64_t(Mine.size()) * N});
  if (!Out) {
    B.deallocate(*In);
    return Out.takeError();
  }
  SmallVector<int, 8> All;
  for (int R = 0; R != N; ++R)
    All.push_back(R);
  std::vector<uint8_t> Result(Mine.size() * N);
  Error E = B.copyFromHost(*In, Mine);
  if (!E)
    E = Comm.allGather(*In, *Out, All, 0, B.getCommTimeout());
  if (!E)
    E = B.copyToHost(*Out, Result);
  B.deallocate(*In);
  B.deallocate(*Out);
  if (E)
    return Expected<std::vector<uint8_t>>(std::move(E));
  return Result;
}

Expected<std::vector<std::string>> autopar::gatherTexts(Backend &B,
                                                        StringRef Text) {
  int N = B.getCommunicator().getNumRanks();
  if (N == 1)
    return std::vector<std::string>{Text.str()};
  uint64_t Size = Text.size();
  uint8_t SizeBytes[8];
  std::memcpy(SizeBytes, &Size, 8);
  Expected<std::vector<uint8_t>> Sizes = gatherBytes(B, SizeBytes);
  if (!Sizes)
    return Sizes.takeError();
  uint64_t Largest = 0;
  std::vector<uint64_t> Each(N);
  for (int R = 0; R != N; ++R) {
    std::memcpy(&Each[R], Sizes->data() + 8 * R, 8);
    Largest = std::max(Largest, Each[R]);
  }
  std::vector<uint8_t> Padded(Largest, ' ');
  std::memcpy(Padded.data(), Text.data(), Text.size());
  Expected<std::vector<uint8_t>> All = gatherBytes(B, Padded);
  if (!All)
    return All.takeError();
  std::vector<std::string> Texts;
  if (B.getCommunicator().getRank() == 0)
    for (int R = 0; R != N; ++R)
      Texts.emplace_back(
          reinterpret_cast<const char *>(All->data() + Largest * R), Each[R]);
  return Texts;
}

Error autopar::writeChromeTrace(StringRef Path,
                                ArrayRef<std::string> RankEvents) {
  json::Array Events;
  double Origin = std::numeric_limits<double>::infinity();
  std::vector<json::Value> Parsed;
  for (const std::string &Text : RankEvents) {
    Expected<json::Value> V = json::parse(Text);
    if (!V)
      return V.takeError();
    if (json::Array *A = V->getAsArray())
      for (const json::Value &E : *A)
        if (const json::Object *O = E.getAsObject())
          if (Optional<double> Ts = O->getNumber("ts"))
            Origin = std::min(Origin, *Ts);
    Parsed.push_back(std::move(*V));
  }
  if (Origin == std::numeric_limits<double>::infinity())
    Origin = 0;
  for (json::Value &V : Parsed)
    if (json::Array *A = V.getAsArray())
      for (json::Value &E : *A) {
        if (json::Object *O = E.getAsObject())
          if (Optional<double> Ts = O->getNumber("ts"))
            (*O)["ts"] = *Ts - Origin;
        Events.push_back(std::move(E));
      }
  std::string Out;
  raw_string_ostream(Out) << formatv(
      "{0:1}", json::Value(json::Object{{"traceEvents", std::move(Events)},
                                        {"displayTimeUnit", "ms"}}));
  Out += "\n";
  SmallString<256> Model(Path);
  Model += ".tmp%%%%%%";
  if (Error E = writeFileAtomically(Model, Path, Out))
    return createStringError(inconvertibleErrorCode(),
                             "cannot write the trace '" + Path +
                                 "': " + toString(std::move(E)));
  return Error::success();
}

void autopar::printPeakValues(
    raw_ostream &OS, ArrayRef<std::pair<uint64_t, std::string>> Values) {
  if (Values.empty())
    return;
  OS << "largest activations at rank 0's peak:";
  for (size_t I = 0; I != Values.size(); ++I)
    OS << (I ? ", %" : " %") << Values[I].second
       << format(" %.3f MiB", Values[I].first / (1024.0 * 1024.0));
  OS << "\n";
}

void autopar::printMemoryReport(raw_ostream &OS,
                                ArrayRef<MeasuredMemory> Measured,
                                const PlanRecord *Plan,
                                ArrayRef<unsigned> Stages) {
  constexpr double MiB = 1024.0 * 1024.0;
  for (size_t R = 0; R != Measured.size(); ++R) {
    const MeasuredMemory &M = Measured[R];
    double Total = double(M.ParamBytes + M.PeakActivationBytes);
    OS << format("memory rank %zu (stage %u): measured peak %.3f MiB "
                 "(parameters and optimizer state %.3f, gradients %.3f, "
                 "activations %.3f)",
                 R, Stages[R], Total / MiB, M.ParamBytes / MiB,
                 M.PeakGradientBytes / MiB, M.PeakNonGradientBytes / MiB);
    if (M.OffloadedBytes)
      OS << format(" and %.3f MiB offloaded (host %.3f, nvme %.3f; at most "
                   "%.3f fetched, %llu uploaded ahead of use a step)",
                   M.OffloadedBytes / MiB, M.HostBytes / MiB, M.NvmeBytes / MiB,
                   M.PeakFetchedBytes / MiB,
                   (unsigned long long)M.UploadsAhead);
    if (Plan && Stages[R] < Plan->Memory.size()) {
      const StageMemory *P = &Plan->Memory[Stages[R]];
      double States = double(P->Weights + P->Gradients + P->Optimizer);
      OS << format("; plan predicts %.3f MiB (weights %.3f, gradients %.3f, "
                   "optimizer %.3f, activations %.3f) plus an allowance of "
                   "%.1f MiB",
                   (States + P->Activations) / MiB, P->Weights / MiB,
                   P->Gradients / MiB, P->Optimizer / MiB, P->Activations / MiB,
                   P->Allowance / MiB);
      if (!Plan->ClusterName.empty())
        OS << " for " << Plan->ClusterName;
      if (P->Offloaded > 0) {
        OS << format(", %.3f MiB offloaded", P->Offloaded / MiB);
        if (M.OffloadedBytes)
          OS << format(" (offloaded measured / predicted %.2f)",
                       double(M.OffloadedBytes) / double(P->Offloaded));
      }
      if (States + P->Activations > 0)
        OS << format(" (measured / predicted %.2f)",
                     Total / (States + P->Activations));
    } else {
      OS << "; the program records no plan, so no prediction";
    }
    OS << "\n";
  }
}
