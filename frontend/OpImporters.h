//===- OpImporters.h - Importers shared across files ------------*- C++ -*-===//
//
// The op importers of OnnxOps.def that live outside OpImporters.cpp: the
// sequence and optional ops (SequenceImporters.cpp), the loops unrolled
// (LoopImporters.cpp) and the quantized ops (QuantizedImporters.cpp), and
// what they share with OpImporters.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_OPIMPORTERS_H
#define AUTOPAR_FRONTEND_OPIMPORTERS_H

#include "frontend/GraphImporter.h"
#include "frontend/NodeImporter.h"

namespace autopar {

/// Every input of the node, absent ones as null.
llvm::SmallVector<Value *, 4> getInputs(NodeImporter &N);
/// Whether the node's first Count inputs are given; reports the first that
/// is not.
bool requireInputs(NodeImporter &N, unsigned Count);
/// One node of Op named after the node (its first output and Suffix); its
/// result, or null (reported).
Value *createValue(NodeImporter &N, OpId Op, llvm::ArrayRef<Value *> Operands,
                   llvm::StringRef Suffix, AttrDict Attrs = AttrDict());
/// Parts stacked along a new axis Axis of the result (Unsqueeze each, each
/// named with PartSuffix, then Concat), named Name (a fresh name when
/// empty); null when reported.
Value *stackTensors(NodeImporter &N, llvm::ArrayRef<Value *> Parts,
                    int64_t Axis, llvm::StringRef Name,
                    llvm::StringRef PartSuffix);

/// Whether default-domain op OpType may read a sequence (an optional
/// included): the sequence and optional ops, Identity, and the control
/// flow ops whose bodies are imported.
bool readsSequences(llvm::StringRef OpType);

/// The value of a one-element integer or bool tensor when autopar knows it
/// at import (a constant, or shape arithmetic: ir/ShapeValues.h).
std::optional<int64_t> getKnownScalar(const Value *V);

/// What one run of a graph attribute (a loop's body, a branch) costs: the
/// forward FLOPs of its nodes (ir/OpFlops.h; none for a node whose FLOPs are
/// unknown) and what the kernels among them read and write, float elements
/// (priced at the plan's precision) apart from other bytes.
struct BodyWork {
  int64_t Flops = 0, FloatElements = 0, OtherBytes = 0;
  /// Whether every size the body's kernels read or write is static (the
  /// counts are a floor otherwise, and not recorded).
  bool Static = true;
  BodyWork &operator+=(const Node &Kernel);
  bool operator<(const BodyWork &O) const;
};

/// The work of one run of Body given Inputs, imported quietly and erased
/// (GraphImporter::measureBody); nullopt when the body does not import.
std::optional<BodyWork> measureBody(NodeImporter &N,
                                    const onnx::GraphProto &Body,
                                    llvm::ArrayRef<OnnxValue> Inputs);

/// Keeps N as Opaque (keepOpaque) for Why, running a body Runs times: with
/// Work measured and static, the node records body_runs, body_flops,
/// body_float_elements and body_other_bytes, which price it (ir/OpFlops.h,
/// cost/OpCost.cpp), and the warning says it is priced How; otherwise the
/// warning says why only its inputs and outputs are priced.
LogicalResult keepOpaqueRunning(NodeImporter &N, llvm::StringRef Why,
                                const std::optional<BodyWork> &Work,
                                int64_t Runs, llvm::StringRef How);

/// Keeps the node as Opaque, typed by ONNX's inference or the model's
/// declarations. Reason says why an op autopar knows is kept so (the import
/// warns with it); empty for ops autopar does not know. Extra attributes
/// (what a body not unrolled costs: frontend/LoopImporters.cpp) are added to
/// the node's.
LogicalResult keepOpaque(NodeImporter &N, llvm::StringRef Reason,
                         const AttrDict &Extra = AttrDict());

// Sequences and optionals (SequenceImporters.cpp).
LogicalResult importSequenceEmpty(NodeImporter &N);
LogicalResult importSequenceConstruct(NodeImporter &N);
LogicalResult importSplitToSequence(NodeImporter &N);
LogicalResult importSequenceAt(NodeImporter &N);
LogicalResult importSequenceInsert(NodeImporter &N);
LogicalResult importSequenceErase(NodeImporter &N);
LogicalResult importSequenceLength(NodeImporter &N);
LogicalResult importConcatFromSequence(NodeImporter &N);
LogicalResult importOptional(NodeImporter &N);
LogicalResult importOptionalHasElement(NodeImporter &N);
LogicalResult importOptionalGetElement(NodeImporter &N);

// Bodies imported once per iteration (LoopImporters.cpp).
LogicalResult importLoop(NodeImporter &N);
LogicalResult importScan(NodeImporter &N);
LogicalResult importSequenceMap(NodeImporter &N);

// Quantized ops (QuantizedImporters.cpp).
/// QuantizeLinear: `output_dtype` (opset 21) becomes `output_type`.
LogicalResult importQuantizeLinear(NodeImporter &N);
/// DequantizeLinear: an `output_dtype` (opset 23) must be the scale's type.
LogicalResult importDequantizeLinear(NodeImporter &N);
/// QLinearMatMul as MatMulInteger, the two input scales applied to its i32
/// sums, and QuantizeLinear to the output's scale and zero point.
LogicalResult importQLinearMatMul(NodeImporter &N);
/// QLinearConv as ConvInteger, its i32 bias added, the input scales (the
/// weights' per output channel) applied, and QuantizeLinear.
LogicalResult importQLinearConv(NodeImporter &N);

// Resampling and Lp pools (ImageImporters.cpp).
/// Resize's older forms brought to opset 19's: Resize-10 and Upsample
/// asymmetric with onnxruntime's "simple" nearest rounding, opset 11's
/// empty roi and scales dropped.
LogicalResult importResize(NodeImporter &N);
LogicalResult importUpsample(NodeImporter &N);
/// LpPool and GlobalLpPool (Op): opset 1's float p as an integer.
template <OpId Op> LogicalResult importLpPool(NodeImporter &N);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_OPIMPORTERS_H
