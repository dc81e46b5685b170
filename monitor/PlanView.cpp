//===- PlanView.cpp - The plan a run trains, as the panel shows it --------===//

#include "monitor/PlanView.h"

#include "passes/PlanContext.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;
using namespace autopar;

int64_t PlanView::getStage(int64_t Rank) const {
  // Row-major over the axes, the last innermost: what getMeshCoordinates
  // gives the runtime (runtime/MeshGroups.cpp).
  int64_t Stage = 0;
  for (size_t I = Cluster.Axes.size(); I-- != 0;) {
    int64_t Size = std::max<int64_t>(Cluster.Axes[I].second, 1);
    if (Cluster.Axes[I].first == PipelineAxis)
      Stage = Rank % Size;
    Rank /= Size;
  }
  return Stage;
}

/// The text of Html from `<section id="Id">` to its `</section>`, or "".
static StringRef cutSection(StringRef Html, StringRef Id) {
  std::string Open = ("<section id=\"" + Id + "\">").str();
  size_t Begin = Html.find(Open);
  if (Begin == StringRef::npos)
    return "";
  size_t End = Html.find("</section>", Begin);
  if (End == StringRef::npos)
    return "";
  return Html.slice(Begin, End + strlen("</section>"));
}

Expected<PlanView> autopar::loadPlanView(StringRef Dir) {
  PlanView V;
  V.Dir = Dir.str();
  SmallString<256> JsonPath(Dir);
  sys::path::append(JsonPath, "plan.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(JsonPath);
  if (!Buf)
    return createStringError(Buf.getError(), "cannot read '%s': %s",
                             JsonPath.c_str(),
                             Buf.getError().message().c_str());
  Expected<PlanRecord> R = parsePlanJSON((*Buf)->getBuffer(), JsonPath);
  if (!R)
    return R.takeError();
  V.Record = std::move(*R);
  Graph Scratch("plan");
  addPlanMesh(Scratch, V.Record.Config);
  V.Cluster = Scratch.getMeshes()[0];

  SmallString<256> ReportPath(Dir);
  sys::path::append(ReportPath, "report.html");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Report =
      MemoryBuffer::getFile(ReportPath);
  if (!Report) {
    V.Note = ("no report.html in '" + Dir + "' (" +
              Report.getError().message() + ")")
                 .str();
    return V;
  }
  StringRef Html = (*Report)->getBuffer();
  size_t StyleBegin = Html.find("<style>");
  size_t StyleEnd = Html.find("</style>");
  if (StyleBegin != StringRef::npos && StyleEnd != StringRef::npos &&
      StyleBegin < StyleEnd)
    V.Style = Html.slice(StyleBegin + strlen("<style>"), StyleEnd).str();
  V.Topology = cutSection(Html, "topology").str();
  V.Schedule = cutSection(Html, "schedule").str();
  if (!V.Schedule.empty())
    V.Schedule.replace(0, strlen("<section id=\"schedule\">"),
                       "<section id=\"planned-schedule\">");
  if (V.Topology.empty() || V.Schedule.empty())
    V.Note = ("'" + ReportPath + "' has no topology or schedule section").str();
  return V;
}

static bool isPlanDir(const Twine &Dir) {
  SmallString<256> Json;
  Dir.toVector(Json);
  sys::path::append(Json, "plan.json");
  return sys::fs::is_regular_file(Json);
}

Expected<std::string> autopar::findPlanDir(StringRef RunDir,
                                           StringRef Override) {
  if (!Override.empty()) {
    // A plan.json names its folder.
    StringRef Dir = Override;
    if (sys::fs::is_regular_file(Override))
      Dir = sys::path::parent_path(Override);
    if (Dir.empty())
      Dir = ".";
    if (!isPlanDir(Dir))
      return createStringError(
          inconvertibleErrorCode(),
          "--plan '%s': no plan.json there; give the folder `autopar -o` "
          "wrote",
          Override.str().c_str());
    return Dir.str();
  }
  SmallString<256> RunJson(RunDir);
  sys::path::append(RunJson, "run.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(RunJson);
  if (!Buf)
    return "";
  Expected<json::Value> V = json::parse((*Buf)->getBuffer());
  if (!V)
    return createStringError(inconvertibleErrorCode(), "%s: %s",
                             RunJson.c_str(), toString(V.takeError()).c_str());
  const json::Object *O = V->getAsObject();
  Optional<StringRef> Plan = O ? O->getString("plan") : None;
  if (!Plan)
    return createStringError(inconvertibleErrorCode(),
                             "%s: no \"plan\" (a string: the plan folder)",
                             RunJson.c_str());
  // The launcher's current directory is unknown: try where it likely was.
  SmallString<256> Abs(RunDir);
  sys::fs::make_absolute(Abs);
  sys::path::remove_dots(Abs, /*remove_dot_dot=*/true);
  SmallString<256> Parent = sys::path::parent_path(Abs);
  SmallString<256> Grandparent = sys::path::parent_path(Parent);
  std::vector<std::string> Candidates = {Plan->str()};
  if (!sys::path::is_absolute(*Plan)) {
    Candidates.push_back(Parent.str().str());
    SmallString<256> C(Parent);
    sys::path::append(C, *Plan);
    Candidates.push_back(C.str().str());
    C = Grandparent;
    sys::path::append(C, *Plan);
    Candidates.push_back(C.str().str());
  }
  for (const std::string &C : Candidates)
    if (isPlanDir(C))
      return C;
  std::string Looked;
  for (const std::string &C : Candidates)
    Looked += (Looked.empty() ? "'" : ", '") + C + "'";
  return createStringError(inconvertibleErrorCode(),
                           "%s names the plan '%s', but no plan.json is in "
                           "%s; give the plan folder with --plan",
                           RunJson.c_str(), Plan->str().c_str(),
                           Looked.c_str());
}
