//===- Graph.h - Graphs, nodes and SSA values -------------------*- C++ -*-===//
//
// A Module holds Graphs. A Graph is a function: named inputs, parameters
// (weights), an ordered list of Nodes and the values it returns. Every Value
// is defined exactly once, as a graph input, a parameter or a node result, and
// is used by the operands of later nodes and by the graph's outputs. Values
// keep their users so that passes can replace and erase in constant time per
// use.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_GRAPH_H
#define AUTOPAR_IR_GRAPH_H

#include "ir/Attributes.h"
#include "ir/DimEqualities.h"
#include "ir/OpRegistry.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/ilist.h"
#include "llvm/ADT/ilist_node.h"
#include "llvm/Support/SMLoc.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Graph;
class Node;

/// Where a parameter's initial data comes from.
struct WeightSource {
  enum class Kind { Inline, External };
  Kind SourceKind = Kind::Inline;
  /// Kind::Inline: the data.
  std::optional<DenseTensor> Data;
  /// Kind::External: a file relative to the model, and a byte range in it.
  std::string Location;
  int64_t Offset = 0;
  int64_t Length = 0;

  static WeightSource getInline(DenseTensor Data);
  static WeightSource getExternal(llvm::StringRef Location, int64_t Offset,
                                  int64_t Length);
};

class Value {
public:
  enum class Kind { Input, Param, Result };

  Kind getKind() const { return ValueKind; }
  bool isInput() const { return ValueKind == Kind::Input; }
  bool isParam() const { return ValueKind == Kind::Param; }
  llvm::StringRef getName() const { return Name; }
  const TensorType &getType() const { return Type; }
  void setType(TensorType T) { Type = std::move(T); }
  /// The type of the whole tensor: getType(), except for a parameter of a
  /// per-rank program that holds its shard (`local = 1` and a `sharding`),
  /// whose dimensions are multiplied by the sizes of the mesh axes that
  /// split them (its data, if any, is the whole tensor's).
  TensorType getLogicalType() const;
  Graph *getGraph() const { return Parent; }

  /// The node that defines a result, else null.
  Node *getDefiningNode() const { return DefiningNode; }
  unsigned getResultIndex() const { return ResultIndex; }

  /// One entry per operand slot that uses this value.
  llvm::ArrayRef<Node *> getUsers() const { return Users; }
  /// How many of the graph's outputs are this value.
  unsigned getNumOutputUses() const { return NumOutputUses; }
  bool hasUses() const { return !Users.empty() || NumOutputUses != 0; }

  /// Makes every user and graph output use V instead.
  void replaceAllUsesWith(Value *V);

  /// Annotations of graph inputs and parameters (node results are annotated
  /// through their node's attributes).
  AttrDict &getAttrs() { return Attrs; }
  const AttrDict &getAttrs() const { return Attrs; }

  /// A parameter marked `frozen = true` (the frontend's `--freeze`): it is
  /// not trained, so no gradient flows into it, whatever reads it.
  bool isFrozen() const;

  /// A parameter's initial data, if it has any.
  const std::optional<WeightSource> &getWeightSource() const { return Source; }
  void setWeightSource(std::optional<WeightSource> S) { Source = std::move(S); }

  /// Where the value was defined in the text it was parsed from, if any.
  llvm::SMLoc getLoc() const { return Loc; }
  void setLoc(llvm::SMLoc L) { Loc = L; }

private:
  friend class Graph;
  friend class Node;
  Value(Graph *Parent, Kind K, std::string Name, TensorType Type)
      : Parent(Parent), ValueKind(K), Name(std::move(Name)),
        Type(std::move(Type)) {}
  void addUser(Node *N) { Users.push_back(N); }
  void removeUser(Node *N);

  Graph *Parent;
  Kind ValueKind;
  std::string Name;
  TensorType Type;
  Node *DefiningNode = nullptr;
  unsigned ResultIndex = 0;
  llvm::SmallVector<Node *, 2> Users;
  unsigned NumOutputUses = 0;
  AttrDict Attrs;
  std::optional<WeightSource> Source;
  llvm::SMLoc Loc;
};

class Node : public llvm::ilist_node<Node> {
public:
  ~Node();

  OpId getOp() const { return Op; }
  const OpInfo &getOpInfo() const { return autopar::getOpInfo(Op); }
  llvm::StringRef getOpName() const { return getOpInfo().Name; }
  Graph *getGraph() const { return Parent; }

  unsigned getNumOperands() const { return Operands.size(); }
  Value *getOperand(unsigned I) const { return Operands[I]; }
  llvm::ArrayRef<Value *> getOperands() const { return Operands; }
  void setOperand(unsigned I, Value *V);

  unsigned getNumResults() const { return Results.size(); }
  Value *getResult(unsigned I) const { return Results[I].get(); }
  llvm::SmallVector<Value *, 1> getResults() const;

  AttrDict &getAttrs() { return Attrs; }
  const AttrDict &getAttrs() const { return Attrs; }
  const Attribute *getAttr(llvm::StringRef Name) const {
    return Attrs.get(Name);
  }

  /// The node's name in the model it came from (ONNX node name), if any.
  llvm::StringRef getName() const { return Name; }
  void setName(llvm::StringRef N) { Name = N.str(); }
  llvm::SMLoc getLoc() const { return Loc; }
  void setLoc(llvm::SMLoc L) { Loc = L; }

  /// Removes the node from its graph and deletes it. Its results must have
  /// no uses left.
  void erase();

private:
  friend class Graph;
  Node(Graph *Parent, OpId Op) : Parent(Parent), Op(Op) {}
  void dropOperands();

  Graph *Parent;
  OpId Op;
  llvm::SmallVector<Value *, 2> Operands;
  llvm::SmallVector<std::unique_ptr<Value>, 1> Results;
  AttrDict Attrs;
  std::string Name;
  llvm::SMLoc Loc;
};

/// A named device mesh, e.g. `mesh @cluster = [dp = 8, tp = 4]`.
struct Mesh {
  std::string Name;
  std::vector<std::pair<std::string, int64_t>> Axes;
  llvm::SMLoc Loc;

  int64_t getNumDevices() const;
  /// The size of axis Name, or nullopt if the mesh has no such axis.
  std::optional<int64_t> getAxisSize(llvm::StringRef Axis) const;
};

class Graph {
public:
  using NodeList = llvm::iplist<Node>;

  explicit Graph(llvm::StringRef Name) : Name(Name.str()) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  llvm::StringRef getName() const { return Name; }
  llvm::SMLoc getLoc() const { return Loc; }
  void setLoc(llvm::SMLoc L) { Loc = L; }

  /// Adds a graph input. Name must be unused (see isNameUsed).
  Value *addInput(llvm::StringRef Name, TensorType Type);
  /// Adds a parameter. Name must be unused.
  Value *addParam(llvm::StringRef Name, TensorType Type,
                  std::optional<WeightSource> Source = std::nullopt);
  llvm::ArrayRef<std::unique_ptr<Value>> getInputs() const { return Inputs; }
  /// Removes input V, which nothing may use any more.
  void eraseInput(Value *V);
  llvm::ArrayRef<std::unique_ptr<Value>> getParams() const { return Params; }
  /// Removes parameter V, which nothing may use any more.
  void eraseParam(Value *V);

  /// Creates a node before InsertBefore (at the end when null). Results get
  /// the names in ResultNames where given and non-empty, else fresh ones.
  Node *createNode(OpId Op, llvm::ArrayRef<Value *> Operands,
                   llvm::ArrayRef<TensorType> ResultTypes,
                   AttrDict Attrs = AttrDict(),
                   llvm::ArrayRef<std::string> ResultNames = {},
                   Node *InsertBefore = nullptr);
  /// Replaces N by a node of Op on Operands (trailing absent ones dropped),
  /// where N was, with N's node name and location. Its results have
  /// ResultTypes; those N also has take over N's results (their users,
  /// names and annotations), N's others must be unused, and the new node's
  /// others are named ExtraNames (fresh names where not given).
  Node *replaceNode(Node &N, OpId Op, llvm::ArrayRef<Value *> Operands,
                    llvm::ArrayRef<TensorType> ResultTypes, AttrDict Attrs,
                    llvm::ArrayRef<std::string> ExtraNames = {});
  NodeList &getNodes() { return Nodes; }
  const NodeList &getNodes() const { return Nodes; }

  llvm::ArrayRef<Value *> getOutputs() const { return Outputs; }
  void setOutputs(llvm::ArrayRef<Value *> Values);
  /// Replaces output I (used by Value::replaceAllUsesWith).
  void setOutput(unsigned I, Value *V);

  /// The dimensions the graph assumes equal (ir/DimEqualities.h). Shape
  /// functions, which see the graph as const, may add assumptions while it
  /// records them.
  DimEqualities &getDimEqualities() const { return Equalities; }
  /// Writes every type of the graph with the representatives of its
  /// assumed dimensions.
  void applyDimEqualities();

  llvm::ArrayRef<Mesh> getMeshes() const { return Meshes; }
  const Mesh *lookupMesh(llvm::StringRef Name) const;
  /// Adds a mesh; returns false if one of that name exists.
  bool addMesh(Mesh M);

  Value *lookupValue(llvm::StringRef Name) const {
    return ValueNames.lookup(Name);
  }
  bool isNameUsed(llvm::StringRef Name) const { return ValueNames.count(Name); }
  /// Base itself if unused, else the first unused `Base_N` for N = 1, 2, ...
  std::string getUniqueName(llvm::StringRef Base) const;
  /// Gives V a new name, which must be unused.
  void renameValue(Value *V, llvm::StringRef NewName);

private:
  friend class Node;
  void registerName(Value *V);

  std::string Name;
  llvm::SMLoc Loc;
  std::vector<std::unique_ptr<Value>> Inputs;
  std::vector<std::unique_ptr<Value>> Params;
  NodeList Nodes;
  std::vector<Value *> Outputs;
  std::vector<Mesh> Meshes;
  mutable DimEqualities Equalities;
  llvm::StringMap<Value *> ValueNames;
  /// Counter for fresh result names (`%0`, `%1`, ...).
  mutable unsigned NextFreshName = 0;
};

class Module {
public:
  llvm::ArrayRef<std::unique_ptr<Graph>> getGraphs() const { return Graphs; }
  Graph *addGraph(std::unique_ptr<Graph> G) {
    Graphs.push_back(std::move(G));
    return Graphs.back().get();
  }
  Graph *lookupGraph(llvm::StringRef Name) const;
  /// Replaces graph I (a pass that rebuilds a graph), returning the old one.
  std::unique_ptr<Graph> replaceGraph(size_t I, std::unique_ptr<Graph> G) {
    std::swap(Graphs[I], G);
    return G;
  }

  /// The module's attributes (`module {...}` in text): a plan's record
  /// (ir/Plan.h). Passes keep them as they are.
  const AttrDict &getAttrs() const { return Attrs; }
  AttrDict &getAttrs() { return Attrs; }
  /// Where the attributes were parsed from (invalid when built in memory).
  llvm::SMLoc getAttrsLoc() const { return AttrsLoc; }
  void setAttrsLoc(llvm::SMLoc L) { AttrsLoc = L; }

private:
  std::vector<std::unique_ptr<Graph>> Graphs;
  AttrDict Attrs;
  llvm::SMLoc AttrsLoc;
};

} // namespace autopar

#endif // AUTOPAR_IR_GRAPH_H
