// backend.cpp - BackendBraid: torch.distributed collectives on CPU tensors through braid.
//
// Tensors must be CPU tensors; inputs that are not contiguous are copied, outputs that are not
// contiguous are computed in a contiguous copy and copied back. Lists of tensors (allgather,
// reduce_scatter, gather, scatter) go through one flat buffer. Uneven all-to-all is a group of
// sends and receives, as NCCL's own backend does it.
#include "backend.hpp"

#include <ATen/ATen.h>

#include <cstring>

namespace braid_torch {

namespace {

ncclDataType_t to_nccl(at::ScalarType t) {
  switch (t) {
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kUInt32: return ncclUint32;
    case at::kLong: return ncclInt64;
    case at::kUInt64: return ncclUint64;
    case at::kHalf: return ncclFloat16;
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default: TORCH_CHECK(false, "braid: tensors of type ", t, " are not supported (NCCL has no such type)");
  }
}

// A reduction operator; PreMulSum ones are created on the communicator and destroyed after.
struct RedOp {
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm = nullptr;
  RedOp(const c10d::ReduceOp& r, at::ScalarType t, ncclComm_t c) {
    bool is_bool = t == at::kBool;  // as ProcessGroupNCCL: sum -> or (max), product -> and (min)
    switch (r.op_) {
      case c10d::ReduceOp::SUM: op = is_bool ? ncclMax : ncclSum; break;
      case c10d::ReduceOp::PRODUCT: op = is_bool ? ncclMin : ncclProd; break;
      case c10d::ReduceOp::MIN: op = ncclMin; break;
      case c10d::ReduceOp::MAX: op = ncclMax; break;
      case c10d::ReduceOp::AVG:
        TORCH_CHECK(!is_bool, "braid: AVG of bool tensors");
        op = ncclAvg;
        break;
      case c10d::ReduceOp::PREMUL_SUM: premul(r, t, c); break;
      default: TORCH_CHECK(false, "braid: reduce op ", static_cast<int>(r.op_), " has no NCCL equivalent");
    }
  }
  void premul(const c10d::ReduceOp& r, at::ScalarType t, ncclComm_t c) {
    auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(r.supplement_.get());
    TORCH_CHECK(sup != nullptr, "braid: PREMUL_SUM without a factor");
    at::Tensor f = sup->tensor_factor.defined() ? sup->tensor_factor.to(at::kCPU).to(t)
                                                : at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(t));
    check(nccl().RedOpCreatePreMulSum(&op, f.data_ptr(), to_nccl(t), ncclScalarHostImmediate, c),
          "ncclRedOpCreatePreMulSum");
    comm = c;
  }
  ~RedOp() {
    if (comm != nullptr) nccl().RedOpDestroy(op, comm);
  }
};

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "braid: ", what, " must be a CPU tensor (got ", t.device(), ")");
  TORCH_CHECK(t.layout() == at::kStrided, "braid: ", what, " must be dense");
}

// An output computed in place when contiguous, else in a copy written back by finish().
struct Out {
  at::Tensor user, work;
  explicit Out(at::Tensor t) : user(t), work(t.is_contiguous() ? t : t.contiguous()) { check_cpu(t, "output"); }
  void finish() {
    if (!work.is_same(user)) user.copy_(work);
  }
};

at::Tensor in(const at::Tensor& t) {
  check_cpu(t, "input");
  return t.contiguous();
}

void single(const std::vector<at::Tensor>& v, const char* fn) {
  TORCH_CHECK(v.size() == 1, "braid: ", fn, " takes one tensor per process (got ", v.size(), ")");
}

}  // namespace

WorkBraid::WorkBraid(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), outputs_(std::move(outputs)) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future_->markCompleted(c10::IValue(outputs_));
}

BackendBraid::BackendBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
    : c10d::Backend(rank, size) {
  const NcclLib& l = nccl();
  ncclUniqueId id;
  const std::string key = "braid_unique_id";
  if (rank == 0) {
    check(l.GetUniqueId(&id), "ncclGetUniqueId");
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof(id.internal), "braid: bad unique id in the store (", v.size(), " bytes)");
    std::memcpy(id.internal, v.data(), v.size());
  }
  check(l.CommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
}

BackendBraid::~BackendBraid() {
  if (comm_ != nullptr) nccl().CommDestroy(comm_);
}

c10::intrusive_ptr<c10d::Backend> BackendBraid::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size, const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<BackendBraid>(store, rank, size);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::done(c10d::OpType type, std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<WorkBraid>(getRank(), type, std::move(outputs));
}

c10::intrusive_ptr<c10d::Work> BackendBraid::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  single(tensors, "broadcast");
  Out o(tensors[0]);
  check(nccl().Broadcast(o.work.data_ptr(), o.work.data_ptr(), o.work.numel(), to_nccl(o.work.scalar_type()),
                         static_cast<int>(opts.rootRank), comm_, nullptr),
        "ncclBroadcast");
  o.finish();
  return done(c10d::OpType::BROADCAST, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  single(tensors, "allreduce");
  Out o(tensors[0]);
  at::ScalarType t = o.work.scalar_type();
  RedOp op(opts.reduceOp, t, comm_);
  check(nccl().AllReduce(o.work.data_ptr(), o.work.data_ptr(), o.work.numel(), to_nccl(t), op.op, comm_, nullptr),
        "ncclAllReduce");
  o.finish();
  return done(c10d::OpType::ALLREDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Out> outs(tensors.begin(), tensors.end());
  std::vector<std::unique_ptr<RedOp>> ops;
  check(nccl().GroupStart(), "ncclGroupStart");
  for (auto& o : outs) {
    ops.emplace_back(new RedOp(opts.reduceOp, o.work.scalar_type(), comm_));
    nccl().AllReduce(o.work.data_ptr(), o.work.data_ptr(), o.work.numel(), to_nccl(o.work.scalar_type()),
                     ops.back()->op, comm_, nullptr);
  }
  check(nccl().GroupEnd(), "ncclAllReduce (coalesced)");
  for (auto& o : outs) o.finish();
  return done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::reduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::ReduceOptions& opts) {
  single(tensors, "reduce");
  Out o(tensors[0]);
  at::ScalarType t = o.work.scalar_type();
  RedOp op(opts.reduceOp, t, comm_);
  check(nccl().Reduce(o.work.data_ptr(), o.work.data_ptr(), o.work.numel(), to_nccl(t), op.op,
                      static_cast<int>(opts.rootRank), comm_, nullptr),
        "ncclReduce");
  o.finish();
  return done(c10d::OpType::REDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  at::Tensor i = in(input);
  Out o(output);
  TORCH_CHECK(o.work.numel() == i.numel() * getSize() && o.work.scalar_type() == i.scalar_type(),
              "braid: all_gather_into_tensor: output must hold world_size inputs of the same type");
  check(nccl().AllGather(i.data_ptr(), o.work.data_ptr(), i.numel(), to_nccl(i.scalar_type()), comm_, nullptr),
        "ncclAllGather");
  o.finish();
  return done(c10d::OpType::_ALLGATHER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> BackendBraid::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "braid: allgather needs a list of world_size output tensors");
  at::Tensor i = in(inputs[0]);
  at::Tensor flat = at::empty({getSize() * i.numel()}, i.options());
  check(nccl().AllGather(i.data_ptr(), flat.data_ptr(), i.numel(), to_nccl(i.scalar_type()), comm_, nullptr),
        "ncclAllGather");
  for (int r = 0; r < getSize(); r++) outputs[0][r].copy_(flat.narrow(0, r * i.numel(), i.numel()).view_as(outputs[0][r]));
  return done(c10d::OpType::ALLGATHER, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: allgather_into_tensor_coalesced: as many outputs as inputs");
  for (size_t k = 0; k < inputs.size(); k++) _allgather_base(outputs[k], inputs[k], opts);
  return done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  single(inputs, "gather");
  int root = static_cast<int>(opts.rootRank);
  at::Tensor i = in(inputs[0]);
  bool is_root = getRank() == root;
  TORCH_CHECK(!is_root || (outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize()),
              "braid: gather needs a list of world_size output tensors on the root");
  at::Tensor flat = is_root ? at::empty({getSize() * i.numel()}, i.options()) : at::Tensor();
  check(nccl().Gather(i.data_ptr(), is_root ? flat.data_ptr() : nullptr, i.numel(), to_nccl(i.scalar_type()), root,
                      comm_, nullptr),
        "ncclGather");
  if (is_root)
    for (int r = 0; r < getSize(); r++) outputs[0][r].copy_(flat.narrow(0, r * i.numel(), i.numel()).view_as(outputs[0][r]));
  return done(c10d::OpType::GATHER, is_root ? outputs[0] : std::vector<at::Tensor>());
}

c10::intrusive_ptr<c10d::Work> BackendBraid::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  single(outputs, "scatter");
  int root = static_cast<int>(opts.rootRank);
  Out o(outputs[0]);
  bool is_root = getRank() == root;
  at::Tensor flat;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "braid: scatter needs a list of world_size input tensors on the root");
    std::vector<at::Tensor> parts;
    for (auto& t : inputs[0]) parts.push_back(in(t).reshape({-1}));
    flat = at::cat(parts);
  }
  check(nccl().Scatter(is_root ? flat.data_ptr() : nullptr, o.work.data_ptr(), o.work.numel(),
                       to_nccl(o.work.scalar_type()), root, comm_, nullptr),
        "ncclScatter");
  o.finish();
  return done(c10d::OpType::SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  at::Tensor i = in(input);
  Out o(output);
  TORCH_CHECK(i.numel() == o.work.numel() * getSize() && o.work.scalar_type() == i.scalar_type(),
              "braid: reduce_scatter_tensor: input must hold world_size outputs of the same type");
  RedOp op(opts.reduceOp, i.scalar_type(), comm_);
  check(nccl().ReduceScatter(i.data_ptr(), o.work.data_ptr(), o.work.numel(), to_nccl(i.scalar_type()), op.op, comm_,
                             nullptr),
        "ncclReduceScatter");
  o.finish();
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> BackendBraid::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "braid: reduce_scatter needs a list of world_size input tensors");
  std::vector<at::Tensor> parts;
  for (auto& t : inputs[0]) parts.push_back(in(t).reshape({-1}));
  at::Tensor flat = at::cat(parts);
  _reduce_scatter_base(outputs[0], flat, opts);
  return done(c10d::OpType::REDUCE_SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: reduce_scatter_tensor_coalesced: as many outputs as inputs");
  for (size_t k = 0; k < inputs.size(); k++) _reduce_scatter_base(outputs[k], inputs[k], opts);
  return done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& outputSplits,
                                                           std::vector<int64_t>& inputSplits,
                                                           const c10d::AllToAllOptions& opts) {
  at::Tensor i = in(input);
  Out o(output);
  int n = getSize();
  ncclDataType_t t = to_nccl(i.scalar_type());
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(i.numel() == o.work.numel() && i.numel() % n == 0,
                "braid: all_to_all_single: input and output of one size, divisible by world_size");
    check(nccl().AlltoAll(i.data_ptr(), o.work.data_ptr(), i.numel() / n, t, comm_, nullptr), "ncclAlltoAll");
  } else {
    // Splits count rows (dim 0): offsets in elements are rows x the elements per row.
    TORCH_CHECK(static_cast<int>(outputSplits.size()) == n && static_cast<int>(inputSplits.size()) == n,
                "braid: all_to_all_single: one split per rank");
    int64_t in_row = i.dim() > 0 && i.size(0) > 0 ? i.numel() / i.size(0) : 1;
    int64_t out_row = o.work.dim() > 0 && o.work.size(0) > 0 ? o.work.numel() / o.work.size(0) : 1;
    size_t es = i.element_size();
    char* src = static_cast<char*>(i.data_ptr());
    char* dst = static_cast<char*>(o.work.data_ptr());
    int64_t in_off = 0, out_off = 0;
    check(nccl().GroupStart(), "ncclGroupStart");
    for (int r = 0; r < n; r++) {
      nccl().Send(src + in_off * in_row * es, inputSplits[r] * in_row, t, r, comm_, nullptr);
      nccl().Recv(dst + out_off * out_row * es, outputSplits[r] * out_row, t, r, comm_, nullptr);
      in_off += inputSplits[r];
      out_off += outputSplits[r];
    }
    check(nccl().GroupEnd(), "all_to_all_single (uneven: ncclSend/ncclRecv)");
  }
  o.finish();
  return done(c10d::OpType::ALLTOALL_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> BackendBraid::alltoall(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  int n = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "braid: all_to_all: world_size tensors in and out");
  std::vector<at::Tensor> ins;
  std::vector<Out> outs(outputs.begin(), outputs.end());
  for (auto& t : inputs) ins.push_back(in(t));
  check(nccl().GroupStart(), "ncclGroupStart");
  for (int r = 0; r < n; r++) {
    nccl().Send(ins[r].data_ptr(), ins[r].numel(), to_nccl(ins[r].scalar_type()), r, comm_, nullptr);
    nccl().Recv(outs[r].work.data_ptr(), outs[r].work.numel(), to_nccl(outs[r].work.scalar_type()), r, comm_, nullptr);
  }
  check(nccl().GroupEnd(), "all_to_all (ncclSend/ncclRecv)");
  for (auto& o : outs) o.finish();
  return done(c10d::OpType::ALLTOALL, outputs);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  single(tensors, "send");
  at::Tensor t = in(tensors[0]);
  check(nccl().Send(t.data_ptr(), t.numel(), to_nccl(t.scalar_type()), dstRank, comm_, nullptr), "ncclSend");
  return done(c10d::OpType::SEND, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  single(tensors, "recv");
  Out o(tensors[0]);
  check(nccl().Recv(o.work.data_ptr(), o.work.numel(), to_nccl(o.work.scalar_type()), srcRank, comm_, nullptr),
        "ncclRecv");
  o.finish();
  return done(c10d::OpType::RECV, tensors);
}

c10::intrusive_ptr<c10d::Work> BackendBraid::barrier(const c10d::BarrierOptions& opts) {
  int32_t one = 1;
  check(nccl().AllReduce(&one, &one, 1, ncclInt32, ncclSum, comm_, nullptr), "ncclAllReduce (barrier)");
  return done(c10d::OpType::BARRIER, {});
}

}  // namespace braid_torch
