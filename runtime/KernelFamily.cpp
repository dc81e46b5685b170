//===- KernelFamily.cpp - Kernel families the backends share --------------===//

#include "runtime/KernelFamily.h"

using namespace autopar;

bool autopar::onlyMovesElements(KernelFamily F) {
  switch (F) {
  case KernelFamily::Where:
  case KernelFamily::Trilu:
  case KernelFamily::ReshapeLike:
  case KernelFamily::Transpose:
  case KernelFamily::Expand:
  case KernelFamily::Concat:
  case KernelFamily::Split:
  case KernelFamily::Slice:
  case KernelFamily::Gather:
  case KernelFamily::GatherElements:
  case KernelFamily::GatherND:
  case KernelFamily::Pad:
  case KernelFamily::DepthSpace:
  case KernelFamily::ReverseSequence:
  case KernelFamily::OneHot:
  case KernelFamily::Constant:
  case KernelFamily::ConstantOfShape:
  case KernelFamily::Cast:
  case KernelFamily::Shape:
  case KernelFamily::Size:
  case KernelFamily::AllReduce:
  case KernelFamily::AllGather:
  case KernelFamily::ReduceScatter:
  case KernelFamily::AllToAll:
  case KernelFamily::ShardSlice:
  case KernelFamily::SendRecv:
  case KernelFamily::Send:
  case KernelFamily::Recv:
    return true;
  case KernelFamily::None:
  case KernelFamily::Binary:
  case KernelFamily::Sum:
  case KernelFamily::Unary:
  case KernelFamily::SwiGLU:
  case KernelFamily::GeluGrad:
  case KernelFamily::SiluGrad:
  case KernelFamily::SwiGLUGrad:
  case KernelFamily::Softmax:
  case KernelFamily::Hardmax:
  case KernelFamily::SoftmaxGrad:
  case KernelFamily::LayerNorm:
  case KernelFamily::RMSNorm:
  case KernelFamily::LayerNormGrad:
  case KernelFamily::RMSNormGrad:
  case KernelFamily::BatchNorm:
  case KernelFamily::LRN:
  case KernelFamily::MatMul:
  case KernelFamily::Linear:
  case KernelFamily::Gemm:
  case KernelFamily::Conv:
  case KernelFamily::MaxPool:
  case KernelFamily::AveragePool:
  case KernelFamily::GlobalAveragePool:
  case KernelFamily::Attention:
  case KernelFamily::AttentionWithProbs:
  case KernelFamily::AttentionGrad:
  case KernelFamily::Dropout:
  case KernelFamily::DropoutGrad:
  case KernelFamily::RotaryEmbedding:
  case KernelFamily::GatherGrad:
  case KernelFamily::ScatterElements:
  case KernelFamily::ScatterND:
  case KernelFamily::EyeLike:
  case KernelFamily::LpPool:
  case KernelFamily::GlobalLpPool:
  case KernelFamily::Resize:
  case KernelFamily::NllLoss:
  case KernelFamily::Reduce:
  case KernelFamily::ArgReduce:
  case KernelFamily::CrossEntropyLoss:
  case KernelFamily::CrossEntropyLossGrad:
  case KernelFamily::NllLossGrad:
  case KernelFamily::AdamW:
  case KernelFamily::Sgd:
  case KernelFamily::Quantize:
  case KernelFamily::Dequantize:
  case KernelFamily::DynamicQuantize:
  case KernelFamily::MatMulInteger:
  case KernelFamily::ConvInteger:
  case KernelFamily::MatMulNBits:
  case KernelFamily::GatherBlockQuantized:
    return false;
  }
  return false;
}
