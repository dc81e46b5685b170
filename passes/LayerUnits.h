//===- LayerUnits.h - A graph as a sequence of layers to plan ---*- C++ -*-===//
//
// The planner works on *units*: the nodes of one `layer` annotation
// (detect-layers: the embedding, each block, the head), in layer order;
// nodes without the annotation form a unit of their own that comes first,
// and a graph without layers is one unit. Nodes that read no activation
// (constants, weight transposes, cached masks) are in no unit: they run
// once and their users read them like parameters. Units with the same
// structure (ops, attributes, types, wiring) share a class and are solved
// once.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_LAYERUNITS_H
#define AUTOPAR_PASSES_LAYERUNITS_H

#include "cost/OpCost.h"

#include <string>
#include <vector>

namespace autopar {

struct LayerUnit {
  /// The `layer` annotation, -1 for nodes without one.
  int64_t Layer = -1;
  std::vector<const Node *> Nodes;
  /// Equal classes mean equal structure, node for node.
  unsigned Class = 0;
  std::string Signature;
};

std::vector<LayerUnit> getLayerUnits(const Graph &G, const GradientFlow &Flow);

} // namespace autopar

#endif // AUTOPAR_PASSES_LAYERUNITS_H
