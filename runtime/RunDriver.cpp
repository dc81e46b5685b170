//===- RunDriver.cpp - What autopar-run does ------------------------------===//

#include "runtime/RunDriver.h"
#include "runtime/BackendFactory.h"
#include "runtime/Executor.h"
#include "runtime/MeshGroups.h"

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace autopar;
using namespace llvm;

static raw_ostream &error() { return WithColor::error(errs(), "autopar-run"); }

static int fail(int Code, Error E) {
  printToolError("autopar-run", toString(std::move(E)));
  return Code;
}

Error RunDriverOptions::validate() const {
  auto Bad = [](const Twine &Message) {
    return createStringError(inconvertibleErrorCode(), Message.str());
  };
  if (ProgramFile.empty())
    return Bad("--eval PROGRAM.air is required");
  if (OutputDir.empty())
    return Bad("-o DIR is required");
  if (Threads < 1)
    return Bad("--threads must be 1 or more");
  if (Error E = checkBackendName(Backend))
    return E;
  if (CommTimeoutSeconds < 0 || CommTimeoutSeconds > 1e9)
    return Bad("--comm-timeout must be a positive number of seconds");
  StringMap<bool> Seen;
  for (StringRef Input : Inputs) {
    auto [Name, File] = Input.split('=');
    if (Name.empty() || File.empty() || Name.size() == Input.size())
      return Bad("--input '" + Input + "' is not NAME=FILE");
    if (!Seen.try_emplace(Name, true).second)
      return Bad("--input '" + Name + "' is given twice");
  }
  return Error::success();
}

/// Writes each (path, bytes) to a temporary file beside it, then renames
/// them all into place; on failure nothing is left behind.
static Error
writeFilesAtomically(ArrayRef<std::pair<std::string, std::string>> Files) {
  std::vector<sys::fs::TempFile> Temps;
  auto DiscardAll = [&] {
    for (sys::fs::TempFile &T : Temps)
      consumeError(T.discard());
  };
  for (const auto &[Path, Bytes] : Files) {
    Expected<sys::fs::TempFile> Temp =
        sys::fs::TempFile::create(Path + ".tmp-%%%%%%");
    if (!Temp) {
      DiscardAll();
      return createStringError(inconvertibleErrorCode(),
                               "cannot create a temporary file beside '" +
                                   Path + "': " + toString(Temp.takeError()));
    }
    Temps.push_back(std::move(*Temp));
    raw_fd_ostream OS(Temps.back().FD, /*shouldClose=*/false);
    OS << Bytes;
    OS.flush();
    if (OS.has_error()) {
      std::string Message = OS.error().message();
      OS.clear_error();
      DiscardAll();
      return createStringError(inconvertibleErrorCode(),
                               "cannot write '" + Path + "': " + Message);
    }
  }
  for (size_t I = 0; I != Files.size(); ++I)
    if (Error E = Temps[I].keep(Files[I].first)) {
      std::string Message = toString(std::move(E));
      for (size_t J = I + 1; J != Files.size(); ++J)
        consumeError(Temps[J].discard());
      return createStringError(inconvertibleErrorCode(), "cannot write '" +
                                                             Files[I].first +
                                                             "': " + Message);
    }
  return Error::success();
}

/// The graph to run: the named one, or the only one.
static Expected<const Graph *> selectGraph(const Module &M, StringRef Name) {
  if (!Name.empty()) {
    if (const Graph *G = M.lookupGraph(Name))
      return G;
    return createStringError(inconvertibleErrorCode(),
                             "the program has no graph '@" + Name + "'");
  }
  if (M.getGraphs().size() != 1)
    return createStringError(inconvertibleErrorCode(),
                             "the program has " + Twine(M.getGraphs().size()) +
                                 " graphs; name one with --graph");
  return M.getGraphs().front().get();
}

/// The --input files by input name (validated options).
static StringMap<std::string> getInputFiles(const RunDriverOptions &Options) {
  StringMap<std::string> Files;
  for (StringRef Input : Options.Inputs) {
    auto [Name, File] = Input.split('=');
    Files[Name] = File.str();
  }
  return Files;
}

/// Reads the graph's inputs; returns an exit code on failure.
static int readInputs(const Graph &G, const RunDriverOptions &Options,
                      std::vector<HostTensor> &Inputs, bool IgnoreUnknown) {
  StringMap<std::string> Files = getInputFiles(Options);
  for (const auto &Entry : Files)
    if (!IgnoreUnknown && (!G.lookupValue(Entry.getKey()) ||
                           !G.lookupValue(Entry.getKey())->isInput())) {
      error() << "--input '" << Entry.getKey() << "': the graph has no input "
              << "'%" << Entry.getKey() << "'\n";
      return RunBadOptions;
    }
  for (const std::unique_ptr<Value> &V : G.getInputs()) {
    auto It = Files.find(V->getName());
    if (It == Files.end()) {
      error() << "no --input for the graph's input '%" << V->getName() << "' ("
              << V->getType() << ")\n";
      return RunBadOptions;
    }
    const std::string &File = It->second;
    ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
        MemoryBuffer::getFile(File, /*IsText=*/false,
                              /*RequiresNullTerminator=*/false);
    if (!Buffer) {
      error() << "input '" << V->getName() << "': cannot read '" << File
              << "': " << Buffer.getError().message() << '\n';
      return RunIOError;
    }
    const TensorType &Ty = V->getType();
    std::optional<int64_t> Size = Ty.getStaticSizeInBytes();
    StringRef Bytes = (*Buffer)->getBuffer();
    if (!Size || uint64_t(*Size) != Bytes.size()) {
      error() << "input '" << V->getName() << "': '" << File << "' has "
              << Bytes.size() << " bytes; " << Ty << " needs "
              << (Size ? std::to_string(*Size) : std::string("a static shape"))
              << '\n';
      return RunInvalidInput;
    }
    HostTensor H;
    H.Elem = Ty.getElementType();
    H.Shape = Ty.getStaticSizes();
    H.Bytes.assign(Bytes.begin(), Bytes.end());
    Inputs.push_back(std::move(H));
  }
  return RunSuccess;
}

/// Writes the outputs and outputs.json into the output folder.
static int writeOutputs(const Graph &G, ArrayRef<HostTensor> Results,
                        StringRef Dir) {
  if (std::error_code EC = sys::fs::create_directories(Dir)) {
    error() << "cannot create '" << Dir << "': " << EC.message() << '\n';
    return RunIOError;
  }
  std::vector<std::pair<std::string, std::string>> Files;
  json::Array Entries;
  for (size_t I = 0; I != Results.size(); ++I) {
    std::string Name = std::to_string(I) + ".bin";
    SmallString<256> Path(Dir);
    sys::path::append(Path, Name);
    const HostTensor &H = Results[I];
    Files.emplace_back(std::string(Path),
                       std::string(H.Bytes.begin(), H.Bytes.end()));
    json::Array Shape;
    for (int64_t D : H.Shape)
      Shape.push_back(D);
    Entries.push_back(json::Object{
        {"index", int64_t(I)},
        {"name", G.getOutputs()[I]->getName()},
        {"file", Name},
        {"dtype", getElementTypeName(H.Elem)},
        {"shape", std::move(Shape)},
    });
  }
  std::string Json;
  raw_string_ostream OS(Json);
  OS << formatv("{0:2}",
                json::Value(json::Object{{"outputs", std::move(Entries)}}))
     << '\n';
  SmallString<256> JsonPath(Dir);
  sys::path::append(JsonPath, "outputs.json");
  Files.emplace_back(std::string(JsonPath), OS.str());
  if (Error E = writeFilesAtomically(Files))
    return fail(RunIOError, std::move(E));
  return RunSuccess;
}

/// The pipeline stage of Rank on the first mesh of Program (a forward
/// program of a plan), 0 without a `pp` axis.
static int64_t getPipelineStage(const Module &Program, int Rank) {
  if (Program.getGraphs().empty() ||
      Program.getGraphs().front()->getMeshes().empty())
    return 0;
  const Mesh &Cluster = Program.getGraphs().front()->getMeshes()[0];
  if (Rank >= Cluster.getNumDevices())
    return 0;
  for (unsigned I = 0; I != Cluster.Axes.size(); ++I)
    if (Cluster.Axes[I].first == "pp")
      return getMeshCoordinates(Cluster, Rank)[I];
  return 0;
}

int autopar::runRunDriver(const RunDriverOptions &Options) {
  if (Error E = Options.validate())
    return fail(RunBadOptions, std::move(E));
  Expected<std::unique_ptr<Backend>> Made = createBackend(
      {Options.Backend, Options.Threads, Options.CommTimeoutSeconds});
  if (!Made)
    return fail(RunFailure, Made.takeError());
  Backend &Backend = **Made;
  const Communicator &Comm = Backend.getCommunicator();
  // A plan folder: this rank's stage's forward program (autopar
  // --forward-programs); the --input files it does not read are the other
  // stages'.
  std::string ProgramFile = Options.ProgramFile;
  bool PlanFolder = sys::fs::is_directory(ProgramFile);
  std::unique_ptr<Module> M;
  SourceMgr SM;
  auto Parse = [&](StringRef File) -> int {
    ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
        MemoryBuffer::getFile(File, /*IsText=*/true);
    if (!Buffer) {
      error() << "cannot read '" << File << "': " << Buffer.getError().message()
              << '\n';
      return RunIOError;
    }
    SM = SourceMgr();
    SM.AddNewSourceBuffer(std::move(*Buffer), SMLoc());
    DiagnosticEngine Diag(&SM, File);
    M = parseModule(SM, Diag);
    if (!M || failed(verifyModule(*M, Diag)))
      return RunInvalidInput;
    return RunSuccess;
  };
  if (PlanFolder) {
    SmallString<256> First(Options.ProgramFile);
    sys::path::append(First, "forward0.air");
    if (!sys::fs::exists(First))
      return fail(RunIOError,
                  createStringError(inconvertibleErrorCode(),
                                    "'" + Options.ProgramFile +
                                        "' holds no forward program "
                                        "(forward0.air); `autopar MODEL -o "
                                        "DIR --forward-programs` writes them"));
    if (int Code = Parse(First))
      return Code;
    int64_t Stage = getPipelineStage(*M, Comm.getRank());
    if (Stage) {
      SmallString<256> Mine(Options.ProgramFile);
      sys::path::append(Mine, "forward" + std::to_string(Stage) + ".air");
      if (int Code = Parse(Mine))
        return Code;
      ProgramFile = Mine.str().str();
    } else {
      ProgramFile = First.str().str();
    }
  } else if (int Code = Parse(ProgramFile)) {
    return Code;
  }
  Expected<const Graph *> G = selectGraph(*M, Options.GraphName);
  if (!G)
    return fail(RunBadOptions, G.takeError());
  if (Error E = Executor::checkStaticShapes(**G))
    return fail(RunInvalidInput, std::move(E));
  if (const Mesh *Cluster =
          (*G)->getMeshes().empty() ? nullptr : &(*G)->getMeshes()[0])
    if (PlanFolder)
      if (Error E = checkMeshSize(*Cluster, Comm.getNumRanks()))
        return fail(RunBadOptions, std::move(E));

  std::vector<HostTensor> Inputs;
  if (int Code = readInputs(**G, Options, Inputs, /*IgnoreUnknown=*/PlanFolder))
    return Code;

  ExecutorOptions ExecOptions = ExecutorOptions::forProgram(
      ProgramFile, Options.WeightsDir, Options.InitSeed);
  Expected<std::unique_ptr<Executor>> Exec =
      Executor::create(**G, Backend, ExecOptions);
  if (!Exec)
    return fail(RunIOError, Exec.takeError());
  Expected<std::vector<HostTensor>> Results = (*Exec)->run(Inputs);
  if (!Results)
    return fail(RunFailure, Results.takeError());
  // In a job of several ranks (mpirun), each rank writes DIR/rank<N>.
  SmallString<256> OutputDir(Options.OutputDir);
  if (Comm.getNumRanks() > 1)
    sys::path::append(OutputDir, "rank" + std::to_string(Comm.getRank()));
  return writeOutputs(**G, *Results, OutputDir);
}
