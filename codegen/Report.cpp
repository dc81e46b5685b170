//===- Report.cpp - The plan as one self-contained HTML page --------------===//

#include "codegen/Report.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

constexpr double GiB = double(1ull << 30);

const char *Style = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.text { text-align: left; }
.warn { color: #b00; font-weight: bold; }
p.elided { font-size: 13px; }
svg text { font-size: 11px; font-family: sans-serif; }
svg text.rank { font-size: 12px; font-weight: bold; text-anchor: middle; }
svg text.dp { font-size: 9px; text-anchor: middle; }
svg text.gap { font-size: 18px; font-weight: bold; text-anchor: middle; }
ul.legend { font-size: 13px; list-style: none; padding-left: 0; }
ul.legend li { margin: 4px 0; }
.swatch, .tpbox { display: inline-block; width: 12px; height: 12px;
  margin-right: 4px; vertical-align: middle; }
.tpbox { width: 22px; border: 2px solid #111; border-radius: 4px;
  box-sizing: border-box; }
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
    OS << "<tr><th>" << Name << "</th><td class=\"text\">" << escapeHtml(Value)
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
  if (R.OpaqueFraction > 0)
    Row("ops autopar does not know",
        formatv("{0:f1}% of the step (Opaque, priced by estimates)",
                100 * R.OpaqueFraction)
            .str());
  OS << "</table></section>\n";
}

/// Where a global rank sits in the parallel groups: Megatron-LM's order
/// (parallel_state's "tp-cp-ep-dp-pp" with no context or expert
/// parallelism), tensor-parallel ranks innermost, then data-parallel, then
/// pipeline: rank = tp + TP * (dp + DP * pp). The planner's costs assume the
/// same placement (planner/Search.cpp: neighbouring stages are TP x DP ranks
/// apart). The report's only mapping from ranks to groups.
struct RankCoords {
  unsigned Tp, Dp, Pp;
};
RankCoords getRankCoords(const PlanConfig &C, unsigned Rank) {
  return {Rank % C.TP, Rank / C.TP % C.DP, Rank / C.TP / C.DP};
}

std::string bandwidth(double BytesPerSec) {
  std::string S;
  raw_string_ostream(S) << format("%.4g GB/s", BytesPerSec / 1e9);
  return S;
}

/// "a..b", or "a" when a == b.
std::string numberRange(unsigned A, unsigned B) {
  return A == B ? std::to_string(A)
                : std::to_string(A) + ".." + std::to_string(B);
}

/// Which links the groups' collectives cross, over every rank.
struct GroupLinks {
  /// The most nodes one tensor- or data-parallel group spans.
  unsigned TpNodes = 1, DpNodes = 1;
  /// Pairs of neighbouring stages (for each tensor- and data-parallel
  /// index) on different nodes and on the same node.
  uint64_t PpCross = 0, PpSame = 0;
  /// The nodes holding a rank of data-parallel replica 0, ascending.
  std::vector<unsigned> Replica0Nodes;
};

GroupLinks findGroupLinks(const PlanConfig &C, unsigned Ranks,
                          unsigned PerNode) {
  GroupLinks L;
  // Ranks are visited in order, so nodes never decrease: a group spans as
  // many nodes as its node changes.
  struct Span {
    std::vector<unsigned> Last, Count;
    explicit Span(size_t N) : Last(N, ~0u), Count(N, 0) {}
    void visit(size_t Group, unsigned Node) {
      if (Last[Group] != Node) {
        Last[Group] = Node;
        ++Count[Group];
      }
    }
    unsigned most() const {
      return Count.empty() ? 1 : *std::max_element(Count.begin(), Count.end());
    }
  } Tp(size_t(C.DP) * C.PP), Dp(size_t(C.TP) * C.PP);
  // The node of each (tp, dp) index's stages, stage innermost.
  std::vector<unsigned> StageNode(Ranks);
  for (unsigned Rank = 0; Rank != Ranks; ++Rank) {
    RankCoords X = getRankCoords(C, Rank);
    unsigned Node = Rank / PerNode;
    Tp.visit(X.Dp + size_t(C.DP) * X.Pp, Node);
    Dp.visit(X.Tp + size_t(C.TP) * X.Pp, Node);
    StageNode[(X.Tp + size_t(C.TP) * X.Dp) * C.PP + X.Pp] = Node;
    if (X.Dp == 0 &&
        (L.Replica0Nodes.empty() || L.Replica0Nodes.back() != Node))
      L.Replica0Nodes.push_back(Node);
  }
  L.TpNodes = Tp.most();
  L.DpNodes = Dp.most();
  for (size_t I = 0; I + 1 < StageNode.size(); ++I)
    if ((I + 1) % C.PP != 0)
      ++(StageNode[I] == StageNode[I + 1] ? L.PpSame : L.PpCross);
  return L;
}

/// The physical cluster: a box per node with its GPUs (labelled by global
/// rank, coloured by pipeline stage, tensor-parallel groups outlined), the
/// node's NVLink as a bar joining its GPUs, and the network as a line
/// joining the nodes; then a legend that says which link each group's
/// collectives use. At most 16 nodes and 32 GPUs of each are drawn: all
/// nodes when they fit, else those holding data-parallel replica 0 (one
/// whole copy of the model), and the text says what is left out.
void topology(raw_ostream &OS, const ReportInput &In) {
  const PlanConfig &C = In.Plans.front().Config;
  const Cluster &Cl = *In.Cl;
  const unsigned MaxNodes = 16, MaxGpus = 32;
  unsigned Ranks = C.TP * C.PP * C.DP;
  unsigned PerNode = std::max(1u, std::min(Cl.GpusPerNode, Ranks));
  unsigned Nodes = (Ranks + PerNode - 1) / PerNode;
  GroupLinks L = findGroupLinks(C, Ranks, PerNode);
  bool Cpu = Cl.Device.Name == "cpu";
  StringRef Intra = Cpu ? "shared memory" : "NVLink";

  std::vector<unsigned> Drawn;
  if (Nodes <= MaxNodes)
    for (unsigned N = 0; N != Nodes; ++N)
      Drawn.push_back(N);
  else
    Drawn.assign(L.Replica0Nodes.begin(),
                 L.Replica0Nodes.begin() +
                     std::min<size_t>(L.Replica0Nodes.size(), MaxNodes));

  OS << "<section id=\"topology\"><h2>Cluster: " << C.PP
     << " pipeline stages x " << C.DP << " data-parallel replicas x " << C.TP
     << " tensor-parallel ranks on " << Nodes
     << (Nodes == 1 ? " node of " : " nodes of ") << PerNode
     << (PerNode == 1 ? " GPU" : " GPUs") << "</h2>\n";

  // Geometry: GPUs in rows of up to 8 inside a node, nodes side by side
  // in rows under 1100 pixels, a network line under each row of nodes.
  // A GPU's width fits its rank in bold 12-pixel digits.
  const unsigned CellH = 32, Gap = 6, Pad = 10, NodeGap = 24;
  unsigned CellW =
      std::max<unsigned>(44, 7 * std::to_string(Ranks - 1).size() + 10);
  unsigned Shown = std::min(PerNode, MaxGpus);
  unsigned Cols = std::min(Shown, 8u), GpuRows = (Shown + Cols - 1) / Cols;
  // Wide enough for the title and the ranks beside it.
  unsigned NodeW = std::max(2 * Pad + Cols * (CellW + Gap) - Gap, 180u);
  unsigned GpuTop = 26, BarTop = GpuTop + GpuRows * (CellH + Gap) - Gap + 12;
  unsigned NodeH = BarTop + 18 + Pad;
  unsigned PerRow = std::max<unsigned>(
      1, std::min<unsigned>(Drawn.size(), 1100 / (NodeW + NodeGap)));
  unsigned NodeRows = (Drawn.size() + PerRow - 1) / PerRow;
  bool Network = Nodes > 1;
  unsigned RowH = NodeH + (Network ? 58 : 12);
  unsigned Left = Network ? 34 : 10;
  unsigned W = Left + PerRow * (NodeW + NodeGap), H = 10 + NodeRows * RowH;
  OS << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << H << "\">\n";

  for (unsigned I = 0; I != Drawn.size(); ++I) {
    unsigned Node = Drawn[I], First = Node * PerNode;
    unsigned Last = std::min(First + PerNode, Ranks) - 1;
    unsigned X0 = Left + I % PerRow * (NodeW + NodeGap);
    unsigned Y0 = 10 + I / PerRow * RowH;
    auto CellX = [&](unsigned J) {
      return X0 + Pad + J % Cols * (CellW + Gap);
    };
    auto CellY = [&](unsigned J) {
      return Y0 + GpuTop + J / Cols * (CellH + Gap);
    };
    OS << "<g class=\"node\"><rect x=\"" << X0 << "\" y=\"" << Y0
       << "\" width=\"" << NodeW << "\" height=\"" << NodeH
       << "\" rx=\"6\" fill=\"#f7f7f7\" stroke=\"#666\"/>\n<text x=\""
       << X0 + Pad << "\" y=\"" << Y0 + 17 << "\" font-weight=\"bold\">node "
       << Node << "</text><text x=\"" << X0 + NodeW - Pad << "\" y=\""
       << Y0 + 17 << "\" text-anchor=\"end\">"
       << (First == Last ? "rank " : "ranks ") << numberRange(First, Last)
       << "</text>\n";
    unsigned Count = std::min(Shown, Last - First + 1);
    // Each GPU's link to the node's switch, under the GPUs.
    for (unsigned J = 0; J != Count; ++J)
      OS << "<line x1=\"" << CellX(J) + CellW / 2 << "\" y1=\"" << CellY(J)
         << "\" x2=\"" << CellX(J) + CellW / 2 << "\" y2=\"" << Y0 + BarTop
         << "\" stroke=\"#999\"/>\n";
    OS << "<rect class=\"nvlink\" x=\"" << X0 + Pad << "\" y=\"" << Y0 + BarTop
       << "\" width=\"" << NodeW - 2 * Pad
       << "\" height=\"18\" rx=\"3\" fill=\"#c9c9c9\"/><text x=\""
       << X0 + NodeW / 2 << "\" y=\"" << Y0 + BarTop + 13
       << "\" text-anchor=\"middle\">" << Intra << " "
       << bandwidth(Cl.IntraNode.BytesPerSec) << " per GPU</text>\n";
    for (unsigned J = 0; J != Count; ++J) {
      RankCoords X = getRankCoords(C, First + J);
      OS << "<g class=\"gpu\"><title>rank " << First + J << ": stage " << X.Pp
         << ", data-parallel replica " << X.Dp << ", tensor-parallel rank "
         << X.Tp << "</title><rect x=\"" << CellX(J) << "\" y=\"" << CellY(J)
         << "\" width=\"" << CellW << "\" height=\"" << CellH
         << "\" rx=\"3\" fill=\"" << stageColor(X.Pp)
         << "\"/><text class=\"rank\" x=\"" << CellX(J) + CellW / 2 << "\" y=\""
         << CellY(J) + 14 << "\">" << First + J
         << "</text><text class=\"dp\" x=\"" << CellX(J) + CellW / 2
         << "\" y=\"" << CellY(J) + 27 << "\">d" << X.Dp << "</text></g>\n";
    }
    // Tensor-parallel groups: a frame around each run of a group's GPUs
    // within a row.
    for (unsigned J = 0; C.TP > 1 && J != Count;) {
      RankCoords X = getRankCoords(C, First + J);
      unsigned End = J + 1;
      while (End != Count && End % Cols != 0) {
        RankCoords Y = getRankCoords(C, First + End);
        if (Y.Dp != X.Dp || Y.Pp != X.Pp)
          break;
        ++End;
      }
      OS << "<rect class=\"tp-group\" x=\"" << CellX(J) - 2 << "\" y=\""
         << CellY(J) - 2 << "\" width=\"" << (End - J) * (CellW + Gap) - Gap + 4
         << "\" height=\"" << CellH + 4
         << "\" rx=\"5\" fill=\"none\" stroke=\"#111\" stroke-width=\"2\"/>\n";
      J = End;
    }
    // Nodes left out between two drawn ones of a row.
    if (I % PerRow != 0 && Drawn[I - 1] + 1 != Node)
      OS << "<text class=\"gap\" x=\"" << X0 - NodeGap / 2 << "\" y=\""
         << Y0 + NodeH / 2 + 5 << "\">&#8230;</text>\n";
    if (Network) {
      unsigned Mid = X0 + NodeW / 2, Y1 = Y0 + NodeH;
      OS << "<line x1=\"" << Mid << "\" y1=\"" << Y1 << "\" x2=\"" << Mid
         << "\" y2=\"" << Y1 + 22
         << "\" stroke=\"#555\" stroke-width=\"2\"/><text x=\"" << Mid + 5
         << "\" y=\"" << Y1 + 15 << "\">"
         << bandwidth(Cl.InterNode.BytesPerSec * PerNode) << "</text>\n";
    }
    OS << "</g>\n";
  }
  if (Network) {
    // A line under each row of nodes, joined by a trunk on the left.
    for (unsigned R = 0; R != NodeRows; ++R) {
      unsigned Y = 10 + R * RowH + NodeH + 22;
      unsigned InRow = std::min<unsigned>(PerRow, Drawn.size() - R * PerRow);
      OS << "<line class=\"network\" x1=\"10\" y1=\"" << Y << "\" x2=\""
         << Left + (InRow - 1) * (NodeW + NodeGap) + NodeW << "\" y2=\"" << Y
         << "\" stroke=\"#555\" stroke-width=\"4\"/>\n";
    }
    unsigned Top = 10 + NodeH + 22;
    if (NodeRows > 1)
      OS << "<line x1=\"10\" y1=\"" << Top << "\" x2=\"10\" y2=\""
         << Top + (NodeRows - 1) * RowH
         << "\" stroke=\"#555\" stroke-width=\"4\"/>\n";
    OS << "<text x=\"14\" y=\"" << Top + 17
       << "\">network between nodes: " << bandwidth(Cl.InterNode.BytesPerSec)
       << " per GPU, " << bandwidth(Cl.InterNode.BytesPerSec * PerNode)
       << " per node (each direction)</text>\n";
  }
  OS << "</svg>\n";

  // What is not drawn.
  if (Drawn.size() < Nodes) {
    std::vector<bool> IsDrawn(Nodes, false);
    for (unsigned N : Drawn)
      IsDrawn[N] = true;
    unsigned DrawnMaxDp = 0, DrawnMaxPp = 0, OtherMinDp = C.DP;
    for (unsigned Rank = 0; Rank != Ranks; ++Rank) {
      RankCoords X = getRankCoords(C, Rank);
      if (IsDrawn[Rank / PerNode]) {
        DrawnMaxDp = std::max(DrawnMaxDp, X.Dp);
        DrawnMaxPp = std::max(DrawnMaxPp, X.Pp);
      } else {
        OtherMinDp = std::min(OtherMinDp, X.Dp);
      }
    }
    OS << "<p class=\"elided\">Drawn: ";
    if (Drawn.size() == L.Replica0Nodes.size())
      OS << "the " << Drawn.size()
         << (Drawn.size() == 1 ? " node that holds" : " nodes that hold")
         << " data-parallel replica 0 (one whole copy of the model, " << C.TP
         << " tensor-parallel ranks x " << C.PP << " stages)";
    else
      OS << "the first " << Drawn.size() << " of the " << L.Replica0Nodes.size()
         << " nodes that hold data-parallel replica 0 (stages "
         << numberRange(0, DrawnMaxPp) << " of " << C.PP << ")";
    if (DrawnMaxDp > 0)
      OS << ", with replicas " << numberRange(0, DrawnMaxDp);
    OS << "; &#8230; and " << Nodes - Drawn.size() << " more nodes";
    if (OtherMinDp > DrawnMaxDp)
      OS << ": replicas " << numberRange(DrawnMaxDp + 1, C.DP - 1)
         << " of the same layout";
    OS << ".</p>\n";
  }
  if (Shown < PerNode)
    OS << "<p class=\"elided\">The first " << Shown << " of each node's "
       << PerNode << " GPUs are drawn.</p>\n";

  // The legend.
  OS << "<ul class=\"legend\">\n";
  unsigned Colors = std::min(C.PP, 8u);
  OS << "<li>";
  for (unsigned S = 0; S != Colors; ++S)
    OS << "<span class=\"swatch\" style=\"background:" << stageColor(S)
       << "\"></span>" << (C.PP > 8 ? "stages " : "stage ") << S
       << (C.PP > 8 ? ", " + std::to_string(S + 8) + ", &#8230;" : "") << " ";
  OS << "(colour: pipeline stage). ";
  if (C.PP == 1)
    OS << "One stage: no sends between stages.";
  else if (L.PpCross == 0)
    OS << "Sends between neighbouring stages use " << Intra
       << " (both stages on the same node).";
  else if (L.PpSame == 0)
    OS << "Sends between neighbouring stages use the network (neighbouring "
          "stages are on different nodes).";
  else
    OS << "Sends between neighbouring stages use the network for " << L.PpCross
       << " of " << L.PpCross + L.PpSame
       << " stage pairs (on different nodes), " << Intra << " for the others.";
  OS << "</li>\n<li><span class=\"tpbox\"></span>";
  if (C.TP == 1)
    OS << "tp=1: no tensor-parallel groups.";
  else if (L.TpNodes == 1)
    OS << "Outlined: a tensor-parallel group (" << C.TP
       << " consecutive ranks); its all-reduces and all-gathers use " << Intra
       << " (each group inside one node).";
  else
    OS << "Outlined: a tensor-parallel group (" << C.TP
       << " consecutive ranks) spans " << L.TpNodes
       << " nodes; its collectives use " << Intra
       << " inside a node and the network between nodes.";
  OS << "</li>\n<li>";
  if (C.DP == 1)
    OS << "One data-parallel replica: no gradient synchronization.";
  else {
    OS << "d0..d" << C.DP - 1
       << ": data-parallel replica; a data-parallel group is the " << C.DP
       << " GPUs with the same stage and tensor-parallel rank. Its gradient "
          "synchronization uses ";
    if (L.DpNodes == 1)
      OS << Intra << " (each group inside one node).";
    else
      OS << "the network, across " << L.DpNodes << " nodes"
         << (L.DpNodes < C.DP ? " (" + Intra.str() +
                                    " between members on one "
                                    "node)."
                              : ".");
  }
  OS << "</li>\n</ul></section>\n";
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
       << escapeHtml(In.Plans[I].Config.str()) << "</td><td>"
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
     << "<title>autopar plan: " << escapeHtml(In.Model) << "</title>\n"
     << Style << "</head><body>\n<h1>autopar plan for " << escapeHtml(In.Model)
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

std::string autopar::escapeHtml(StringRef S) {
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
