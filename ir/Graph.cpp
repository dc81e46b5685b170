//===- Graph.cpp - Graphs, nodes and SSA values ---------------------------===//

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

#include <cassert>

using namespace autopar;
using namespace llvm;

WeightSource WeightSource::getInline(DenseTensor Data) {
  WeightSource S;
  S.SourceKind = Kind::Inline;
  S.Data = std::move(Data);
  return S;
}

WeightSource WeightSource::getExternal(StringRef Location, int64_t Offset,
                                       int64_t Length) {
  WeightSource S;
  S.SourceKind = Kind::External;
  S.Location = Location.str();
  S.Offset = Offset;
  S.Length = Length;
  return S;
}

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

void Value::removeUser(Node *N) {
  auto It = llvm::find(Users, N);
  assert(It != Users.end() && "removing a user that does not use the value");
  Users.erase(It);
}

void Value::replaceAllUsesWith(Value *V) {
  assert(V != this && "replacing a value with itself");
  while (!Users.empty()) {
    Node *User = Users.back();
    for (unsigned I = 0, E = User->getNumOperands(); I != E; ++I)
      if (User->getOperand(I) == this) {
        User->setOperand(I, V);
        break;
      }
  }
  if (NumOutputUses != 0)
    for (unsigned I = 0, E = Parent->getOutputs().size(); I != E; ++I)
      if (Parent->getOutputs()[I] == this)
        Parent->setOutput(I, V);
}

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

Node::~Node() { dropOperands(); }

void Node::setOperand(unsigned I, Value *V) {
  if (Operands[I])
    Operands[I]->removeUser(this);
  Operands[I] = V;
  if (V)
    V->addUser(this);
}

SmallVector<Value *, 1> Node::getResults() const {
  SmallVector<Value *, 1> Values;
  for (const std::unique_ptr<Value> &R : Results)
    Values.push_back(R.get());
  return Values;
}

void Node::dropOperands() {
  for (unsigned I = 0, E = Operands.size(); I != E; ++I)
    setOperand(I, nullptr);
}

void Node::erase() {
  for (const std::unique_ptr<Value> &R : Results) {
    assert(!R->hasUses() && "erasing a node whose results are still used");
    Parent->ValueNames.erase(R->getName());
  }
  dropOperands();
  Parent->Nodes.erase(getIterator());
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

int64_t Mesh::getNumDevices() const {
  int64_t N = 1;
  for (const auto &Axis : Axes)
    N *= Axis.second;
  return N;
}

bool Value::isFrozen() const {
  const Attribute *A = Attrs.get("frozen");
  return isParam() && A && A->isa(Attribute::Kind::Bool) && A->getBool();
}

TensorType Value::getLogicalType() const {
  const Attribute *Local = Attrs.get("local");
  const Attribute *S = Attrs.get("sharding");
  if (!Local || !Local->isa(Attribute::Kind::Int) || !Local->getInt() || !S ||
      !S->isa(Attribute::Kind::Sharding) || !Parent)
    return Type;
  const Sharding &Layout = S->getSharding();
  const Mesh *M = Parent->lookupMesh(Layout.Mesh);
  if (!M)
    return Type;
  SmallVector<Dim, 4> Shape(Type.getShape().begin(), Type.getShape().end());
  for (unsigned D = 0; D != Shape.size() && D != Layout.DimAxes.size(); ++D)
    for (const std::string &Axis : Layout.DimAxes[D])
      Shape[D] = Shape[D] * Dim::get(M->getAxisSize(Axis).value_or(1));
  // A padded shard (ZeRO over a data-parallel size that does not divide
  // the rows, passes/InsertGradSync.cpp): the rows past logical_rows are
  // padding.
  const Attribute *Rows = Attrs.get("logical_rows");
  if (Rows && Rows->isa(Attribute::Kind::Int) && !Shape.empty())
    Shape[0] = Dim::get(Rows->getInt());
  return TensorType(Type.getElementType(), Shape);
}

std::optional<int64_t> Mesh::getAxisSize(StringRef Axis) const {
  for (const auto &A : Axes)
    if (A.first == Axis)
      return A.second;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() {
  // Drop every use first so that node destruction order does not matter.
  for (Node &N : Nodes)
    N.dropOperands();
  Nodes.clear();
}

void Graph::registerName(Value *V) {
  assert(!V->getName().empty() && "values have non-empty names");
  bool Inserted = ValueNames.try_emplace(V->getName(), V).second;
  (void)Inserted;
  assert(Inserted && "value name already in use");
}

Value *Graph::addInput(StringRef Name, TensorType Type) {
  Inputs.push_back(std::unique_ptr<Value>(
      new Value(this, Value::Kind::Input, Name.str(), std::move(Type))));
  registerName(Inputs.back().get());
  return Inputs.back().get();
}

void Graph::eraseInput(Value *V) {
  assert(!V->hasUses() && "erasing an input that is still used");
  auto It = llvm::find_if(
      Inputs, [&](const std::unique_ptr<Value> &In) { return In.get() == V; });
  assert(It != Inputs.end() && "not an input of this graph");
  ValueNames.erase(V->getName());
  Inputs.erase(It);
}

void Graph::applyDimEqualities() {
  if (Equalities.empty())
    return;
  for (const std::unique_ptr<Value> &V : Inputs)
    V->setType(Equalities.resolve(V->getType()));
  for (const std::unique_ptr<Value> &V : Params)
    V->setType(Equalities.resolve(V->getType()));
  for (Node &N : Nodes)
    for (Value *R : N.getResults())
      R->setType(Equalities.resolve(R->getType()));
}

void Graph::eraseParam(Value *V) {
  assert(!V->hasUses() && "erasing a parameter that is still used");
  auto It = llvm::find_if(
      Params, [&](const std::unique_ptr<Value> &P) { return P.get() == V; });
  assert(It != Params.end() && "not a parameter of this graph");
  ValueNames.erase(V->getName());
  Params.erase(It);
}

Value *Graph::addParam(StringRef Name, TensorType Type,
                       std::optional<WeightSource> Source) {
  Params.push_back(std::unique_ptr<Value>(
      new Value(this, Value::Kind::Param, Name.str(), std::move(Type))));
  Value *V = Params.back().get();
  V->setWeightSource(std::move(Source));
  registerName(V);
  return V;
}

Node *Graph::createNode(OpId Op, ArrayRef<Value *> Operands,
                        ArrayRef<TensorType> ResultTypes, AttrDict Attrs,
                        ArrayRef<std::string> ResultNames, Node *InsertBefore) {
  Node *N = new Node(this, Op);
  N->Attrs = std::move(Attrs);
  N->Operands.resize(Operands.size(), nullptr);
  for (unsigned I = 0, E = Operands.size(); I != E; ++I)
    N->setOperand(I, Operands[I]);
  for (unsigned I = 0, E = ResultTypes.size(); I != E; ++I) {
    std::string ResultName;
    if (I < ResultNames.size() && !ResultNames[I].empty())
      ResultName = ResultNames[I];
    else
      while (isNameUsed(ResultName = std::to_string(NextFreshName++)))
        ;
    std::unique_ptr<Value> R(
        new Value(this, Value::Kind::Result, ResultName, ResultTypes[I]));
    R->DefiningNode = N;
    R->ResultIndex = I;
    registerName(R.get());
    N->Results.push_back(std::move(R));
  }
  if (InsertBefore)
    Nodes.insert(InsertBefore->getIterator(), N);
  else
    Nodes.push_back(N);
  return N;
}

Node *Graph::replaceNode(Node &N, OpId Op, ArrayRef<Value *> Operands,
                         ArrayRef<TensorType> ResultTypes, AttrDict Attrs,
                         ArrayRef<std::string> ExtraNames) {
  while (!Operands.empty() && !Operands.back())
    Operands = Operands.drop_back();
  unsigned Kept = std::min<unsigned>(N.getNumResults(), ResultTypes.size());
  SmallVector<std::string, 3> Names(ResultTypes.size());
  for (unsigned I = Kept;
       I < ResultTypes.size() && I - Kept < ExtraNames.size(); ++I)
    Names[I] = ExtraNames[I - Kept];
  Node *New =
      createNode(Op, Operands, ResultTypes, std::move(Attrs), Names, &N);
  New->setName(N.getName());
  New->setLoc(N.getLoc());
  SmallVector<std::string, 3> OldNames;
  for (unsigned I = 0; I != Kept; ++I) {
    Value *Old = N.getResult(I);
    New->getResult(I)->getAttrs() = Old->getAttrs();
    OldNames.push_back(Old->getName().str());
    Old->replaceAllUsesWith(New->getResult(I));
  }
  N.erase();
  for (unsigned I = 0; I != Kept; ++I)
    renameValue(New->getResult(I), OldNames[I]);
  return New;
}

void Graph::setOutputs(ArrayRef<Value *> Values) {
  for (Value *V : Outputs)
    --V->NumOutputUses;
  Outputs.assign(Values.begin(), Values.end());
  for (Value *V : Outputs)
    ++V->NumOutputUses;
}

void Graph::setOutput(unsigned I, Value *V) {
  --Outputs[I]->NumOutputUses;
  Outputs[I] = V;
  ++V->NumOutputUses;
}

const Mesh *Graph::lookupMesh(StringRef MeshName) const {
  for (const Mesh &M : Meshes)
    if (M.Name == MeshName)
      return &M;
  return nullptr;
}

bool Graph::addMesh(Mesh M) {
  if (lookupMesh(M.Name))
    return false;
  Meshes.push_back(std::move(M));
  return true;
}

std::string Graph::getUniqueName(StringRef Base) const {
  if (!isNameUsed(Base))
    return Base.str();
  for (unsigned N = 1;; ++N) {
    std::string Candidate = (Base + "_" + Twine(N)).str();
    if (!isNameUsed(Candidate))
      return Candidate;
  }
}

void Graph::renameValue(Value *V, StringRef NewName) {
  assert(!isNameUsed(NewName) && "renaming to a name in use");
  ValueNames.erase(V->getName());
  V->Name = NewName.str();
  registerName(V);
}

Graph *Module::lookupGraph(StringRef Name) const {
  for (const std::unique_ptr<Graph> &G : Graphs)
    if (G->getName() == Name)
      return G.get();
  return nullptr;
}
