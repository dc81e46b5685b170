//===- OpFlops.h - Forward FLOPs of one node --------------------*- C++ -*-===//
//
// An estimate of the floating-point operations a node performs in the
// forward pass, from its operand and result types. The convention is the one
// of Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", appendix): a multiply-add counts as 2
// FLOPs, so a [M, K] x [K, N] product costs 2*M*N*K. Biases of Linear/Gemm
// are not counted (as there). Elementwise ops cost a fixed number of FLOPs
// per output element; data movement costs nothing. OpFlops.cpp lists the
// constant of every op.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_OPFLOPS_H
#define AUTOPAR_IR_OPFLOPS_H

#include <cstdint>
#include <optional>

namespace autopar {

class Node;

/// Forward FLOPs of N, or nullopt when a shape it needs is not static (or
/// the op's cost is unknown: an Opaque node of an op type without an
/// estimate). Data movement is 0 whatever the
/// shapes.
std::optional<int64_t> getForwardFlops(const Node &N);

/// Forward FLOPs of an Opaque node, estimated from its ONNX op type and its
/// types, or from the body it runs (ir/OpaqueFlops.cpp lists the formulas);
/// nullopt when there is no estimate.
std::optional<int64_t> getOpaqueFlops(const Node &N);

/// The static sizes of an LSTM, GRU or RNN node.
struct RecurrentShape {
  int64_t Seq, Batch, Input, Hidden, Dirs;
  unsigned Gates;
};
std::optional<RecurrentShape> getRecurrentShape(const Node &N);

} // namespace autopar

#endif // AUTOPAR_IR_OPFLOPS_H
