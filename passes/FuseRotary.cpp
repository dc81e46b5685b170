//===- FuseRotary.cpp - Rotate-half rotary embedding into RotaryEmbedding -===//
//
// Finds the rotate-half rotary embedding that PyTorch exports on a 4-D
// x [batch, heads, sequence, d]:
//
//   x1  = Slice(x, 0, d/2, last axis)    x2 = Slice(x, d/2, d or more, last)
//   rot = Concat(Neg(x2), x1, axis = last)
//   y   = Add(Mul(x, cos), Mul(rot, sin))   (operands of Add and Mul in
//                                             either order)
//
// where cos and sin are full-width [..., d] tables: y = [x1 cos_a - x2 sin_a,
// x2 cos_b + x1 sin_b] with _a and _b the first and second halves. ONNX's
// RotaryEmbedding (opset 23, non-interleaved) reads one half-width cache and
// computes [x1 c - x2 s, x1 s + x2 c]: the same only when the two halves of
// each table are equal. The pass proves that from the tables' data, so it
// rewrites only when cos and sin are known: a Constant (or a parameter with
// inline data) [..., sequence, d] with leading dimensions 1, or the first
// rows of such a table [max_position, d] taken by Slice(table, 0, sequence,
// axis 0). It then creates Constant caches [sequence, d/2] (the first halves)
// and Constant position_ids [batch, sequence] = 0 .. sequence-1 (the batch
// must be static), and RotaryEmbedding(x, cos_cache, sin_cache, position_ids)
// takes over y's name and the Add's node name; the replaced nodes are
// erased when nothing else uses them.
//
// Exporters keep the tables as parameters, whose data the importer reads
// only when asked (--load-weights); without the data a rotary embedding
// cannot be rewritten exactly and is left as it is. With report-unfused,
// each one found is reported as a warning saying why. The slices, the Neg, the
// Concat and the two products must have no other use; every shape must be
// static where a value is compared. Assumes its input verifies.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMatch.h"
#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct FuseRotaryOptions {
  /// Report each rotary embedding found that cannot be rewritten exactly.
  bool ReportUnfused = false;

  Error validate() const { return Error::success(); }
};

/// A rotate-half rotary embedding y = x * Cos + rotate_half(x) * Sin.
struct RotaryMatch {
  Value *X = nullptr, *Cos = nullptr, *Sin = nullptr;
  /// The nodes it replaces, users first.
  SmallVector<Node *, 8> Replaced;
};

class FuseRotaryPass : public Pass {
public:
  FuseRotaryPass() {
    Options.bind("report-unfused", &Opts.ReportUnfused,
                 "Warn about rotary embeddings that cannot be fused exactly");
  }

  StringRef getArgument() const override { return "fuse-rotary"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      // A rewrite erases nodes before its root only: collect roots first.
      SmallVector<Node *, 16> Roots;
      for (Node &N : G->getNodes())
        if (N.getOp() == OpId::Add)
          Roots.push_back(&N);
      for (Node *N : Roots) {
        RotaryMatch Match;
        if (!match(*N, Match))
          continue;
        std::string Why = rewrite(*G, *N, Match);
        if (!Why.empty() && Opts.ReportUnfused) {
          std::string Message = "rotary embedding not fused: " + Why;
          if (N->getLoc().isValid())
            Diag.warning(N->getLoc(), Message);
          else
            Diag.nodeWarning(N->getName(), N->getOpName(), Message);
        }
      }
    }
    return success();
  }

private:
  static bool match(Node &Add, RotaryMatch &Match);
  /// Rewrites, or returns why it cannot.
  static std::string rewrite(Graph &G, Node &Add, RotaryMatch &Match);

  FuseRotaryOptions Opts;
};

} // namespace

/// The integers of a constant operand, if the node has it and it is known.
static std::optional<SmallVector<int64_t, 1>> getInts(const Node &N,
                                                      unsigned I) {
  if (I >= N.getNumOperands() || !N.getOperand(I))
    return std::nullopt;
  const DenseTensor *T = getConstantValue(N.getOperand(I));
  if (!T || T->isFloat())
    return std::nullopt;
  return SmallVector<int64_t, 1>(T->getInts().begin(), T->getInts().end());
}

/// True when V is Slice(data, Start, End', one axis Axis, step 1) with End'
/// equal to End, or at least End when AtLeast. Axis may be given either way
/// round (negative or not) for data of rank Rank.
static bool isSliceOf(const Value *V, int64_t Start, int64_t End, bool AtLeast,
                      int64_t Axis) {
  const Node *S = V->getDefiningNode();
  if (!S || S->getOp() != OpId::Slice)
    return false;
  int64_t Rank = S->getOperand(0)->getType().getRank();
  auto Starts = getInts(*S, 1), Ends = getInts(*S, 2), Axes = getInts(*S, 3);
  if (!Starts || !Ends || Starts->size() != 1 || Ends->size() != 1)
    return false;
  int64_t A = Axes ? (Axes->size() == 1 ? (*Axes)[0] : -Rank - 1) : 0;
  if (A < 0)
    A += Rank;
  if (A != Axis)
    return false;
  if (S->getNumOperands() > 4 && S->getOperand(4)) {
    auto Steps = getInts(*S, 4);
    if (!Steps || Steps->size() != 1 || (*Steps)[0] != 1)
      return false;
  }
  return (*Starts)[0] == Start &&
         (AtLeast ? (*Ends)[0] >= End : (*Ends)[0] == End);
}

bool FuseRotaryPass::match(Node &Add, RotaryMatch &Match) {
  const TensorType &YT = Add.getResult(0)->getType();
  if (YT.getRank() != 4 || !YT.getDim(3).isStatic() ||
      YT.getDim(3).getSize() % 2 != 0)
    return false;
  int64_t D = YT.getDim(3).getSize();
  for (unsigned RotMul : {0u, 1u}) {
    Node *M1 = Add.getOperand(1 - RotMul)->getDefiningNode();
    Node *M2 = Add.getOperand(RotMul)->getDefiningNode();
    if (!M1 || !M2 || M1 == M2 || M1->getOp() != OpId::Mul ||
        M2->getOp() != OpId::Mul || !isSingleUse(M1->getResult(0)) ||
        !isSingleUse(M2->getResult(0)) || M1->getResult(0)->getType() != YT ||
        M2->getResult(0)->getType() != YT)
      continue;
    for (unsigned RotIndex : {0u, 1u}) {
      Value *Rot = M2->getOperand(RotIndex);
      Node *Concat = Rot->getDefiningNode();
      if (!isSingleUse(Rot) || !Concat || Concat->getOp() != OpId::Concat ||
          Concat->getNumOperands() != 2 || Rot->getType() != YT)
        continue;
      int64_t Axis = Concat->getAttr("axis")->getInt();
      if (Axis != -1 && Axis != 3)
        continue;
      Value *NegX2 = Concat->getOperand(0), *X1 = Concat->getOperand(1);
      Node *Neg = NegX2->getDefiningNode();
      if (!isSingleUse(NegX2) || !isSingleUse(X1) || !Neg ||
          Neg->getOp() != OpId::Neg || !isSingleUse(Neg->getOperand(0)))
        continue;
      Value *X2 = Neg->getOperand(0);
      if (!isSliceOf(X1, 0, D / 2, false, 3) ||
          !isSliceOf(X2, D / 2, D, true, 3))
        continue;
      Value *X = X1->getDefiningNode()->getOperand(0);
      if (X2->getDefiningNode()->getOperand(0) != X || X->getType() != YT)
        continue;
      // The other Mul is x times cos.
      unsigned XIndex = M1->getOperand(0) == X ? 0 : 1;
      if (M1->getOperand(XIndex) != X)
        continue;
      Match.X = X;
      Match.Cos = M1->getOperand(1 - XIndex);
      Match.Sin = M2->getOperand(1 - RotIndex);
      Match.Replaced = {&Add,
                        M1,
                        M2,
                        Concat,
                        Neg,
                        X2->getDefiningNode(),
                        X1->getDefiningNode()};
      return true;
    }
  }
  return false;
}

/// A cos or sin table, as rows of width D for positions 0, 1, ...
struct Table {
  const DenseTensor *Data = nullptr;
  /// The node that takes the first rows, if any.
  Node *Slice = nullptr;
};

/// The known table behind Cache, used for Seq positions, or why not.
static std::string getTable(Value *Cache, int64_t Seq, int64_t D, Table &T) {
  const TensorType &CT = Cache->getType();
  if (!CT.hasStaticShape() || CT.getRank() < 2)
    return "the cos/sin tables do not have a static shape of rank 2 or more";
  for (unsigned I = 0, E = CT.getRank() - 2; I != E; ++I)
    if (CT.getDim(I).getSize() != 1)
      return "the cos/sin tables vary along the batch or heads";
  if (CT.getDim(CT.getRank() - 2).getSize() != Seq ||
      CT.getDim(CT.getRank() - 1).getSize() != D)
    return "the cos/sin tables are not [sequence, head size]";
  Value *Source = Cache;
  Node *S = Cache->getDefiningNode();
  if (CT.getRank() == 2 && isSliceOf(Cache, 0, Seq, false, 0)) {
    T.Slice = S;
    Source = S->getOperand(0);
  }
  if (const DenseTensor *Data = getConstantValue(Source))
    T.Data = Data;
  else if (Source->isParam() && Source->getWeightSource() &&
           Source->getWeightSource()->Data)
    T.Data = &*Source->getWeightSource()->Data;
  if (!T.Data)
    return "the values of the cos/sin tables are unknown, so their halves "
           "cannot be proven equal";
  if (!T.Data->isFloat() || T.Data->getType().getShape().back() != Dim::get(D))
    return "the cos/sin tables are not float tables of the head size";
  return "";
}

/// The first halves of the first Seq rows of T, or nullopt when some row's
/// halves differ.
static std::optional<std::vector<double>> getHalfCache(const Table &T,
                                                       int64_t Seq, int64_t D) {
  ArrayRef<double> F = T.Data->getFloats();
  if (F.size() < static_cast<size_t>(Seq * D))
    return std::nullopt;
  std::vector<double> Half;
  for (int64_t Row = 0; Row != Seq; ++Row)
    for (int64_t I = 0; I != D / 2; ++I) {
      double A = F[Row * D + I], B = F[Row * D + D / 2 + I];
      if (A != B)
        return std::nullopt;
      Half.push_back(A);
    }
  return Half;
}

std::string FuseRotaryPass::rewrite(Graph &G, Node &Add, RotaryMatch &Match) {
  const TensorType &XT = Match.X->getType();
  if (!XT.getDim(0).isStatic() || !XT.getDim(2).isStatic())
    return "the batch size or the sequence length is not static";
  int64_t Batch = XT.getDim(0).getSize(), Seq = XT.getDim(2).getSize();
  int64_t D = XT.getDim(3).getSize();
  Table Cos, Sin;
  if (std::string Why = getTable(Match.Cos, Seq, D, Cos); !Why.empty())
    return Why;
  if (std::string Why = getTable(Match.Sin, Seq, D, Sin); !Why.empty())
    return Why;
  std::optional<std::vector<double>> CosHalf = getHalfCache(Cos, Seq, D);
  std::optional<std::vector<double>> SinHalf = getHalfCache(Sin, Seq, D);
  if (!CosHalf || !SinHalf)
    return "the two halves of the cos/sin tables differ";

  Value *Old = Add.getResult(0);
  std::string Name = Old->getName().str();
  TensorType CacheType = TensorType::get(XT.getElementType(), {Seq, D / 2});
  auto MakeConstant = [&](DenseTensor Data, StringRef Suffix) -> Value * {
    AttrDict Attrs;
    TensorType Type = Data.getType();
    Attrs.set("value", Attribute::getTensor(std::move(Data)));
    return G
        .createNode(OpId::Constant, {}, {Type}, std::move(Attrs),
                    {G.getUniqueName((Name + Suffix).str())}, &Add)
        ->getResult(0);
  };
  Value *CosCache =
      MakeConstant(DenseTensor(CacheType, std::move(*CosHalf)), ".cos");
  Value *SinCache =
      MakeConstant(DenseTensor(CacheType, std::move(*SinHalf)), ".sin");
  std::vector<int64_t> Positions;
  for (int64_t B = 0; B != Batch; ++B)
    for (int64_t S = 0; S != Seq; ++S)
      Positions.push_back(S);
  Value *PositionIds =
      MakeConstant(DenseTensor(TensorType::get(ElementType::I64, {Batch, Seq}),
                               std::move(Positions)),
                   ".positions");

  Node *Rotary = G.createNode(
      OpId::RotaryEmbedding, {Match.X, CosCache, SinCache, PositionIds},
      {Old->getType()}, AttrDict(), {G.getUniqueName(Name + ".rotary")}, &Add);
  Rotary->setName(Add.getName());
  Old->replaceAllUsesWith(Rotary->getResult(0));
  if (Cos.Slice)
    Match.Replaced.push_back(Cos.Slice);
  if (Sin.Slice && Sin.Slice != Cos.Slice)
    Match.Replaced.push_back(Sin.Slice);
  for (Node *&N : Match.Replaced) {
    if (!N || any_of(N->getResults(), [](Value *R) { return R->hasUses(); }))
      continue;
    N->erase();
    N = nullptr;
  }
  G.renameValue(Rotary->getResult(0), Name);
  return "";
}

std::unique_ptr<Pass> autopar::createFuseRotaryPass() {
  return std::make_unique<FuseRotaryPass>();
}
