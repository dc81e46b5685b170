//===- Diagnostics.cpp - Reporting errors in user input -------------------===//

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/Support/WithColor.h"

using namespace autopar;
using namespace llvm;

void DiagnosticEngine::emit(SMLoc Loc, SourceMgr::DiagKind Kind,
                            const Twine &Message) {
  if (Kind == SourceMgr::DK_Error)
    ++NumErrors;
  if (Quiet)
    return;
  if (SM && Loc.isValid()) {
    SM->PrintMessage(OS, Loc, Kind, Message);
    return;
  }
  StringRef KindName = Kind == SourceMgr::DK_Error     ? "error"
                       : Kind == SourceMgr::DK_Warning ? "warning"
                                                       : "note";
  OS << FileName << ": " << KindName << ": " << Message << '\n';
}

void DiagnosticEngine::error(SMLoc Loc, const Twine &Message) {
  emit(Loc, SourceMgr::DK_Error, Message);
}

void DiagnosticEngine::warning(SMLoc Loc, const Twine &Message) {
  emit(Loc, SourceMgr::DK_Warning, Message);
}

void DiagnosticEngine::note(SMLoc Loc, const Twine &Message) {
  emit(Loc, SourceMgr::DK_Note, Message);
}

void DiagnosticEngine::error(const Node &N, const Twine &Message) {
  if (SM && N.getLoc().isValid()) {
    emit(N.getLoc(), SourceMgr::DK_Error,
         "'" + N.getOpName() + "' node: " + Message);
    return;
  }
  std::string Name = N.getName().str();
  if (Name.empty() && N.getNumResults() != 0)
    Name = "%" + N.getResult(0)->getName().str();
  nodeError(Name, N.getOpName(), Message);
}

void DiagnosticEngine::emitNode(StringRef NodeName, StringRef OpType,
                                StringRef Kind, const Twine &Message) {
  if (Quiet)
    return;
  OS << FileName << ": node '" << NodeName << "' (" << OpType << "): " << Kind
     << ": " << Message << '\n';
}

void DiagnosticEngine::nodeError(StringRef NodeName, StringRef OpType,
                                 const Twine &Message) {
  ++NumErrors;
  emitNode(NodeName, OpType, "error", Message);
}

void DiagnosticEngine::nodeWarning(StringRef NodeName, StringRef OpType,
                                   const Twine &Message) {
  emitNode(NodeName, OpType, "warning", Message);
}

char ExitError::ID;

llvm::Error autopar::makeExitError(int Code, const llvm::Twine &Message) {
  return llvm::make_error<ExitError>(Code, Message.str());
}

void autopar::printToolError(llvm::StringRef Tool, const llvm::Twine &Message) {
  llvm::raw_ostream &Err = llvm::errs();
  if (Err.has_colors()) {
    llvm::WithColor::error(Err, Tool) << Message << '\n';
    return;
  }
  // errs() is unbuffered: one string, one write.
  std::string Line;
  llvm::raw_string_ostream(Line) << Tool << ": error: " << Message << '\n';
  Err << Line;
}

int autopar::reportExitError(llvm::Error E, llvm::StringRef Tool,
                             int OtherCode) {
  int Code = 0;
  llvm::handleAllErrors(
      std::move(E),
      [&](const ExitError &X) {
        if (!X.message().empty())
          printToolError(Tool, X.message());
        Code = X.getCode();
      },
      [&](const llvm::ErrorInfoBase &X) {
        printToolError(Tool, X.message());
        Code = OtherCode;
      });
  return Code;
}
