//===- ShapeFunctionsRecurrent.cpp - LSTM, GRU and RNN --------------------===//
//
// ONNX's recurrent layers: X [seq, batch, input] (layout 1: [batch, seq,
// input]), W [dirs, gates * hidden, input], R [dirs, gates * hidden,
// hidden], B [dirs, 2 * gates * hidden]?, sequence_lens [batch]?,
// initial_h (and LSTM's initial_c) [dirs, batch, hidden]?, LSTM's P [dirs,
// 3 * hidden]?. Y is [seq, dirs, batch, hidden] ([batch, seq, dirs,
// hidden]), Y_h and Y_c [dirs, batch, hidden] ([batch, dirs, hidden]).
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

unsigned autopar::getRecurrentGates(OpId Op) {
  return Op == OpId::LSTM ? 4 : Op == OpId::GRU ? 3 : 1;
}

InferResult autopar::inferRecurrent(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  for (unsigned I : {0u, 1u, 2u})
    if (Error E = checkRank(Ctx, I, 3))
      return E;
  for (unsigned I : {1u, 2u})
    if (Error E = checkSameElementTypeAs(Ctx, I, 0))
      return E;
  int64_t Hidden = Ctx.getIntAttr("hidden_size", 0);
  if (Hidden <= 0)
    return Ctx.error("'hidden_size' must be positive, got " + Twine(Hidden));
  int64_t Layout = Ctx.getIntAttr("layout", 0);
  if (Layout != 0 && Layout != 1)
    return Ctx.error("'layout' must be 0 or 1, got " + Twine(Layout));
  StringRef Direction = "forward";
  if (const Attribute *A = Ctx.getAttr("direction"))
    Direction = A->getString();
  if (Direction != "forward" && Direction != "reverse" &&
      Direction != "bidirectional")
    return Ctx.error("'direction' must be forward, reverse or bidirectional, "
                     "got '" +
                     Direction + "'");
  int64_t Dirs = Direction == "bidirectional" ? 2 : 1;
  int64_t GateRows = getRecurrentGates(Ctx.getNode().getOp()) * Hidden;
  const Dim &Seq = dimOf(Ctx, 0, Layout ? 1 : 0);
  const Dim &Batch = dimOf(Ctx, 0, Layout ? 0 : 1);
  const Dim &Input = dimOf(Ctx, 0, 2);
  struct Expect {
    unsigned Operand;
    Dim Sizes[3];
  };
  for (const Expect &E :
       {Expect{1, {Dim::get(Dirs), Dim::get(GateRows), Input}},
        Expect{2, {Dim::get(Dirs), Dim::get(GateRows), Dim::get(Hidden)}}})
    for (unsigned D = 0; D != 3; ++D)
      if (!mayEqual(dimOf(Ctx, E.Operand, D), E.Sizes[D]))
        return Ctx.error(describe(Ctx, E.Operand) + " must be [" +
                         dimStr(E.Sizes[0]) + ", " + dimStr(E.Sizes[1]) + ", " +
                         dimStr(E.Sizes[2]) + "] (direction '" + Direction +
                         "', 'hidden_size' " + Twine(Hidden) + ")");
  TensorType Y(
      elementTypeOf(Ctx, 0),
      Layout ? ArrayRef<Dim>{Batch, Seq, Dim::get(Dirs), Dim::get(Hidden)}
             : ArrayRef<Dim>{Seq, Dim::get(Dirs), Batch, Dim::get(Hidden)});
  TensorType State(
      elementTypeOf(Ctx, 0),
      Layout ? ArrayRef<Dim>{Batch, Dim::get(Dirs), Dim::get(Hidden)}
             : ArrayRef<Dim>{Dim::get(Dirs), Batch, Dim::get(Hidden)});
  Types Result;
  for (unsigned I = 0, E = Ctx.getNode().getNumResults(); I != E; ++I)
    Result.push_back(I == 0 ? Y : State);
  return Result;
}
