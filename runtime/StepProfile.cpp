//===- StepProfile.cpp - Where a training step's time goes ----------------===//

#include "runtime/StepProfile.h"
#include "runtime/KernelFamily.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpFlops.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

int64_t autopar::getTouchedBytes(const Node &N) {
  if (runsNoKernel(N.getOp()))
    return 0;
  int64_t Bytes = 0;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
    if (const Value *V = N.getOperand(I))
      Bytes += V->getType().getStaticSizeInBytes().value_or(0);
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    Bytes += N.getResult(I)->getType().getStaticSizeInBytes().value_or(0);
  return Bytes;
}

void StepProfiler::beginStep() { Counting = !(SkipFirst && StepsBegun++ == 0); }

void StepProfiler::record(const Node &N,
                          std::chrono::steady_clock::time_point Start,
                          std::chrono::steady_clock::time_point End) {
  if (!Counting)
    return;
  auto [It, New] = Index.try_emplace(&N, unsigned(Nodes.size()));
  if (New) {
    Entry E;
    E.Name =
        N.getNumResults() ? N.getResult(0)->getName().str() : N.getName().str();
    E.Op = getOpInfo(N.getOp()).Name;
    E.Kind = getKernelKind(getKernelFamily(N.getOp())).str();
    E.Flops = getForwardFlops(N);
    E.Bytes = getTouchedBytes(N);
    Nodes.push_back(std::move(E));
  }
  Entry &E = Nodes[It->second];
  E.Seconds += std::chrono::duration<double>(End - Start).count();
  ++E.Calls;
}

void StepProfiler::endStep(double Seconds) {
  if (!Counting)
    return;
  ++Steps;
  StepSeconds += Seconds;
}

namespace {

/// One row of a table: a sum of nodes.
struct Row {
  std::string Name;
  double Seconds = 0;
  int64_t Calls = 0;
  /// FLOPs of the nodes whose FLOPs are known, and their time.
  double Flops = 0, FlopSeconds = 0, Bytes = 0;
};

} // namespace

static void printRows(raw_ostream &OS, StringRef Title, std::vector<Row> Rows,
                      int64_t Steps, double StepSeconds, unsigned Limit) {
  llvm::stable_sort(
      Rows, [](const Row &A, const Row &B) { return A.Seconds > B.Seconds; });
  OS << Title << "\n";
  OS << "  " << left_justify("", 40)
     << "    ms/step      %   calls      GFLOP"
        "   GFLOP/s        MB     GB/s\n";
  unsigned Shown = 0;
  for (const Row &R : Rows) {
    if (Shown++ == Limit)
      break;
    double Ms = R.Seconds / Steps * 1e3;
    double Share = StepSeconds > 0 ? 100 * R.Seconds / StepSeconds : 0;
    std::string Name =
        R.Name.size() > 40 ? "..." + R.Name.substr(R.Name.size() - 37) : R.Name;
    OS << llvm::format("  %-40s %10.3f %6.1f %7lld", Name.c_str(), Ms, Share,
                       (long long)(R.Calls / Steps));
    if (R.Flops > 0)
      OS << llvm::format(" %10.3f %9.2f", R.Flops / Steps / 1e9,
                         R.FlopSeconds > 0 ? R.Flops / R.FlopSeconds / 1e9
                                           : 0.0);
    else
      OS << "          -         -";
    if (R.Bytes > 0)
      OS << llvm::format(" %9.2f %8.2f\n", R.Bytes / Steps / 1e6,
                         R.Seconds > 0 ? R.Bytes / R.Seconds / 1e9 : 0.0);
    else
      OS << "         -        -\n";
  }
}

std::string StepProfiler::format(int Rank, unsigned TopNodes) const {
  std::string Text;
  raw_string_ostream OS(Text);
  if (Steps == 0) {
    OS << "profile rank " << Rank << ": no step measured\n";
    return Text;
  }
  double InNodes = 0;
  for (const Entry &E : Nodes)
    InNodes += E.Seconds;
  OS << llvm::format("profile rank %d: %.3f ms per step (mean of %lld step%s%s)"
                     ", %.3f ms in %zu nodes, %.3f ms between them\n",
                     Rank, StepSeconds / Steps * 1e3, (long long)Steps,
                     Steps == 1 ? "" : "s", SkipFirst ? " after the first" : "",
                     InNodes / Steps * 1e3, Nodes.size(),
                     (StepSeconds - InNodes) / Steps * 1e3);
  auto Add = [](Row &R, const Entry &E) {
    R.Seconds += E.Seconds;
    R.Calls += E.Calls;
    R.Bytes += double(E.Bytes) * E.Calls;
    if (E.Flops && *E.Flops > 0) {
      R.Flops += double(*E.Flops) * E.Calls;
      R.FlopSeconds += E.Seconds;
    }
  };
  for (StringRef By : {"kind", "op"}) {
    StringMap<unsigned> Seen;
    std::vector<Row> Rows;
    for (const Entry &E : Nodes) {
      StringRef Key = By == "kind" ? StringRef(E.Kind) : StringRef(E.Op);
      auto [It, New] = Seen.try_emplace(Key, unsigned(Rows.size()));
      if (New) {
        Rows.emplace_back();
        Rows.back().Name = Key.str();
      }
      Add(Rows[It->second], E);
    }
    printRows(OS, By == "kind" ? "by kind of kernel:" : "by op:", Rows, Steps,
              StepSeconds, ~0u);
  }
  std::vector<Row> Rows;
  for (const Entry &E : Nodes) {
    Rows.emplace_back();
    Rows.back().Name = "%" + E.Name + " " + E.Op;
    Add(Rows.back(), E);
  }
  printRows(OS, "heaviest nodes:", Rows, Steps, StepSeconds, TopNodes);
  return Text;
}
