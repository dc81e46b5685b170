//===- LoopImporters.cpp - Loop, Scan and SequenceMap unrolled ------------===//
//
// A loop whose iterations autopar can count at import is unrolled: its body
// is imported once per iteration (GraphImporter::importBody, which forgets
// the body's names after each), with the iteration number and index as
// constants and the carried values passed on. Scan outputs are stacked with
// Unsqueeze and Concat. A Loop or Scan that cannot be counted, or whose
// unrolling is over MaxUnrolledNodes, stays Opaque with a warning that says
// why; SequenceMap has no Opaque form (its output is a sequence), so it is
// an error then. An Opaque Loop or Scan whose iterations can be counted is
// priced as its body times the count: one iteration is imported, measured
// and erased (GraphImporter::measureBody), and the node records what it
// found (body_runs, body_flops, body_float_elements, body_other_bytes:
// ir/OpFlops.h and cost/OpCost.cpp read them).
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphImporter.h"
#include "frontend/OpImporters.h"
#include "ir/OpFacts.h"
#include "ir/OpFlops.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

#include "onnx/onnx_pb.h"

using namespace autopar;
using namespace llvm;

/// At most this many nodes (iterations times the body's nodes) are imported
/// for one loop: past it a loop stays Opaque, as a graph that large would
/// slow every pass after import for little gain in the plan.
static constexpr int64_t MaxUnrolledNodes = 4096;

/// The nodes of G, those of its subgraphs included.
static int64_t countNodes(const onnx::GraphProto &G) {
  int64_t Count = G.node_size();
  for (const onnx::NodeProto &N : G.node())
    for (const onnx::AttributeProto &A : N.attribute()) {
      if (A.has_g())
        Count += countNodes(A.g());
      for (const onnx::GraphProto &Sub : A.graphs())
        Count += countNodes(Sub);
    }
  return Count;
}

/// Whether any node of G (or of its subgraphs) reads Name.
static bool readsName(const onnx::GraphProto &G, StringRef Name) {
  for (const onnx::NodeProto &N : G.node()) {
    if (is_contained(N.input(), Name))
      return true;
    for (const onnx::AttributeProto &A : N.attribute()) {
      if (A.has_g() && readsName(A.g(), Name))
        return true;
      for (const onnx::GraphProto &Sub : A.graphs())
        if (readsName(Sub, Name))
          return true;
    }
  }
  for (const onnx::ValueInfoProto &V : G.output())
    if (V.name() == Name)
      return true;
  return false;
}

/// Graph attribute Name of the node; reports and returns null when missing.
static const onnx::GraphProto *getBody(NodeImporter &N, StringRef Name) {
  const onnx::AttributeProto *A = N.getAttr(Name);
  if (A && A->has_g())
    return &A->g();
  N.error("attribute '" + Name + "' is missing or not a graph");
  return nullptr;
}

/// The text of an unroll over budget.
static std::string overBudget(int64_t Iterations, int64_t BodyNodes,
                              StringRef What = "iterations") {
  return (Twine(Iterations) + " " + What + " x " + Twine(BodyNodes) +
          (BodyNodes == 1 ? " node" : " nodes") +
          " is over the unroll budget of " + Twine(MaxUnrolledNodes) + " nodes")
      .str();
}

/// Whether Iterations of a body of BodyNodes fit the budget.
static bool fitsBudget(int64_t Iterations, int64_t BodyNodes) {
  return Iterations <= MaxUnrolledNodes / std::max<int64_t>(BodyNodes, 1);
}

/// The tensors of a body's scan outputs; reports a sequence.
static bool takeScanOutputs(NodeImporter &N, ArrayRef<OnnxValue> Outs,
                            std::vector<std::vector<Value *>> &Stacks) {
  for (size_t J = 0; J != Stacks.size(); ++J) {
    const OnnxValue &V = Outs[Outs.size() - Stacks.size() + J];
    if (V.isSequence()) {
      N.error("scan output #" + Twine(J) + " of the body is a sequence");
      return false;
    }
    Stacks[J].push_back(V.Tensor);
  }
  return true;
}

/// A + B, or the largest int64 past it.
static int64_t addCapped(int64_t A, int64_t B) {
  int64_t R;
  return AddOverflow(A, B, R) ? std::numeric_limits<int64_t>::max() : R;
}

BodyWork &BodyWork::operator+=(const Node &Kernel) {
  if (runsNoKernel(Kernel.getOp()))
    return *this;
  Flops = addCapped(Flops, getForwardFlops(Kernel).value_or(0));
  auto Traffic = [&](const Value *V) {
    std::optional<int64_t> Elements =
        V ? V->getType().getStaticNumElements() : std::nullopt;
    if (!Elements) {
      Static &= !V;
      return;
    }
    if (isFloatElementType(V->getType().getElementType()))
      FloatElements = addCapped(FloatElements, *Elements);
    else
      OtherBytes =
          addCapped(OtherBytes, V->getType().getStaticSizeInBytes().value_or(
                                    std::numeric_limits<int64_t>::max()));
  };
  for (const Value *O : Kernel.getOperands())
    Traffic(O);
  for (const Value *R : Kernel.getResults())
    Traffic(R);
  return *this;
}

bool BodyWork::operator<(const BodyWork &O) const {
  return std::tie(Flops, FloatElements, OtherBytes) <
         std::tie(O.Flops, O.FloatElements, O.OtherBytes);
}

std::optional<BodyWork> autopar::measureBody(NodeImporter &N,
                                             const onnx::GraphProto &Body,
                                             ArrayRef<OnnxValue> Inputs) {
  BodyWork Work;
  if (failed(N.getImporter().measureBody(Body, Inputs, N.getDisplayName(),
                                         [&](ArrayRef<const Node *> Kernels) {
                                           for (const Node *K : Kernels)
                                             Work += *K;
                                         })))
    return std::nullopt;
  return Work;
}

LogicalResult autopar::keepOpaqueRunning(NodeImporter &N, StringRef Why,
                                         const std::optional<BodyWork> &Work,
                                         int64_t Runs, StringRef How) {
  if (!Work)
    return keepOpaque(N, (Why + "; its body does not import on its own, so "
                                "only its inputs and outputs are priced")
                             .str());
  if (!Work->Static)
    return keepOpaque(N, (Why + "; its body's sizes are not static, so only "
                                "its inputs and outputs are priced")
                             .str());
  AttrDict Attrs;
  Attrs.set("body_runs", Attribute::getInt(Runs));
  Attrs.set("body_flops", Attribute::getInt(Work->Flops));
  Attrs.set("body_float_elements", Attribute::getInt(Work->FloatElements));
  Attrs.set("body_other_bytes", Attribute::getInt(Work->OtherBytes));
  return keepOpaque(N, (Why + "; priced " + How).str(), Attrs);
}

/// Loop(M?, cond?, v_initial...) with body(iter_num, cond_in, v_in...) ->
/// (cond_out, v_out..., scan_outputs...), unrolled while the trip count and
/// each iteration's condition are known.
LogicalResult autopar::importLoop(NodeImporter &N) {
  const onnx::GraphProto *Body = getBody(N, "body");
  if (!Body)
    return failure();
  GraphImporter &Importer = N.getImporter();
  int NumCarried = int(N.getNumInputs()) - 2;
  int NumScan = Body->output_size() - 1 - NumCarried;
  if (NumCarried < 0 || Body->input_size() != NumCarried + 2 || NumScan < 0) {
    N.error("the body has " + Twine(Body->input_size()) + " inputs and " +
            Twine(Body->output_size()) + " outputs for " +
            Twine(N.getNumInputs()) + " inputs of the node");
    return failure();
  }
  auto Opaque = [&](const Twine &Why) { return keepOpaque(N, Why.str()); };
  std::optional<int64_t> Trip;
  if (Value *M = N.getInput(0)) {
    Trip = getKnownScalar(M);
    if (!Trip)
      return Opaque("its trip count is unknown; bind the dimensions it "
                    "depends on with --dim to unroll it");
  }
  Value *Cond = N.getInput(1);
  std::optional<int64_t> Running = Cond ? getKnownScalar(Cond) : 1;
  if (!Running)
    return Opaque("its condition is unknown");
  if (!Trip && !Cond)
    return Opaque("it has neither a trip count nor a condition");
  if (Body->initializer_size() != 0)
    return Opaque("its body has initializers of its own");
  std::vector<OnnxValue> Carried;
  for (int I = 0; I != NumCarried; ++I) {
    std::optional<OnnxValue> V =
        Importer.lookupOnnxValue(N.getProto().input(I + 2));
    if (!V) {
      N.error("input #" + Twine(I + 2) + " (a carried value) is required");
      return failure();
    }
    Carried.push_back(std::move(*V));
  }
  bool ReadsIter = readsName(*Body, Body->input(0).name());
  bool ReadsCond = readsName(*Body, Body->input(1).name());
  // Not unrolled, a Loop whose trip count is known is priced as its first
  // iteration times the count (an upper bound where its condition can end
  // it earlier).
  // The unrolling below advances Cond and Carried to values that a roll
  // back erases: the measured body reads the node's own inputs.
  std::vector<OnnxValue> Initial = Carried;
  Value *InitialCond = Cond;
  auto OpaqueByBody = [&](const Twine &Why) {
    std::string Reason = Why.str();
    if (!Trip || *Trip <= 0)
      return keepOpaque(N, Reason);
    GraphImporter::Checkpoint Before = Importer.checkpoint();
    std::vector<OnnxValue> Inputs(2);
    if (ReadsIter)
      Inputs[0].Tensor = N.createI64Constant({0}, /*Scalar=*/true);
    if (ReadsCond)
      Inputs[1].Tensor = InitialCond ? InitialCond : N.createBoolScalar(true);
    Inputs.insert(Inputs.end(), Initial.begin(), Initial.end());
    std::optional<BodyWork> Work = measureBody(N, *Body, Inputs);
    Importer.rollBack(Before);
    return keepOpaqueRunning(N, Reason, Work, *Trip,
                             "as its body times " + std::to_string(*Trip) +
                                 " iterations");
  };
  int64_t BodyNodes = countNodes(*Body);
  if (Trip && *Trip > 0 && !fitsBudget(*Trip, BodyNodes))
    return OpaqueByBody(overBudget(*Trip, BodyNodes));
  GraphImporter::Checkpoint Mark = Importer.checkpoint();
  std::vector<std::vector<Value *>> Scans(NumScan);
  int64_t Before = Importer.getNumImportedNodes();
  int64_t Iter = 0;
  for (; (!Trip || Iter < *Trip) && *Running; ++Iter) {
    if (!fitsBudget(Iter + 1, BodyNodes)) {
      Importer.rollBack(Mark);
      return Opaque("its condition does not end it within " + Twine(Iter) +
                    " iterations: " + overBudget(Iter + 1, BodyNodes));
    }
    std::vector<OnnxValue> Inputs(2);
    if (ReadsIter)
      Inputs[0].Tensor = N.createI64Constant({Iter}, /*Scalar=*/true);
    // Known to be true: a constant, not a chain of conditions (which shape
    // arithmetic follows only so deep).
    if (ReadsCond)
      Inputs[1].Tensor = Iter == 0 && Cond ? Cond : N.createBoolScalar(true);
    Inputs.insert(Inputs.end(), Carried.begin(), Carried.end());
    std::vector<OnnxValue> Outs;
    if (failed(Importer.importBody(*Body, Inputs, Outs, N.getDisplayName())) ||
        !takeScanOutputs(N, Outs, Scans))
      return failure();
    if (Outs[0].isSequence()) {
      N.error("the body's condition output is a sequence");
      return failure();
    }
    // Loops in the body unroll too: what was imported counts.
    if (Importer.getNumImportedNodes() - Before > MaxUnrolledNodes) {
      Importer.rollBack(Mark);
      return OpaqueByBody("with the loops in its body unrolled, it imports "
                          "more than the unroll budget of " +
                          Twine(MaxUnrolledNodes) + " nodes");
    }
    Cond = Outs[0].Tensor;
    Carried.assign(Outs.begin() + 1, Outs.begin() + 1 + NumCarried);
    Running = getKnownScalar(Cond);
    // Past the last iteration the condition does not matter.
    if (!Running && !(Trip && Iter + 1 == *Trip)) {
      Importer.rollBack(Mark);
      return OpaqueByBody(
          "the condition its body computes is unknown at import");
    }
    Running = Running.value_or(0);
  }
  if (Iter == 0 && NumScan != 0) {
    Importer.rollBack(Mark);
    return Opaque("it runs no iteration, so its scan outputs have no shape "
                  "autopar knows");
  }
  for (int I = 0; I != NumCarried; ++I)
    if (!N.getOutputName(I).empty())
      Importer.bindOnnxValue(N.getOutputName(I), Carried[I]);
  for (int J = 0; J != NumScan; ++J) {
    StringRef Name = N.getOutputName(NumCarried + J);
    if (Name.empty())
      continue;
    Value *Stacked = stackTensors(N, Scans[J], 0, Name, "step");
    if (!Stacked)
      return failure();
    N.bindOutput(NumCarried + J, Stacked);
  }
  return success();
}

/// An int-list attribute, or Count copies of Default when absent.
static std::optional<std::vector<int64_t>>
getIntsOr(NodeImporter &N, StringRef Name, size_t Count, int64_t Default) {
  const onnx::AttributeProto *A = N.getAttr(Name);
  if (!A)
    return std::vector<int64_t>(Count, Default);
  if (A->type() != onnx::AttributeProto::INTS ||
      size_t(A->ints_size()) != Count) {
    N.error("attribute '" + Name + "' must hold " + Twine(Count) + " ints");
    return std::nullopt;
  }
  return std::vector<int64_t>(A->ints().begin(), A->ints().end());
}

/// Scan (opset 9 on)(state..., scan_inputs...) with body(state...,
/// elements...) -> (state..., scan elements...): each scan input read one
/// index of its axis per iteration (Gather), in reverse where its direction
/// is 1; each scan output stacked along its axis.
LogicalResult autopar::importScan(NodeImporter &N) {
  auto Opaque = [&](const Twine &Why) { return keepOpaque(N, Why.str()); };
  if (N.getOpsetVersion() < 9)
    return Opaque("opset 8's Scan, batched with sequence_lens, is not "
                  "unrolled");
  const onnx::GraphProto *Body = getBody(N, "body");
  if (!Body)
    return failure();
  std::optional<int64_t> NumScanIn = N.getIntAttr("num_scan_inputs");
  int NumInputs = N.getNumInputs();
  if (!NumScanIn || *NumScanIn < 1 || *NumScanIn > NumInputs) {
    N.error("attribute 'num_scan_inputs' must be between 1 and the number of "
            "inputs");
    return failure();
  }
  int NumState = NumInputs - int(*NumScanIn);
  int NumScanOut = Body->output_size() - NumState;
  if (Body->input_size() != NumInputs || NumScanOut < 0) {
    N.error("the body has " + Twine(Body->input_size()) + " inputs and " +
            Twine(Body->output_size()) + " outputs for " + Twine(NumInputs) +
            " inputs of the node");
    return failure();
  }
  auto InAxes = getIntsOr(N, "scan_input_axes", *NumScanIn, 0);
  auto InDirs = getIntsOr(N, "scan_input_directions", *NumScanIn, 0);
  auto OutAxes = getIntsOr(N, "scan_output_axes", NumScanOut, 0);
  auto OutDirs = getIntsOr(N, "scan_output_directions", NumScanOut, 0);
  if (!InAxes || !InDirs || !OutAxes || !OutDirs)
    return failure();
  std::vector<Value *> Inputs;
  for (int I = 0; I != NumInputs; ++I) {
    Value *V = N.getInput(I);
    if (!V) {
      N.error("input #" + Twine(I) + " is required");
      return failure();
    }
    Inputs.push_back(V);
  }
  // The number of iterations: every scanned axis's size.
  std::optional<int64_t> Length;
  for (int I = 0; I != *NumScanIn; ++I) {
    const TensorType &T = Inputs[NumState + I]->getType();
    int64_t &Axis = (*InAxes)[I];
    if (Axis < 0)
      Axis += T.getRank();
    if (Axis < 0 || Axis >= T.getRank()) {
      N.error("scan_input_axes[" + Twine(I) + "] is out of range for " +
              T.str());
      return failure();
    }
    const Dim &D = T.getDim(Axis);
    if (!D.isStatic())
      return Opaque("the scanned axis " + Twine(Axis) + " of " + T.str() +
                    " is not static; bind it with --dim to unroll it");
    if (Length && *Length != D.getSize()) {
      N.error("the scan inputs' scanned axes differ in size");
      return failure();
    }
    Length = D.getSize();
  }
  if (*Length == 0)
    return Opaque("it scans no element");
  if (Body->initializer_size() != 0)
    return Opaque("its body has initializers of its own");
  GraphImporter &Importer = N.getImporter();
  std::vector<OnnxValue> State;
  for (int I = 0; I != NumState; ++I)
    State.push_back({Inputs[I], std::nullopt});
  // The body's inputs of step T: the state, and one element of each scanned
  // input.
  auto StepInputs = [&](int64_t T) -> std::optional<std::vector<OnnxValue>> {
    std::vector<OnnxValue> BodyInputs = State;
    for (int I = 0; I != *NumScanIn; ++I) {
      int64_t Index = (*InDirs)[I] ? *Length - 1 - T : T;
      AttrDict Attrs;
      Attrs.set("axis", Attribute::getInt((*InAxes)[I]));
      Node *Elem = N.createNode(
          OpId::Gather,
          {Inputs[NumState + I], N.createI64Constant({Index}, true)},
          std::move(Attrs), {N.makeName(Body->input(NumState + I).name())});
      if (!Elem)
        return std::nullopt;
      BodyInputs.push_back({Elem->getResult(0), std::nullopt});
    }
    return BodyInputs;
  };
  int64_t BodyNodes = countNodes(*Body);
  if (!fitsBudget(*Length, BodyNodes)) {
    // Priced as its first step times the length.
    std::string Why = overBudget(*Length, BodyNodes);
    GraphImporter::Checkpoint Before = Importer.checkpoint();
    std::optional<std::vector<OnnxValue>> First = StepInputs(0);
    if (!First)
      return failure();
    std::optional<BodyWork> Work = measureBody(N, *Body, *First);
    Importer.rollBack(Before);
    return keepOpaqueRunning(N, Why, Work, *Length,
                             "as its body times " + std::to_string(*Length) +
                                 " iterations");
  }
  std::vector<std::vector<Value *>> Scans(NumScanOut);
  for (int64_t T = 0; T != *Length; ++T) {
    std::optional<std::vector<OnnxValue>> BodyInputs = StepInputs(T);
    if (!BodyInputs)
      return failure();
    std::vector<OnnxValue> Outs;
    if (failed(Importer.importBody(*Body, *BodyInputs, Outs,
                                   N.getDisplayName())) ||
        !takeScanOutputs(N, Outs, Scans))
      return failure();
    State.assign(Outs.begin(), Outs.begin() + NumState);
    if (any_of(State, [](const OnnxValue &V) { return V.isSequence(); })) {
      N.error("a state output of the body is a sequence");
      return failure();
    }
  }
  for (int I = 0; I != NumState; ++I)
    N.bindOutput(I, State[I].Tensor);
  for (int J = 0; J != NumScanOut; ++J) {
    StringRef Name = N.getOutputName(NumState + J);
    if (Name.empty())
      continue;
    std::vector<Value *> &Parts = Scans[J];
    if ((*OutDirs)[J])
      std::reverse(Parts.begin(), Parts.end());
    int64_t Axis = (*OutAxes)[J];
    int64_t Rank = Parts.front()->getType().getRank() + 1;
    if (Axis < -Rank || Axis >= Rank) {
      N.error("scan_output_axes[" + Twine(J) + "] is out of range for rank " +
              Twine(Rank));
      return failure();
    }
    Value *Stacked =
        stackTensors(N, Parts, Axis < 0 ? Axis + Rank : Axis, Name, "step");
    if (!Stacked)
      return failure();
    N.bindOutput(NumState + J, Stacked);
  }
  return success();
}

/// SequenceMap(input_sequence, additional_inputs...): the body once per
/// element, given that element of each sequence input and each tensor
/// input whole; each body output makes one output sequence.
LogicalResult autopar::importSequenceMap(NodeImporter &N) {
  const onnx::GraphProto *Body = getBody(N, "body");
  if (!Body)
    return failure();
  GraphImporter &Importer = N.getImporter();
  std::vector<OnnxValue> Inputs;
  for (unsigned I = 0, E = N.getNumInputs(); I != E; ++I) {
    std::optional<OnnxValue> V =
        Importer.lookupOnnxValue(N.getProto().input(I));
    if (!V || (I == 0 && !V->isSequence())) {
      N.error("input #" + Twine(I) +
              (I == 0 ? " (a sequence) is required" : " is required"));
      return failure();
    }
    Inputs.push_back(std::move(*V));
  }
  if (Body->input_size() != int(Inputs.size()) ||
      Body->output_size() != int(N.getNumOutputs())) {
    N.error("the body has " + Twine(Body->input_size()) + " inputs and " +
            Twine(Body->output_size()) + " outputs for the node's " +
            Twine(Inputs.size()) + " and " + Twine(N.getNumOutputs()));
    return failure();
  }
  size_t Length = Inputs[0].Elements->size();
  for (const OnnxValue &V : Inputs)
    if (V.isSequence() && V.Elements->size() != Length) {
      N.error("its input sequences differ in length");
      return failure();
    }
  int64_t BodyNodes = countNodes(*Body);
  if (!fitsBudget(Length, BodyNodes)) {
    N.error(overBudget(Length, BodyNodes, "elements") +
            ", and a sequence cannot be kept as Opaque");
    return failure();
  }
  std::vector<std::vector<Value *>> Results(Body->output_size());
  for (size_t T = 0; T != Length; ++T) {
    std::vector<OnnxValue> Elements;
    for (const OnnxValue &V : Inputs)
      Elements.push_back(
          V.isSequence() ? OnnxValue{(*V.Elements)[T], std::nullopt} : V);
    std::vector<OnnxValue> Outs;
    if (failed(Importer.importBody(*Body, Elements, Outs, N.getDisplayName())))
      return failure();
    for (size_t J = 0; J != Outs.size(); ++J) {
      if (Outs[J].isSequence()) {
        N.error("output #" + Twine(J) + " of the body is a sequence");
        return failure();
      }
      Results[J].push_back(Outs[J].Tensor);
    }
  }
  for (size_t J = 0; J != Results.size(); ++J)
    N.bindOutputSequence(J, std::move(Results[J]));
  return success();
}
