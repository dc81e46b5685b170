//===- ModelReader.cpp - Reads ONNX ModelProto files safely ---------------===//

#include "frontend/ModelReader.h"

#include "onnx/onnx_pb.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace autopar;
using namespace llvm;

bool autopar::isTextModelPath(StringRef Path) {
  StringRef Ext = sys::path::extension(Path);
  return Ext == ".pbtxt" || Ext == ".textproto";
}

namespace {
/// Collects text-format parse errors as diagnostics at their line and column.
class TextErrorCollector : public google::protobuf::io::ErrorCollector {
public:
  TextErrorCollector(DiagnosticEngine &Diag, SourceMgr &SM)
      : Diag(Diag), SM(SM) {}
  void AddError(int Line, google::protobuf::io::ColumnNumber Column,
                const std::string &Message) override {
    // Protobuf counts lines and columns from 0; a column past the end of a
    // line (or a line of -1 for "whole input") is clamped into the buffer.
    SMLoc Loc;
    if (Line >= 0)
      Loc = SM.FindLocForLineAndColumn(SM.getMainFileID(), Line + 1,
                                       Column >= 0 ? Column + 1 : 1);
    Diag.error(Loc, "invalid ONNX text: " + Message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string &) override {}

private:
  DiagnosticEngine &Diag;
  SourceMgr &SM;
};
} // namespace

std::unique_ptr<onnx::ModelProto>
autopar::readModelProto(StringRef Path, DiagnosticEngine &Diag) {
  // Protobuf would print its own complaints to stderr; ours are enough.
  google::protobuf::LogSilencer Silence;
  uint64_t Size = 0;
  if (std::error_code EC = sys::fs::file_size(Path, Size)) {
    Diag.error(SMLoc(), "cannot read '" + Path + "': " + EC.message());
    return nullptr;
  }
  if (Size > uint64_t(MaxModelFileBytes)) {
    Diag.error(SMLoc(), "the model is " + Twine(Size) +
                            " bytes; ONNX files are limited to 2 GiB, so "
                            "store the weights as external data");
    return nullptr;
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(Path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!Buffer) {
    Diag.error(SMLoc(),
               "cannot read '" + Path + "': " + Buffer.getError().message());
    return nullptr;
  }
  return parseModelProto((*Buffer)->getBuffer(), isTextModelPath(Path), Path,
                         Diag);
}

std::unique_ptr<onnx::ModelProto>
autopar::parseModelProto(StringRef Bytes, bool AsText, StringRef Path,
                         DiagnosticEngine &Diag) {
  google::protobuf::LogSilencer Silence;
  if (Bytes.size() > uint64_t(MaxModelFileBytes)) {
    Diag.error(SMLoc(), "the model is larger than 2 GiB");
    return nullptr;
  }
  auto Model = std::make_unique<onnx::ModelProto>();
  if (AsText) {
    SourceMgr SM;
    SM.AddNewSourceBuffer(MemoryBuffer::getMemBuffer(Bytes, Path), SMLoc());
    DiagnosticEngine TextDiag(&SM, Path, Diag.getStream());
    TextErrorCollector Errors(TextDiag, SM);
    google::protobuf::TextFormat::Parser Parser;
    Parser.RecordErrorsTo(&Errors);
    Parser.SetRecursionLimit(ModelRecursionLimit);
    if (!Parser.ParseFromString(Bytes.str(), Model.get())) {
      // The collector has located the problem; say something if it did not.
      if (TextDiag.getNumErrors() == 0)
        Diag.error(SMLoc(), "invalid ONNX text model");
      return nullptr;
    }
    return Model;
  }

  google::protobuf::io::CodedInputStream Stream(
      reinterpret_cast<const uint8_t *>(Bytes.data()), Bytes.size());
  Stream.SetTotalBytesLimit(MaxModelFileBytes);
  Stream.SetRecursionLimit(ModelRecursionLimit);
  if (!Model->ParseFromCodedStream(&Stream) ||
      !Stream.ConsumedEntireMessage() || !Stream.ExpectAtEnd()) {
    Diag.error(SMLoc(), "not a valid ONNX model: the protobuf message is "
                        "truncated, corrupt or nested too deeply");
    return nullptr;
  }
  return Model;
}
