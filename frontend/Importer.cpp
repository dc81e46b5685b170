//===- Importer.cpp - ONNX models to autopar IR ---------------------------===//

#include "frontend/Importer.h"
#include "frontend/ModelReader.h"

#include "onnx/onnx_pb.h"

using namespace autopar;
using namespace llvm;

std::unique_ptr<Module> autopar::importOnnxModel(StringRef Path,
                                                 const ImportOptions &Options,
                                                 DiagnosticEngine &Diag) {
  std::unique_ptr<onnx::ModelProto> Model = readModelProto(Path, Diag);
  if (!Model)
    return nullptr;
  return importModelProto(*Model, Path, Options, Diag);
}
