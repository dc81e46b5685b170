//===- EmitSchedule.cpp - schedule.csv ------------------------------------===//
//
// The pipeline schedule of one step, per pipeline rank: the order
// planner/Schedule.h's getScheduleActions gives, as PyTorch's action
// strings ("<virtual stage>F<micro-batch>", "<virtual stage>B<micro-batch>"),
// with the transfers between ranks around them as torch.distributed.
// pipelining spells them: "<stage>RECV_F<mb>" before a forward whose input
// comes from another rank, "<stage>SEND_F<mb>" after a forward whose output
// goes to one, and RECV_B / SEND_B likewise for gradients. Rows differ in
// length (the first rank receives no activations). Every tensor- and
// data-parallel rank of a pipeline rank runs the same row.
//
//===----------------------------------------------------------------------===//

#include "codegen/LaunchFiles.h"
#include "planner/Schedule.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

Expected<std::string> autopar::renderScheduleCSV(const PlanRecord &R) {
  PipelineSpec Spec;
  Spec.Kind = R.Config.Schedule;
  Spec.Stages = unsigned(R.Config.PP);
  Spec.VirtualStages = unsigned(R.Config.VPP);
  Spec.MicroBatches = unsigned(R.Config.MicroBatches);
  // Only the order matters here, not the times.
  Spec.Forward.assign(size_t(R.Config.PP * R.Config.VPP), 1.0);
  Spec.Backward.assign(size_t(R.Config.PP * R.Config.VPP), 2.0);
  Expected<std::vector<std::vector<std::string>>> Actions =
      getScheduleActions(Spec);
  if (!Actions)
    return Actions.takeError();
  // Add the transfers.
  unsigned P = unsigned(R.Config.PP),
           Stages = unsigned(R.Config.PP * R.Config.VPP);
  std::vector<std::vector<std::string>> Rows;
  for (const std::vector<std::string> &Row : *Actions) {
    std::vector<std::string> Out;
    for (const std::string &A : Row) {
      size_t Kind = A.find_first_of("FB");
      unsigned Stage = 0;
      if (Kind == std::string::npos ||
          StringRef(A).substr(0, Kind).getAsInteger(10, Stage)) {
        Out.push_back(A);
        continue;
      }
      std::string MB = A.substr(Kind + 1);
      bool Fwd = A[Kind] == 'F';
      auto Crosses = [&](int Other) {
        return Other >= 0 && Other < int(Stages) &&
               unsigned(Other) % P != Stage % P;
      };
      int From = Fwd ? int(Stage) - 1 : int(Stage) + 1;
      int To = Fwd ? int(Stage) + 1 : int(Stage) - 1;
      std::string S = std::to_string(Stage);
      if (Crosses(From))
        Out.push_back(S + (Fwd ? "RECV_F" : "RECV_B") + MB);
      Out.push_back(A);
      if (Crosses(To))
        Out.push_back(S + (Fwd ? "SEND_F" : "SEND_B") + MB);
    }
    Rows.push_back(std::move(Out));
  }
  std::string S;
  raw_string_ostream OS(S);
  size_t Columns = 0;
  for (const std::vector<std::string> &Row : Rows)
    Columns = std::max(Columns, Row.size());
  OS << "rank";
  for (size_t I = 0; I != Columns; ++I)
    OS << "," << I;
  OS << "\n";
  for (size_t Rank = 0; Rank != Rows.size(); ++Rank) {
    OS << Rank;
    for (const std::string &A : Rows[Rank])
      OS << "," << A;
    OS << "\n";
  }
  return OS.str();
}
