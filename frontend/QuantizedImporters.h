//===- QuantizedImporters.h - Quantized ONNX ops to IR ops ------*- C++ -*-===//
//
// The importers of OnnxOps.def for quantized ops that need more than a one
// to one mapping (QuantizedImporters.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_QUANTIZEDIMPORTERS_H
#define AUTOPAR_FRONTEND_QUANTIZEDIMPORTERS_H

#include "frontend/NodeImporter.h"

namespace autopar {

/// QuantizeLinear: `output_dtype` (opset 21) becomes `output_type`.
LogicalResult importQuantizeLinear(NodeImporter &N);
/// DequantizeLinear: an `output_dtype` (opset 23) must be the scale's type.
LogicalResult importDequantizeLinear(NodeImporter &N);
/// QLinearMatMul as MatMulInteger, the two input scales applied to its i32
/// sums, and QuantizeLinear to the output's scale and zero point.
LogicalResult importQLinearMatMul(NodeImporter &N);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_QUANTIZEDIMPORTERS_H
