//===- Diagnostics.h - Reporting errors in user input -----------*- C++ -*-===//
//
// Errors in user input (IR text, models, options) are reported through a
// DiagnosticEngine and the functions that found them return failure().
// Text locations print as `file:line:col: error: ...` through SourceMgr;
// a node without a text location is named as `file: node 'name' (Op)`.
// Broken invariants are assertions, not diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_DIAGNOSTICS_H
#define AUTOPAR_IR_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <string>

namespace autopar {

class Node;

/// Success or failure of an operation that reported its own diagnostics.
class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success() { return LogicalResult(false); }
  static LogicalResult failure() { return LogicalResult(true); }
  bool failed() const { return Failed; }
  bool succeeded() const { return !Failed; }

private:
  explicit LogicalResult(bool Failed) : Failed(Failed) {}
  bool Failed;
};

inline LogicalResult success() { return LogicalResult::success(); }
/// success() when IsSuccess, else failure().
inline LogicalResult success(bool IsSuccess) {
  return IsSuccess ? success() : LogicalResult::failure();
}
inline LogicalResult failure() { return LogicalResult::failure(); }
inline bool failed(LogicalResult R) { return R.failed(); }
inline bool succeeded(LogicalResult R) { return R.succeeded(); }

class DiagnosticEngine {
public:
  /// SM may be null when there is no text; FileName names the input in
  /// diagnostics that have no text location.
  DiagnosticEngine(const llvm::SourceMgr *SM, llvm::StringRef FileName,
                   llvm::raw_ostream &OS = llvm::errs())
      : SM(SM), FileName(FileName.str()), OS(OS) {}

  void error(llvm::SMLoc Loc, const llvm::Twine &Message);
  void warning(llvm::SMLoc Loc, const llvm::Twine &Message);
  void note(llvm::SMLoc Loc, const llvm::Twine &Message);
  /// An error about a node, located at its text if it has one.
  void error(const Node &N, const llvm::Twine &Message);
  /// A problem with a node of a model that has no text locations:
  /// `file: node 'name' (OpType): error: message`.
  void nodeError(llvm::StringRef NodeName, llvm::StringRef OpType,
                 const llvm::Twine &Message);
  void nodeWarning(llvm::StringRef NodeName, llvm::StringRef OpType,
                   const llvm::Twine &Message);

  unsigned getNumErrors() const { return NumErrors; }
  /// While quiet, nothing is printed (a trial that may be given up: a loop
  /// body imported only to be measured); errors are still counted.
  void setQuiet(bool Q) { Quiet = Q; }
  bool isQuiet() const { return Quiet; }
  /// Forgets the errors counted after the first Count (those of a trial).
  void dropErrorsAfter(unsigned Count) {
    NumErrors = std::min(NumErrors, Count);
  }
  llvm::raw_ostream &getStream() const { return OS; }
  llvm::StringRef getFileName() const { return FileName; }

private:
  void emit(llvm::SMLoc Loc, llvm::SourceMgr::DiagKind Kind,
            const llvm::Twine &Message);
  void emitNode(llvm::StringRef NodeName, llvm::StringRef OpType,
                llvm::StringRef Kind, const llvm::Twine &Message);

  const llvm::SourceMgr *SM;
  std::string FileName;
  llvm::raw_ostream &OS;
  unsigned NumErrors = 0;
  bool Quiet = false;
};

/// Why a tool stops: the exit code it returns and the message it prints
/// (empty when a diagnostic already said it). The drivers' steps return it
/// as an llvm::Error.
class ExitError : public llvm::ErrorInfo<ExitError> {
public:
  static char ID;
  ExitError(int Code, std::string Message)
      : Code(Code), Message(std::move(Message)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  int getCode() const { return Code; }

private:
  int Code;
  std::string Message;
};

/// An ExitError.
llvm::Error makeExitError(int Code, const llvm::Twine &Message = "");

/// Prints "Tool: error: Message" and a newline to standard error: in one
/// write when standard error is not a terminal, so that the lines of ranks
/// that share it (under mpirun, through one pipe) and mpirun's own do not
/// interleave inside the line; in colour on a terminal.
void printToolError(llvm::StringRef Tool, const llvm::Twine &Message);

/// 0 for success; else prints E's message as Tool's error (printToolError)
/// and returns its code (OtherCode for an error that is not an ExitError).
int reportExitError(llvm::Error E, llvm::StringRef Tool, int OtherCode);

} // namespace autopar

#endif // AUTOPAR_IR_DIAGNOSTICS_H
