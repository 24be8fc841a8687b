"""The Python package against the runtime it wraps: runs, streams, plans, errors, and
silero VAD streamed step by step against ONNX Runtime.

Run by scripts/python-wheel.sh after installing the wheel in a fresh venv. Silero's data
comes from scripts/fetch-silero.sh and scripts/silero-expected.sh (.cache/silero); with
BATON_REQUIRE_PEER_DATA=1 (as CI sets it) its absence fails instead of skipping.
BATON_CPU_PLUGIN (a path to libbaton_backend_cpu.so) adds the runs on the CPU plugin.
"""

import os
import pathlib

import numpy as np
import pytest

import baton

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINYNET = ROOT / "examples" / "tinynet" / "tinynet.btir"
# A dynamic region: how many rows reach its MatMul depends on x's values.
ROWS = ROOT / "examples" / "dynamic" / "rows.btir"
SILERO = ROOT / ".cache" / "silero"
# conformance/tolerances/f32.toml, [model]: whole-model outputs.
ABS, REL, ULP = 1e-5, 1e-4, 256


def within_model_tolerance(got, want):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))

    def ordered(x):
        b = x.view(np.int32).astype(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFF), b)

    ulps = np.abs(ordered(got) - ordered(want))
    return (d <= ABS) | (d <= REL * np.abs(want)) | (ulps <= ULP)


def tinynet_input(session):
    (decl,) = session.inputs
    shape = tuple(decl["shape"])
    n = int(np.prod(shape))
    values = ((np.arange(n) * 37) % 101).astype(np.float32) / 50.0 - 1.0
    return decl["name"], values.reshape(shape)


def test_run_returns_every_output_by_name_as_the_session_describes_it():
    session = baton.Engine().load(TINYNET)
    name, x = tinynet_input(session)
    out = session.run({name: x})
    assert list(out) == [o["name"] for o in session.outputs]
    for decl in session.outputs:
        y = out[decl["name"]]
        assert isinstance(y, np.ndarray)
        assert y.dtype == np.dtype(decl["dtype"])
        assert list(y.shape) == decl["shape"]
        assert np.isfinite(y).all()
    # The same run again gives the same bytes; an input that is not contiguous (made so
    # first) gives them too.
    again = session.run({name: x})
    strided = np.asfortranarray(x) if x.ndim > 1 else x[::-1].copy()[::-1]
    assert not strided.flags.c_contiguous or x.ndim <= 1
    third = session.run({name: strided})
    for k in out:
        assert out[k].tobytes() == again[k].tobytes() == third[k].tobytes()


def test_outputs_are_fresh_arrays_the_next_run_does_not_overwrite():
    session = baton.Engine().load(TINYNET)
    name, x = tinynet_input(session)
    first = session.run({name: x})
    kept = {k: v.copy() for k, v in first.items()}
    session.run({name: x * 0.5})
    for k in kept:
        assert first[k].tobytes() == kept[k].tobytes()


def test_plan_rows_say_where_each_node_runs():
    session = baton.Engine().load(TINYNET)
    rows = session.plan
    assert len(rows) > 0
    for r in rows:
        assert set(r) == {"node", "op", "target", "partition", "reason"}
        # No plugins: every node on the host's portable kernels.
        assert r["target"] == "host" and r["partition"] is None
    assert baton.Engine().devices == []


def test_bad_inputs_files_and_configs_raise_baton_errors_that_name_them():
    session = baton.Engine().load(TINYNET)
    name, x = tinynet_input(session)
    with pytest.raises(baton.BatonError, match=f"missing input '{name}'"):
        session.run({})
    with pytest.raises(baton.BatonError, match="'nope' is not an input"):
        session.run({name: x, "nope": x})
    with pytest.raises(baton.BatonError, match=name):
        session.run({name: x.astype(np.float64)})
    with pytest.raises(baton.BatonError, match=name):
        session.run({name: x[..., :1]})
    with pytest.raises(baton.BatonError, match="no Baton dtype"):
        session.run({name: x.astype(">f4")})
    with pytest.raises(baton.BatonError, match="missing.onnx"):
        baton.Engine().load(ROOT / "missing.onnx")
    with pytest.raises(baton.BatonError, match="paht"):
        baton.Engine(config_text='[[plugin]]\npaht = "x.so"\n')
    # A plugin file that is not there is a device row, not an error.
    engine = baton.Engine(config_text='[[plugin]]\npath = "no-such-plugin.so"\n')
    (row,) = engine.devices
    assert row["usable"] is False and "no-such-plugin.so" in row["detail"]


def cpu_engine():
    plugin = os.environ.get("BATON_CPU_PLUGIN")
    if not plugin:
        pytest.skip("BATON_CPU_PLUGIN not set")
    return baton.Engine(config_text=f'[[plugin]]\npath = "{plugin}"\n')


def test_the_cpu_plugin_takes_nodes_and_agrees_with_the_host():
    engine = cpu_engine()
    session = engine.load(TINYNET)
    assert any(r["target"] == "cpu" for r in session.plan)
    name, x = tinynet_input(session)
    got = session.run({name: x})
    want = baton.Engine().load(TINYNET).run({name: x})
    for k in want:
        assert within_model_tolerance(got[k], want[k]).all(), k


def test_check_compares_each_partition_with_the_reference():
    engine = cpu_engine()
    session = engine.load(TINYNET)
    name, x = tinynet_input(session)
    rows = session.check({name: x})
    assert rows and all(r["backend"] == "cpu" for r in rows)
    for r in rows:
        assert r["passed"] and r["past"] == 0 and r["first_node_past"] is None, r
        assert r["elements"] > 0 and r["max_abs"] < 1e-4
    # Host only: nothing delegated, nothing to compare.
    assert baton.Engine().load(TINYNET).check({name: x}) == []


def rows_expected(x):
    w = (((np.arange(12) * 5) % 12) * 0.2 - 0.6).astype(np.float32).reshape(4, 3)
    s = 2 * x
    return np.maximum(s[s[:, 0] > 0] @ w, 0)


def test_a_model_with_a_dynamic_region_runs_in_stages_and_checks_each():
    engine = cpu_engine()
    session = engine.load(ROWS)
    x = np.load(ROOT / "examples" / "dynamic" / "x.npy")
    for flip in (1.0, -1.0, 1.0):
        xi = (x * flip).astype(np.float32)
        got = session.run({"x": xi})["y"]
        want = rows_expected(xi)
        assert got.shape == want.shape
        assert within_model_tolerance(got, want).all()
    rows = session.check({"x": x})
    # One partition before the dynamic node (Compress), one after it.
    assert sorted({r["partition"] for r in rows}) == [0, 1], rows
    assert all(r["backend"] == "cpu" and r["passed"] for r in rows), rows


def silero_data():
    expected = SILERO / "expected"
    if not (expected / "probs.npy").is_file():
        if os.environ.get("BATON_REQUIRE_PEER_DATA") == "1":
            pytest.fail(f"{expected} missing (scripts/fetch-silero.sh, scripts/silero-expected.sh)")
        pytest.skip(f"{expected} missing")
    load = lambda f: np.load(expected / f)  # noqa: E731
    return {f: load(f"{f}.npy") for f in ("chunks", "sr", "state0", "probs", "stateN")}


@pytest.mark.parametrize("plugin", ["host", "cpu"])
def test_silero_streams_like_onnx_runtime(plugin):
    engine = cpu_engine() if plugin == "cpu" else baton.Engine()
    e = silero_data()
    session = engine.load(SILERO / "silero_vad.onnx")
    stream = session.stream({"state": "stateN"}, initial={"state": e["state0"]})
    probs = []
    for chunk in e["chunks"]:
        out = stream.step({"input": chunk, "sr": e["sr"]})
        assert list(out) == ["output"]
        probs.append(out["output"])
    probs = np.stack(probs)
    assert probs.shape == e["probs"].shape
    ok = within_model_tolerance(probs, e["probs"])
    assert ok.all(), f"{(~ok).sum()} probabilities outside the f32 [model] tolerance"
    assert within_model_tolerance(stream.state("state"), e["stateN"]).all()
    if plugin == "cpu":
        assert any(r["target"] == "cpu" for r in session.plan)
    # ONNX Runtime, live, on the first chunks: the same probabilities step for step.
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    peer = ort.InferenceSession(str(SILERO / "silero_vad.onnx"), options, providers=["CPUExecutionProvider"])
    stream.reset()
    state = e["state0"]
    for chunk in e["chunks"][:8]:
        want, state = peer.run(None, {"input": chunk, "state": state, "sr": e["sr"]})
        got = stream.step({"input": chunk, "sr": e["sr"]})["output"]
        assert within_model_tolerance(got, want).all()


def test_a_failed_step_leaves_the_state_and_reset_restarts():
    e = silero_data()
    session = baton.Engine().load(SILERO / "silero_vad.onnx")
    stream = session.stream({"state": "stateN"}, initial={"state": e["state0"]})
    first = stream.step({"input": e["chunks"][0], "sr": e["sr"]})["output"]
    before = stream.state("state")
    with pytest.raises(baton.BatonError, match="input"):
        stream.step({"input": e["chunks"][0][:, :100], "sr": e["sr"]})
    assert stream.state("state").tobytes() == before.tobytes()
    with pytest.raises(baton.BatonError, match="carried state"):
        stream.step({"input": e["chunks"][0], "sr": e["sr"], "state": before})
    stream.reset()
    again = stream.step({"input": e["chunks"][0], "sr": e["sr"]})["output"]
    assert again.tobytes() == first.tobytes()
