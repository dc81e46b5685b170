//===- SequenceImporters.cpp - Sequences and optionals as tensors ---------===//
//
// A sequence (or an optional, a sequence of at most one element) has no IR
// type: the importer holds it as the IR values of its elements, so lengths
// and positions must be known at import. SplitToSequence is Split (then
// Squeeze per element for keepdims = 0), ConcatFromSequence is Concat
// (after Unsqueeze for new_axis), SequenceAt, SequenceInsert and
// SequenceErase pick elements, SequenceLength and OptionalHasElement are
// constants. What is not known is an error naming the node.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphImporter.h"
#include "frontend/OpImporters.h"

#include "ir/ShapeValues.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringSet.h"

using namespace autopar;
using namespace llvm;

bool autopar::readsSequences(StringRef OpType) {
  static const StringSet<> Ops = {"SequenceAt",
                                  "SequenceInsert",
                                  "SequenceErase",
                                  "SequenceLength",
                                  "SequenceMap",
                                  "ConcatFromSequence",
                                  "Optional",
                                  "OptionalHasElement",
                                  "OptionalGetElement",
                                  "Identity",
                                  "If",
                                  "Loop"};
  return Ops.count(OpType);
}

std::optional<int64_t> autopar::getKnownScalar(const Value *V) {
  std::optional<ShapeValue> Known = V ? evaluateShapeValue(V) : std::nullopt;
  if (!Known || Known->size() != 1)
    return std::nullopt;
  return (*Known)[0].Int;
}

Value *autopar::stackTensors(NodeImporter &N, ArrayRef<Value *> Parts,
                             int64_t Axis, StringRef Name,
                             StringRef PartSuffix) {
  Value *Axes = N.createI64Constant({Axis});
  SmallVector<Value *, 8> Expanded;
  for (Value *P : Parts) {
    Value *U = createValue(N, OpId::Unsqueeze, {P, Axes}, PartSuffix);
    if (!U)
      return nullptr;
    Expanded.push_back(U);
  }
  AttrDict Attrs;
  Attrs.set("axis", Attribute::getInt(Axis));
  Node *C = N.createNode(OpId::Concat, Expanded, std::move(Attrs),
                         {Name.empty() ? N.makeName("stacked") : Name.str()});
  return C ? C->getResult(0) : nullptr;
}

/// Sequence input I; reports and returns null when it is absent or a tensor.
static const std::vector<Value *> *requireSequence(NodeImporter &N,
                                                   unsigned I) {
  if (const std::vector<Value *> *Seq = N.getInputSequence(I))
    return Seq;
  N.error("input #" + Twine(I) +
          (N.getInput(I) ? " is a tensor where a sequence is expected"
                         : " (a sequence) is required"));
  return nullptr;
}

/// Tensor input I; reports and returns null when it is absent or a sequence.
static Value *requireTensor(NodeImporter &N, unsigned I) {
  if (Value *V = N.getInput(I))
    return V;
  N.error("input #" + Twine(I) +
          (N.getInputSequence(I) ? " is a sequence where a tensor is expected"
                                 : " is required"));
  return nullptr;
}

/// The position of input I in a sequence of Size elements, from the start:
/// Default when the input is absent, negative positions from the end. Past
/// the end is allowed when AllowEnd (an insertion). Reports and returns
/// nullopt when the position is unknown or out of range.
static std::optional<int64_t> getPosition(NodeImporter &N, unsigned I,
                                          int64_t Size, bool AllowEnd,
                                          std::optional<int64_t> Default) {
  if (!N.getInput(I) && !N.getInputSequence(I) && Default)
    return Default;
  Value *P = requireTensor(N, I);
  if (!P)
    return std::nullopt;
  std::optional<int64_t> Pos = getKnownScalar(P);
  if (!Pos) {
    N.error("position '" + N.getProto().input(I) +
            "' is not known at import; autopar holds a sequence as its "
            "tensors, so a position must be a constant or shape arithmetic "
            "(bind the dimensions it depends on with --dim)");
    return std::nullopt;
  }
  int64_t Last = AllowEnd ? Size : Size - 1;
  if (*Pos < -Size || *Pos > Last) {
    N.error("position " + Twine(*Pos) + " is out of range for a sequence of " +
            Twine(Size) + " tensors");
    return std::nullopt;
  }
  return *Pos < 0 ? *Pos + Size : *Pos;
}

LogicalResult autopar::importSequenceEmpty(NodeImporter &N) {
  N.bindOutputSequence(0, {});
  return success();
}

LogicalResult autopar::importSequenceConstruct(NodeImporter &N) {
  std::vector<Value *> Elements;
  for (unsigned I = 0, E = N.getNumInputs(); I != E; ++I) {
    Value *V = requireTensor(N, I);
    if (!V)
      return failure();
    Elements.push_back(V);
  }
  N.bindOutputSequence(0, std::move(Elements));
  return success();
}

/// Split along Axis into pieces of 1 (no split), of a scalar split's size
/// (the last smaller), or of a 1-D split's sizes; keepdims = 0 squeezes the
/// pieces of 1.
LogicalResult autopar::importSplitToSequence(NodeImporter &N) {
  Value *X = requireTensor(N, 0);
  if (!X)
    return failure();
  const TensorType &T = X->getType();
  int64_t Rank = T.getRank();
  int64_t Axis = N.getIntAttr("axis").value_or(0);
  if (Axis < -Rank || Axis >= Rank) {
    N.error("axis " + Twine(Axis) + " is out of range for " + T.str());
    return failure();
  }
  if (Axis < 0)
    Axis += Rank;
  const Dim &D = T.getDim(Axis);
  auto NeedStatic = [&](StringRef What) {
    N.error(What + ", and axis " + Twine(Axis) + " of " + T.str() +
            " is not static; bind its size with --dim");
    return failure();
  };
  SmallVector<Value *, 2> Operands = {X};
  Value *Split = N.getInput(1);
  if (!Split && N.getInputSequence(1))
    return success(requireTensor(N, 1));
  bool Squeeze = false;
  size_t Count;
  if (!Split) {
    if (!D.isStatic())
      return NeedStatic("without 'split' it makes one tensor per index");
    Count = D.getSize();
    Squeeze = N.getIntAttr("keepdims").value_or(1) == 0;
  } else if (Split->getType().getRank() == 0) {
    std::optional<int64_t> Chunk = getKnownScalar(Split);
    if (!Chunk || *Chunk <= 0) {
      N.error("'split' must be a positive size known at import");
      return failure();
    }
    if (!D.isStatic())
      return NeedStatic("a scalar 'split' makes a tensor per chunk");
    std::vector<int64_t> Sizes;
    for (int64_t Left = D.getSize(); Left > 0; Left -= *Chunk)
      Sizes.push_back(std::min(Left, *Chunk));
    Count = Sizes.size();
    Operands.push_back(N.createI64Constant(Sizes));
  } else {
    std::optional<ShapeValue> Sizes = evaluateShapeValue(Split);
    if (!Sizes) {
      N.error("'split' is not known at import; autopar holds a sequence as "
              "its tensors, so their number must be known");
      return failure();
    }
    Count = Sizes->size();
    Operands.push_back(Split);
  }
  if (Count == 0) {
    N.bindOutputSequence(0, {});
    return success();
  }
  std::vector<std::string> Names;
  for (size_t I = 0; I != Count; ++I)
    Names.push_back(N.makeName(Squeeze ? "piece" : "elem"));
  AttrDict Attrs;
  Attrs.set("axis", Attribute::getInt(Axis));
  Node *Parts = N.createNode(OpId::Split, Operands, std::move(Attrs), Names);
  if (!Parts)
    return failure();
  std::vector<Value *> Elements;
  Value *Axes = Squeeze ? N.createI64Constant({Axis}) : nullptr;
  for (Value *Part : Parts->getResults()) {
    if (Squeeze) {
      Node *S = N.createNode(OpId::Squeeze, {Part, Axes}, AttrDict(),
                             {N.makeName("elem")});
      if (!S)
        return failure();
      Part = S->getResult(0);
    }
    Elements.push_back(Part);
  }
  N.bindOutputSequence(0, std::move(Elements));
  return success();
}

LogicalResult autopar::importSequenceAt(NodeImporter &N) {
  const std::vector<Value *> *Seq = requireSequence(N, 0);
  if (!Seq)
    return failure();
  std::optional<int64_t> Pos =
      getPosition(N, 1, Seq->size(), /*AllowEnd=*/false, std::nullopt);
  if (!Pos)
    return failure();
  N.bindOutput(0, (*Seq)[*Pos]);
  return success();
}

LogicalResult autopar::importSequenceInsert(NodeImporter &N) {
  const std::vector<Value *> *Seq = requireSequence(N, 0);
  Value *V = Seq ? requireTensor(N, 1) : nullptr;
  if (!V)
    return failure();
  std::optional<int64_t> Pos =
      getPosition(N, 2, Seq->size(), /*AllowEnd=*/true, Seq->size());
  if (!Pos)
    return failure();
  std::vector<Value *> Elements = *Seq;
  Elements.insert(Elements.begin() + *Pos, V);
  N.bindOutputSequence(0, std::move(Elements));
  return success();
}

LogicalResult autopar::importSequenceErase(NodeImporter &N) {
  const std::vector<Value *> *Seq = requireSequence(N, 0);
  if (!Seq)
    return failure();
  if (Seq->empty()) {
    N.error("the sequence is empty: there is nothing to erase");
    return failure();
  }
  int64_t Size = Seq->size();
  std::optional<int64_t> Pos =
      getPosition(N, 1, Size, /*AllowEnd=*/false, Size - 1);
  if (!Pos)
    return failure();
  std::vector<Value *> Elements = *Seq;
  Elements.erase(Elements.begin() + *Pos);
  N.bindOutputSequence(0, std::move(Elements));
  return success();
}

LogicalResult autopar::importSequenceLength(NodeImporter &N) {
  const std::vector<Value *> *Seq = requireSequence(N, 0);
  if (!Seq)
    return failure();
  N.bindOutput(0, N.createI64Constant({int64_t(Seq->size())}, true));
  return success();
}

/// Concat along axis; with new_axis, each element gets the axis first.
LogicalResult autopar::importConcatFromSequence(NodeImporter &N) {
  const std::vector<Value *> *Seq = requireSequence(N, 0);
  if (!Seq)
    return failure();
  std::optional<int64_t> Axis = N.getIntAttr("axis");
  if (!Axis) {
    N.error("attribute 'axis' is required");
    return failure();
  }
  if (Seq->empty()) {
    N.error("the sequence is empty: its concatenation has no shape autopar "
            "knows");
    return failure();
  }
  if (N.getIntAttr("new_axis").value_or(0) != 0) {
    Value *Stacked = stackTensors(N, *Seq, *Axis, N.getOutputName(0), "elem");
    if (!Stacked)
      return failure();
    N.bindOutput(0, Stacked);
    return success();
  }
  AttrDict Attrs;
  Attrs.set("axis", Attribute::getInt(*Axis));
  return success(N.createNodeForOutputs(OpId::Concat, *Seq, std::move(Attrs)));
}

LogicalResult autopar::importOptional(NodeImporter &N) {
  if (N.getInputSequence(0)) {
    N.error("an optional of a sequence is not supported (autopar holds an "
            "optional as a sequence of at most one tensor)");
    return failure();
  }
  std::vector<Value *> Elements;
  if (Value *V = N.getInput(0))
    Elements.push_back(V);
  N.bindOutputSequence(0, std::move(Elements));
  return success();
}

LogicalResult autopar::importOptionalHasElement(NodeImporter &N) {
  // A tensor (opset 18) has an element; an absent input has none.
  bool Has = N.getInput(0) != nullptr;
  if (const std::vector<Value *> *Opt = N.getInputSequence(0))
    Has = !Opt->empty();
  N.bindOutput(0, N.createBoolScalar(Has));
  return success();
}

LogicalResult autopar::importOptionalGetElement(NodeImporter &N) {
  if (Value *V = N.getInput(0)) { // A tensor (opset 18) is itself.
    N.bindOutput(0, V);
    return success();
  }
  const std::vector<Value *> *Opt = requireSequence(N, 0);
  if (!Opt)
    return failure();
  if (Opt->empty()) {
    N.error("the optional is empty");
    return failure();
  }
  if (Opt->size() != 1) {
    N.error("input #0 is a sequence of " + Twine(Opt->size()) +
            " tensors, not an optional");
    return failure();
  }
  N.bindOutput(0, Opt->front());
  return success();
}
