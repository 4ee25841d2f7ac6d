"""`npsco export --onnx`: a policy as an ONNX model, to run without npsco, torch or Python (ONNX Runtime, a robot's
controller, a browser).

The model maps raw observations `obs` (float32, `[batch, obs_dim]`) to the executed deterministic action `action`
(float32, `[batch, action_dim]`): the policy's observation normalisation (in float64, clipped), its MLP, the tanh
squashing of a squashed policy, and the clip to the action bounds; what `npsco.Policy.mean_action` computes. It is
built from the checkpoint's numpy weights with ONNX's own helpers (opset 17), so imported policies export too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.io import atomic_write_bytes
from npsco.policy import OBS_NORM_EPS, Policy

OPSET = 17


def _onnx() -> Any:
    try:
        import onnx  # lazy: an optional extra (npsco[onnx])
    except ImportError:
        raise NpscoError(
            "ONNX export needs the onnx package: pip install 'npsco[onnx]' (or pip install onnx)"
        ) from None
    return onnx


def policy_model(policy: Policy) -> Any:
    """The policy's deterministic action as an `onnx.ModelProto` (checked)."""
    onnx = _onnx()
    helper, tp = onnx.helper, onnx.TensorProto
    nodes, inits = [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(onnx.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    x = "obs"
    if policy.norm_obs:  # as Policy.normalize: in float64, then clipped and cast to float32
        x = node("Cast", [x], "obs64", to=tp.DOUBLE)
        x = node("Sub", [x, const("obs_mean", policy.obs_mean.astype(np.float64))], "centred")
        scale = np.sqrt(policy.obs_var.astype(np.float64) + OBS_NORM_EPS)
        x = node("Div", [x, const("obs_scale", scale)], "scaled")
        clip = policy.obs_clip
        x = node("Clip", [x, const("obs_lo", np.array(-clip)), const("obs_hi", np.array(clip))], "clipped")
        x = node("Cast", [x], "normalised", to=tp.FLOAT)
    last = len(policy.weights) - 1
    for i, (w, b) in enumerate(policy.weights):
        x = node("MatMul", [x, const(f"w{i}", w.T.astype(np.float32))], f"mm{i}")
        x = node("Add", [x, const(f"b{i}", b.astype(np.float32))], f"h{i}")
        if i < last:
            x = node("Tanh" if policy.activation == "tanh" else "Relu", [x], f"a{i}")
    low, high = policy.action_low.astype(np.float32), policy.action_high.astype(np.float32)
    if policy.output == "tanh":  # low + 0.5 (tanh(u) + 1) (high - low), as npsco.policy.squash
        x = node("Tanh", [x], "tanh_out")
        x = node("Add", [x, const("one", np.array(1.0, np.float32))], "plus_one")
        x = node("Mul", [x, const("half", np.array(0.5, np.float32))], "halved")
        x = node("Mul", [x, const("span", (high - low).astype(np.float32))], "spread")
        x = node("Add", [const("low_shift", low), x], "squashed")
    x = node("Max", [x, const("low", low)], "above_low")
    node("Min", [x, const("high", high)], "action")
    graph = helper.make_graph(
        nodes,
        "npsco_policy",
        [helper.make_tensor_value_info("obs", tp.FLOAT, ["batch", policy.obs_dim])],
        [helper.make_tensor_value_info("action", tp.FLOAT, ["batch", policy.action_dim])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="npsco")
    model.ir_version = 8  # what ONNX Runtime releases of the last years all read
    meta = {"env_id": str(policy.metadata.get("env_id", "")), "method": str(policy.metadata.get("method", ""))}
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    return model


def export_onnx(policy: Policy, out: str | Path) -> Path:
    """Write `policy` as an ONNX model to `out` (atomically); returns the path."""
    model = policy_model(policy)
    atomic_write_bytes(out, model.SerializeToString())
    return Path(out)
