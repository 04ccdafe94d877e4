// The ops hvrun.tensorflow builds graphs from: Horovod's ops (HorovodAllreduce, ...) under the
// names Hvrun*, with Horovod's attributes and defaults. reduce_op carries Horovod's constants.
// process_set_id names the process set the collective runs on (0, the global set, by default;
// hvrun.process_sets gives the ids); HvrunSize and HvrunProcessSetIncluded read that set.
//
// Every op is stateful: otherwise Grappler folds a collective of constant inputs by running its
// kernel while it optimises the graph (a collective submitted at optimisation time, and again
// when the folded node is kept after a failure), merges two identical collectives, or prunes
// one whose result is unused (which another rank may still be waiting for). tf.function chains
// stateful ops in program order; hvrun.tensorflow lists the collectives with TensorFlow's own
// (CollectiveReduce, NcclAllReduce) as ops that must run concurrently (mpi_ops.py).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

constexpr const char* kReducedTypes = "T: {uint8, int8, int32, int64, float16, bfloat16, float32, float64}";
constexpr const char* kMovedTypes =
    "T: {uint8, int8, uint16, int16, int32, int64, float16, bfloat16, float32, float64, bool}";
constexpr const char* kScatteredTypes = "T: {int32, int64, float16, bfloat16, float32, float64}";

absl::Status same_shapes(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

// Dimension 0 is known only when the op runs (it depends on every rank's tensor).
absl::Status first_dimension_unknown(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) {
    if (InferenceContext::RankKnown(c->input(i)) && InferenceContext::Rank(c->input(i)) == 0)
      return absl::InvalidArgumentError("hvrun: this collective needs tensors of rank 1 or more");
    ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status scalar(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("HvrunAllreduce")
    .SetIsStateful()
    .Attr(kReducedTypes)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("sum: T")
    .SetShapeFn(same_shapes);

REGISTER_OP("HvrunGroupedAllreduce")
    .SetIsStateful()
    .Attr(kReducedTypes)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("num_tensors: int")
    .Attr("process_set_id: int = 0")
    .Input("tensors: num_tensors*T")
    .Output("sum: num_tensors*T")
    .SetShapeFn(same_shapes);

REGISTER_OP("HvrunAllgather")
    .SetIsStateful()
    .Attr(kMovedTypes)
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(first_dimension_unknown);

REGISTER_OP("HvrunGroupedAllgather")
    .SetIsStateful()
    .Attr(kMovedTypes)
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("num_tensors: int")
    .Attr("process_set_id: int = 0")
    .Input("tensors: num_tensors*T")
    .Output("outputs: num_tensors*T")
    .SetShapeFn(first_dimension_unknown);

REGISTER_OP("HvrunBroadcast")
    .SetIsStateful()
    .Attr(kMovedTypes)
    .Attr("root_rank: int")
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(same_shapes);

REGISTER_OP("HvrunAlltoall")
    .SetIsStateful()
    .Attr(kMovedTypes)
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle output;
      TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &output));
      c->set_output(0, output);
      c->set_output(1, c->Vector(InferenceContext::kUnknownDim));
      return absl::OkStatus();
    });

REGISTER_OP("HvrunReducescatter")
    .SetIsStateful()
    .Attr(kScatteredTypes)
    .Attr("reduce_op: int")
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(first_dimension_unknown);

REGISTER_OP("HvrunGroupedReducescatter")
    .SetIsStateful()
    .Attr(kScatteredTypes)
    .Attr("reduce_op: int")
    .Attr("ignore_name_scope: bool = False")
    .Attr("tensor_name: string = ''")
    .Attr("num_tensors: int")
    .Attr("process_set_id: int = 0")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Input("tensors: num_tensors*T")
    .Output("outputs: num_tensors*T")
    .SetShapeFn(first_dimension_unknown);

// In program order in a tf.function (a barrier after the collectives before it).
REGISTER_OP("HvrunJoin").Output("output: int32").SetIsStateful().SetShapeFn(scalar);
REGISTER_OP("HvrunBarrier").Attr("process_set_id: int = 0").SetIsStateful().SetShapeFn(
    ::tensorflow::shape_inference::NoOutputs);

// Straggler attribution's marks, when the graph runs (hvd.mark_step / mark_phase inside a
// tf.function): in program order with the other stateful ops.
REGISTER_OP("HvrunMarkStep").SetIsStateful().SetShapeFn(::tensorflow::shape_inference::NoOutputs);
REGISTER_OP("HvrunMarkPhase")
    .Attr("phase: string")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

// Values read when the graph runs, not when it is built (Horovod's size_op, rank_op, ...).
REGISTER_OP("HvrunSize").Attr("process_set_id: int = 0").Output("size: int32").SetIsStateful().SetShapeFn(scalar);
REGISTER_OP("HvrunProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("included: int32")
    .SetIsStateful()
    .SetShapeFn(scalar);
REGISTER_OP("HvrunLocalSize").Output("local_size: int32").SetIsStateful().SetShapeFn(scalar);
REGISTER_OP("HvrunRank").Output("rank: int32").SetIsStateful().SetShapeFn(scalar);
REGISTER_OP("HvrunLocalRank").Output("local_rank: int32").SetIsStateful().SetShapeFn(scalar);
