//===- Report.cpp - The plan as one self-contained HTML page --------------===//

#include "codegen/Report.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

namespace {

constexpr double GiB = double(1ull << 30);

std::string escape(StringRef S) {
  std::string Out;
  for (char C : S) {
    switch (C) {
    case '&':
      Out += "&amp;";
      break;
    case '<':
      Out += "&lt;";
      break;
    case '>':
      Out += "&gt;";
      break;
    case '"':
      Out += "&quot;";
      break;
    default:
      Out += C;
    }
  }
  return Out;
}

const char *Style = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.text { text-align: left; }
.warn { color: #b00; font-weight: bold; }
svg text { font-size: 11px; font-family: sans-serif; }
</style>)";

/// Stage hues, repeated.
const char *stageColor(unsigned Stage) {
  static const char *Colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                 "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  return Colors[Stage % 8];
}

void summary(raw_ostream &OS, const ReportInput &In) {
  const Plan &P = In.Plans.front();
  const PlanPrediction &R = P.Prediction;
  OS << "<section id=\"summary\"><table>\n";
  auto Row = [&](StringRef Name, const std::string &Value) {
    OS << "<tr><th>" << Name << "</th><td class=\"text\">" << escape(Value)
       << "</td></tr>\n";
  };
  Row("configuration", P.Config.str());
  Row("cluster", std::to_string(In.Cl->NumGpus) + " x " + In.Cl->Device.Name +
                     ", " + std::to_string(In.Cl->GpusPerNode) + " per node");
  Row("step time", formatv("{0:f4} s", R.StepSeconds).str());
  Row("throughput", formatv("{0:f0} tokens/s", R.TokensPerSecond).str());
  Row("TFLOP/s per GPU", formatv("{0:f1} model (MFU {1:f1}%), {2:f1} "
                                 "hardware (HFU {3:f1}%)",
                                 R.ModelTflopsPerGpu, 100 * R.Mfu,
                                 R.HardwareTflopsPerGpu, 100 * R.Hfu)
                             .str());
  Row("peak memory per GPU",
      formatv("{0:f2} GiB of {1:f2} GiB", R.PeakMemoryBytes / GiB,
              R.MemoryCapacityBytes / GiB)
          .str());
  OS << "</table></section>\n";
}

/// Pipeline stages (rows) by data-parallel replicas (columns), each a box of
/// tensor-parallel ranks; at most 16 of each are drawn.
void topology(raw_ostream &OS, const ReportInput &In) {
  const PlanConfig &C = In.Plans.front().Config;
  unsigned Rows = std::min(C.PP, 16u), Cols = std::min(C.DP, 16u);
  unsigned Tp = std::min(C.TP, 8u);
  unsigned CellW = 12 * Tp + 8, CellH = 26;
  unsigned W = 90 + Cols * CellW + 60, H = 30 + Rows * CellH + 20;
  OS << "<section id=\"topology\"><h2>Cluster: " << C.PP
     << " pipeline stages x " << C.DP << " data-parallel replicas x " << C.TP
     << " tensor-parallel ranks on " << In.Cl->numNodes() << " nodes of "
     << In.Cl->GpusPerNode << "</h2>\n";
  OS << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << H << "\">\n";
  for (unsigned D = 0; D != Cols; ++D)
    OS << "<text x=\"" << 90 + D * CellW << "\" y=\"18\">dp " << D
       << "</text>\n";
  for (unsigned S = 0; S != Rows; ++S) {
    unsigned Y = 26 + S * CellH;
    OS << "<text x=\"4\" y=\"" << Y + 15 << "\">stage " << S << "</text>\n";
    for (unsigned D = 0; D != Cols; ++D) {
      unsigned X = 90 + D * CellW;
      OS << "<rect x=\"" << X << "\" y=\"" << Y << "\" width=\"" << CellW - 4
         << "\" height=\"" << CellH - 6
         << "\" fill=\"none\" stroke=\"#888\"/>\n";
      for (unsigned T = 0; T != Tp; ++T)
        OS << "<rect x=\"" << X + 2 + 12 * T << "\" y=\"" << Y + 3
           << "\" width=\"10\" height=\"" << CellH - 12 << "\" fill=\""
           << stageColor(S) << "\"/>\n";
    }
  }
  if (C.PP > Rows || C.DP > Cols || C.TP > Tp)
    OS << "<text x=\"4\" y=\"" << H - 4 << "\">(first " << Rows << " stages, "
       << Cols << " replicas and " << Tp
       << " tensor-parallel ranks drawn)</text>\n";
  OS << "</svg></section>\n";
}

Error gantt(raw_ostream &OS, const ReportInput &In) {
  const Plan &P = In.Plans.front();
  const PlanConfig &C = P.Config;
  const PlanPrediction &R = P.Prediction;
  PipelineSpec Spec;
  Spec.Kind = C.Schedule;
  Spec.Stages = C.PP;
  Spec.VirtualStages = C.VPP;
  Spec.MicroBatches = unsigned(C.MicroBatches);
  Spec.Forward = R.StageForward;
  Spec.Backward = R.StageBackward;
  Spec.P2PSeconds = R.P2PSeconds;
  Spec.RecordTimeline = true;
  Expected<PipelineResult> Sim = simulatePipeline(Spec);
  if (!Sim)
    return Sim.takeError();
  // Draw at most 16 ranks and 20000 boxes.
  unsigned Ranks = std::min(C.PP, 16u);
  size_t PerRank = size_t(2) * C.VPP * C.MicroBatches;
  while (Ranks > 1 && PerRank * Ranks > 20000)
    --Ranks;
  double Span = Sim->StepSeconds > 0 ? Sim->StepSeconds : 1;
  unsigned Width = 1000, RowH = 22;
  unsigned H = 30 + Ranks * RowH + 20;
  bool Warn = Sim->BubbleFraction > 0.2;
  OS << "<section id=\"schedule\"><h2>Pipeline schedule ("
     << getScheduleName(C.Schedule) << ", " << C.MicroBatches
     << " micro-batches)</h2>\n<p" << (Warn ? " class=\"warn\"" : "")
     << ">bubble " << formatv("{0:f1}", 100 * Sim->BubbleFraction)
     << "% of the pipeline's " << formatv("{0:f4}", Sim->StepSeconds) << " s"
     << (Warn ? " (above 20%)" : "") << "; forward blue, backward green</p>\n";
  OS << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Width + 80
     << "\" height=\"" << H << "\">\n";
  unsigned Stages = C.PP * C.VPP;
  for (unsigned Rank = 0; Rank != Ranks; ++Rank) {
    unsigned Y = 20 + Rank * RowH;
    OS << "<text x=\"2\" y=\"" << Y + 14 << "\">rank " << Rank << "</text>\n";
    OS << "<rect x=\"70\" y=\"" << Y << "\" width=\"" << Width << "\" height=\""
       << RowH - 4 << "\" fill=\"#f3f3f3\"/>\n";
    for (unsigned S = Rank; S < Stages; S += C.PP)
      for (unsigned M = 0; M != C.MicroBatches; ++M) {
        size_t Slot = size_t(S) * C.MicroBatches + M;
        for (bool Bwd : {false, true}) {
          double End =
              Bwd ? Sim->BackwardFinish[Slot] : Sim->ForwardFinish[Slot];
          double Len = Bwd ? R.StageBackward[S] : R.StageForward[S];
          double X0 = 70 + Width * (End - Len) / Span;
          double W = std::max(0.5, Width * Len / Span);
          const char *Fill = Bwd ? "#59a14f" : "#4e79a7";
          OS << format("<rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" "
                       "height=\"%u\" fill=\"%s\"/>\n",
                       X0, Y + 1, W, RowH - 6, Fill);
        }
      }
  }
  OS << "<text x=\"70\" y=\"" << H - 4 << "\">0 s</text><text x=\""
     << Width + 20 << "\" y=\"" << H - 4 << "\">"
     << formatv("{0:f3}", Sim->StepSeconds) << " s</text>\n";
  if (Ranks < C.PP)
    OS << "<text x=\"300\" y=\"" << H - 4 << "\">(first " << Ranks << " of "
       << C.PP << " ranks)</text>\n";
  OS << "</svg></section>\n";
  return Error::success();
}

void memory(raw_ostream &OS, const ReportInput &In) {
  const PlanPrediction &R = In.Plans.front().Prediction;
  unsigned Ranks = std::min<unsigned>(R.Ranks.size(), 32);
  unsigned BarW = 24, Gap = 10, Height = 220;
  double Cap = R.MemoryCapacityBytes > 0 ? R.MemoryCapacityBytes : 1;
  unsigned W = 60 + Ranks * (BarW + Gap) + 160;
  OS << "<section id=\"memory\"><h2>Memory per GPU, by pipeline rank, "
        "against "
     << formatv("{0:f1}", Cap / GiB) << " GiB</h2>\n";
  OS << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << Height + 40 << "\">\n";
  struct Part {
    const char *Name, *Color;
  } Parts[] = {{"weights", "#4e79a7"},
               {"gradients", "#f28e2b"},
               {"optimizer", "#e15759"},
               {"activations", "#59a14f"},
               {"buffers", "#bab0ac"}};
  for (unsigned Rank = 0; Rank != Ranks; ++Rank) {
    const RankPrediction &RP = R.Ranks[Rank];
    double Values[] = {RP.WeightBytes, RP.GradBytes, RP.OptimizerBytes,
                       RP.ActivationBytes, RP.OverheadBytes};
    double Y = 20 + Height;
    unsigned X = 60 + Rank * (BarW + Gap);
    for (unsigned I = 0; I != 5; ++I) {
      double H = Height * Values[I] / Cap;
      Y -= H;
      OS << format("<rect x=\"%u\" y=\"%.1f\" width=\"%u\" height=\"%.1f\" "
                   "fill=\"%s\"/>\n",
                   X, Y, BarW, H, Parts[I].Color);
    }
    OS << "<text x=\"" << X + 6 << "\" y=\"" << Height + 34 << "\">" << Rank
       << "</text>\n";
  }
  OS << "<line x1=\"50\" y1=\"20\" x2=\"" << 60 + Ranks * (BarW + Gap)
     << "\" y2=\"20\" stroke=\"#b00\" stroke-dasharray=\"4 3\"/>\n"
     << "<text x=\"2\" y=\"24\">capacity</text>\n";
  for (unsigned I = 0; I != 5; ++I) {
    unsigned X = 70 + Ranks * (BarW + Gap), Y = 30 + 18 * I;
    OS << "<rect x=\"" << X << "\" y=\"" << Y << "\" width=\"12\" "
       << "height=\"12\" fill=\"" << Parts[I].Color << "\"/><text x=\""
       << X + 18 << "\" y=\"" << Y + 11 << "\">" << Parts[I].Name
       << "</text>\n";
  }
  OS << "</svg></section>\n";
}

void alternatives(raw_ostream &OS, const ReportInput &In) {
  OS << "<section id=\"alternatives\"><h2>The plans the search ranked "
        "best</h2>\n<table><tr><th>#</th><th>configuration</th><th>step "
        "(s)</th><th>bubble</th><th>data-parallel sync (s)</th><th>memory "
        "(GiB)</th></tr>\n";
  for (unsigned I = 0; I != In.Plans.size(); ++I) {
    const PlanPrediction &R = In.Plans[I].Prediction;
    OS << "<tr><td>" << I + 1 << "</td><td class=\"text\">"
       << escape(In.Plans[I].Config.str()) << "</td><td>"
       << formatv("{0:f4}", R.StepSeconds) << "</td><td>"
       << formatv("{0:f1}%", 100 * R.BubbleFraction) << "</td><td>"
       << formatv("{0:f4}", R.DpSyncSeconds) << "</td><td>"
       << formatv("{0:f2}", R.PeakMemoryBytes / GiB) << "</td></tr>\n";
  }
  OS << "</table></section>\n";
}

void explain(raw_ostream &OS, const ReportInput &In) {
  const PlanPrediction &R = In.Plans.front().Prediction;
  double Bubble = R.PipelineSeconds * R.BubbleFraction;
  OS << "<section id=\"explain\"><h2>Where the step goes</h2>\n<table>"
        "<tr><th>part</th><th>seconds</th></tr>\n";
  auto Row = [&](StringRef Name, double S) {
    OS << "<tr><td class=\"text\">" << Name << "</td><td>"
       << formatv("{0:f4}", S) << "</td></tr>\n";
  };
  Row("pipeline: compute, tensor-parallel communication, recomputation",
      R.PipelineSeconds - Bubble);
  Row("pipeline: bubble (average idle)", Bubble);
  Row("data-parallel synchronization", R.DpSyncSeconds);
  Row("optimizer step", R.OptimizerSeconds);
  Row("offload transfers", R.OffloadSeconds);
  Row("step", R.StepSeconds);
  OS << "</table></section>\n";
}

} // namespace

Expected<std::string> autopar::renderReport(const ReportInput &In) {
  if (In.Plans.empty() || !In.Cl)
    return createStringError(inconvertibleErrorCode(),
                             "the report needs a plan and its cluster");
  std::string Text;
  raw_string_ostream OS(Text);
  OS << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
     << "<title>autopar plan: " << escape(In.Model) << "</title>\n"
     << Style << "</head><body>\n<h1>autopar plan for " << escape(In.Model)
     << "</h1>\n";
  summary(OS, In);
  topology(OS, In);
  if (Error E = gantt(OS, In))
    return E;
  memory(OS, In);
  alternatives(OS, In);
  explain(OS, In);
  OS << "</body></html>\n";
  return OS.str();
}
