//===- KernelFamily.cpp - Which kernel runs an op -------------------------===//

#include "runtime/KernelFamily.h"

#include "ir/OpRegistry.h"

using namespace autopar;

KernelFamily autopar::getKernelFamily(OpId Op) {
  switch (Op) {
  case OpId::Add:
  case OpId::Sub:
  case OpId::Mul:
  case OpId::Div:
  case OpId::Pow:
  case OpId::Equal:
  case OpId::Less:
  case OpId::Greater:
  case OpId::And:
  case OpId::Or:
    return KernelFamily::Binary;
  case OpId::Sum:
    return KernelFamily::Sum;
  case OpId::Where:
    return KernelFamily::Where;
  case OpId::Trilu:
    return KernelFamily::Trilu;
  case OpId::Neg:
  case OpId::Abs:
  case OpId::Sqrt:
  case OpId::Reciprocal:
  case OpId::Exp:
  case OpId::Log:
  case OpId::Tanh:
  case OpId::Erf:
  case OpId::Sigmoid:
  case OpId::Relu:
  case OpId::LeakyRelu:
  case OpId::Not:
  case OpId::Gelu:
  case OpId::Silu:
    return KernelFamily::Unary;
  case OpId::SwiGLU:
    return KernelFamily::SwiGLU;
  case OpId::GeluGrad:
    return KernelFamily::GeluGrad;
  case OpId::SiluGrad:
    return KernelFamily::SiluGrad;
  case OpId::SwiGLUGrad:
    return KernelFamily::SwiGLUGrad;
  case OpId::Softmax:
  case OpId::LogSoftmax:
    return KernelFamily::Softmax;
  case OpId::SoftmaxGrad:
    return KernelFamily::SoftmaxGrad;
  case OpId::LayerNormalization:
    return KernelFamily::LayerNorm;
  case OpId::RMSNormalization:
    return KernelFamily::RMSNorm;
  case OpId::LayerNormalizationGrad:
    return KernelFamily::LayerNormGrad;
  case OpId::RMSNormalizationGrad:
    return KernelFamily::RMSNormGrad;
  case OpId::BatchNormalization:
    return KernelFamily::BatchNorm;
  case OpId::LRN:
    return KernelFamily::LRN;
  case OpId::MatMul:
    return KernelFamily::MatMul;
  case OpId::Linear:
    return KernelFamily::Linear;
  case OpId::Gemm:
    return KernelFamily::Gemm;
  case OpId::Conv:
    return KernelFamily::Conv;
  case OpId::MaxPool:
    return KernelFamily::MaxPool;
  case OpId::AveragePool:
    return KernelFamily::AveragePool;
  case OpId::GlobalAveragePool:
    return KernelFamily::GlobalAveragePool;
  case OpId::Attention:
    return KernelFamily::Attention;
  case OpId::AttentionGrad:
    return KernelFamily::AttentionGrad;
  case OpId::RotaryEmbedding:
    return KernelFamily::RotaryEmbedding;
  case OpId::Reshape:
  case OpId::Flatten:
  case OpId::Squeeze:
  case OpId::Unsqueeze:
  case OpId::Identity:
    return KernelFamily::ReshapeLike;
  case OpId::Dropout:
    return KernelFamily::Dropout;
  case OpId::Transpose:
    return KernelFamily::Transpose;
  case OpId::Expand:
    return KernelFamily::Expand;
  case OpId::Concat:
    return KernelFamily::Concat;
  case OpId::Split:
    return KernelFamily::Split;
  case OpId::Slice:
    return KernelFamily::Slice;
  case OpId::Gather:
    return KernelFamily::Gather;
  case OpId::GatherGrad:
    return KernelFamily::GatherGrad;
  case OpId::ReduceSum:
  case OpId::ReduceMean:
  case OpId::ReduceMax:
    return KernelFamily::Reduce;
  case OpId::Constant:
    return KernelFamily::Constant;
  case OpId::ConstantOfShape:
    return KernelFamily::ConstantOfShape;
  case OpId::Cast:
    return KernelFamily::Cast;
  case OpId::Shape:
    return KernelFamily::Shape;
  case OpId::Size:
    return KernelFamily::Size;
  case OpId::CrossEntropyLoss:
    return KernelFamily::CrossEntropyLoss;
  case OpId::CrossEntropyLossGrad:
    return KernelFamily::CrossEntropyLossGrad;
  case OpId::AdamW:
    return KernelFamily::AdamW;
  case OpId::Sgd:
    return KernelFamily::Sgd;
  default:
    return KernelFamily::None;
  }
}

bool autopar::onlyMovesElements(KernelFamily F) {
  switch (F) {
  case KernelFamily::Where:
  case KernelFamily::Trilu:
  case KernelFamily::ReshapeLike:
  case KernelFamily::Dropout:
  case KernelFamily::Transpose:
  case KernelFamily::Expand:
  case KernelFamily::Concat:
  case KernelFamily::Split:
  case KernelFamily::Slice:
  case KernelFamily::Gather:
  case KernelFamily::Constant:
  case KernelFamily::ConstantOfShape:
  case KernelFamily::Cast:
  case KernelFamily::Shape:
  case KernelFamily::Size:
    return true;
  default:
    return false;
  }
}
