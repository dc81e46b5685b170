//===- OpCost.h - Time of one node on one rank ------------------*- C++ -*-===//
//
// The per-op cost model: for a node whose loop Split.Loop is split
// Split.Degree ways (ir/OpLoops.h), the FLOPs, the HBM bytes and the seconds
// of its forward and its backward on one rank. Time is the larger of compute
// (GEMMs at the shape-dependent efficiency of cost/GemmEfficiency.h, other
// ops at the vector peak) and memory traffic at achievable bandwidth, plus
// one kernel launch for every op that is not a view. docs/CostModel.md
// ("Per-op cost") lists the rules and their sources.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_OPCOST_H
#define AUTOPAR_COST_OPCOST_H

#include "cost/Cluster.h"
#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace autopar {

class Graph;
class Node;
class Value;

// AttentionKernel and its names are the plan's (ir/Plan.h).

/// How training runs, as far as per-op costs care.
struct CostSettings {
  /// Precision of GEMMs; float activations, weights and gradients are held
  /// in it (mixed precision keeps fp32 master weights: cost/Memory.h).
  Precision Compute = Precision::BF16;
  AttentionKernel Attention = AttentionKernel::Materialized;
};

/// Which loop of a node is split, and how many ways.
struct LoopSplit {
  int Loop = OpLoops::NoLoop;
  int64_t Degree = 1;
};

struct NodeCost {
  double FwdFlops = 0, BwdFlops = 0;
  double FwdBytes = 0, BwdBytes = 0;
  double FwdSeconds = 0, BwdSeconds = 0;
};

/// How values depend on parameters and inputs. A value needs a gradient in
/// training when it is a float value computed from a float parameter (graph
/// inputs are data; integer values carry none). A value is an activation
/// when it depends on a graph input: it is computed every step; the others
/// (weight transposes, cached masks and rotary tables) once.
class GradientFlow {
public:
  explicit GradientFlow(const Graph &G);
  bool needsGrad(const Value *V) const { return V && Grad.contains(V); }
  /// Whether a gradient flows into operand I of N (its value needs one and
  /// the op passes one there: ir/OpFacts.h, isGradientOperand).
  bool needsGrad(const Node &N, unsigned I) const {
    return needsGrad(N.getOperand(I)) && isGradientOperand(N.getOp(), I);
  }
  bool isActivation(const Value *V) const {
    return V && Activation.contains(V);
  }

private:
  llvm::DenseSet<const Value *> Grad, Activation;
};

/// Bytes one element of V takes in training: float tensors in the compute
/// precision, others at their own width.
double trainingElementBytes(const Value &V, const CostSettings &S);

/// Elements of V on one rank when the node that reads or writes it through
/// Map splits Split.Loop; V's shape must be static.
double localElements(const Value &V, llvm::ArrayRef<int> Map, LoopSplit Split);

/// The cost of N on one rank. Loops are N's (getOpLoops), nullopt for a node
/// that has none (then Split must be unsplit). N's shapes must be static.
NodeCost getNodeCost(const Node &N, const std::optional<OpLoops> &Loops,
                     LoopSplit Split, const DeviceSpec &Device,
                     const CostSettings &Settings, const GradientFlow &Flow);

} // namespace autopar

#endif // AUTOPAR_COST_OPCOST_H
