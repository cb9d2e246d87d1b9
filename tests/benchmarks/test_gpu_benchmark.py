"""benchmarks/gpu.py: its FLOP count, peaks, flags, lease plan and trace parser, and (slow) its
CPU dry run without TensorFlow."""

import gzip
import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.fresh_python import run_python

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPT = REPOSITORY / "benchmarks" / "gpu.py"
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import gpu  # noqa: E402
import gpu_profile  # noqa: E402

from keras_transformer.models.presets import PRESETS  # noqa: E402


def run_script(*flags, block_tensorflow_in=None, timeout=300):
    """Runs gpu.py on JAX in a fresh interpreter; with a folder, TensorFlow is unimportable.

    The block is a `sitecustomize` module in that folder, first on PYTHONPATH, so that the
    processes gpu.py starts (the fit part's second process) have no TensorFlow either.
    """
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = str(REPOSITORY)
    if block_tensorflow_in is not None:  # the GPU machine has no TensorFlow
        block_tensorflow_in.mkdir(exist_ok=True)
        (block_tensorflow_in / "sitecustomize.py").write_text(
            "import sys\nfor name in ('tensorflow', 'tensorflow_text'):\n"
            "    sys.modules[name] = None\n"
        )
        env["PYTHONPATH"] = f"{block_tensorflow_in}{os.pathsep}{REPOSITORY}"
    return run_python(SCRIPT, *flags, env=env, timeout=timeout)


@pytest.mark.parametrize("preset", ["base", "big"])
def test_training_flops_is_six_per_weight_per_token_when_attention_is_negligible(preset):
    size = PRESETS[preset]
    d, ff, layers, vocabulary = (
        size["hidden_dim"],
        size["intermediate_dim"],
        size["num_layers"],
        37000,
    )
    # Matmul weights a token meets: encoder (4 projections + feed-forward), decoder (8
    # projections + feed-forward), the output projection; 2 FLOPs each forward, x3 training.
    weights = layers * (4 * d * d + 2 * d * ff) + layers * (8 * d * d + 2 * d * ff) + d * vocabulary
    flops = gpu.training_flops(size, vocabulary, batch=1, source=1, target=1)
    assert flops == pytest.approx(6 * weights, rel=1e-3)
    # What grows faster than the tokens is attention's QKᵀ and AV: 2 n² d multiply-adds for each
    # of encoder self-, decoder self- and cross-attention per layer, 2 FLOPs each, x3 training.
    n = 1024
    long = gpu.training_flops(size, vocabulary, batch=1, source=n, target=n)
    assert long - n * flops == 3 * 2 * 3 * 2 * layers * d * (n * n - n)
    assert gpu.training_flops(size, vocabulary, batch=4, source=n, target=n) == 4 * long


def test_the_token_budget_shape_is_the_papers_25000_tokens_a_side():
    # "approximately 25000 source tokens and 25000 target tokens": 96 rows of 256, a multiple
    # of 8 (98 would be nearer, at 25,088), 1.7% under.
    rows = gpu.token_budget_rows(256)
    assert rows == 96 and rows % 8 == 0
    assert abs(rows * 256 - 25000) / 25000 < 0.02
    assert gpu.token_budget_rows(128) == 192 and gpu.token_budget_rows(64) == 392
    assert gpu.FULL["shapes"] == ((96, 256), (64, 256))
    size, vocabulary = PRESETS["big"], gpu.VOCABULARY
    at_64 = gpu.training_flops(size, vocabulary, batch=64, source=256, target=256)
    at_96 = gpu.training_flops(size, vocabulary, batch=96, source=256, target=256)
    # The figure of the earlier H200 run's big rows, and half as much again at 96 rows.
    assert round(at_64 / 1e12, 2) == 21.97
    assert at_96 * 2 == at_64 * 3 and round(at_96 / 1e12, 2) == 32.95


@pytest.mark.parametrize(
    "kind, peak",
    [
        ("NVIDIA H100 80GB HBM3", (989.0, "H100 SXM")),
        ("NVIDIA H100 SXM5 80GB", (989.0, "H100 SXM")),
        ("NVIDIA H200", (989.0, "H200")),
        ("NVIDIA H200 141GB HBM3e", (989.0, "H200")),
        ("NVIDIA H100 PCIe", None),  # lower clocks: another datasheet figure
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA A100-SXM4-80GB", None),
        ("cpu", None),
        ("", None),
    ],
)
def test_the_datasheet_peak_follows_the_device_kind(kind, peak):
    assert gpu.datasheet_peak(kind) == peak


def test_flags_are_checked():
    with pytest.raises(SystemExit):
        gpu.parse_args(["--parts", "train,fly"])
    with pytest.raises(SystemExit):
        gpu.parse_args(["--steps", "0"])
    with pytest.raises(SystemExit):
        gpu.parse_args(["--shapes", "96by256"])
    with pytest.raises(SystemExit):
        gpu.parse_args(["--call", str(len(gpu.LEASE_PLAN) + 1)])
    args = gpu.parse_args(["--dry-run", "--batch", "3"])
    assert args.settings["shapes"] == ((3, 8),) and args.settings["presets"] == ("tiny",)
    args = gpu.parse_args([])
    assert args.settings["presets"] == ("big", "base")
    assert args.parts == ["fit", "train", "profile", "attention", "generate"]
    args = gpu.parse_args(["--shapes", "96x256,32x512", "--presets", "base", "--length", "128"])
    assert args.settings["shapes"] == ((96, 128),) and args.settings["presets"] == ("base",)
    assert gpu.parse_args(["--fit-max-length", "24"]).settings["fit"]["max_length"] == 24
    assert gpu.FULL["fit"]["max_length"] == 64  # the flag changes a copy


def test_the_lease_plan_fits_one_lease():
    budgets = [call["timeout_s"] for call in gpu.LEASE_PLAN]
    assert all(0 < budget <= 5 * 60 for budget in budgets)
    assert sum(budgets) <= 12 * 60
    assert gpu.CALL_LIMIT_S == 300 and gpu.LEASE_LIMIT_S == 720
    parts, trained = set(), set()
    for number, call in enumerate(gpu.LEASE_PLAN, 1):
        args = gpu.parse_args(["--call", str(number)])
        assert args.budget == call["timeout_s"] - gpu.BUDGET_BEFORE_S
        # What the call measures should take, by the per-measurement estimates, fits its
        # budget after the wheels' installation (run_gpu.sh: 10 s at most).
        assert gpu.estimated_seconds(args) <= args.budget - 10, number
        parts |= set(args.parts)
        if "train" in args.parts:
            settings = args.settings
            trained |= {(p, s) for p in settings["presets"] for s in settings["shapes"]}
    # One lease covers the four parts; generation was measured before and is left out.
    assert parts == {"fit", "train", "profile", "attention"}
    assert trained == {(p, s) for p in ("big", "base") for s in ((96, 256), (64, 256))}
    # The command line overrides the call's flags; the call's budget is the default.
    args = gpu.parse_args(["--call", "3", "--shapes", "64x256", "--budget", "100"])
    assert args.settings["shapes"] == ((64, 256),) and args.budget == 100
    assert args.parts == ["train"] and args.settings["presets"] == ("base",)


def test_run_gpu_sh_lists_the_lease_plan():
    script = (REPOSITORY / "benchmarks" / "run_gpu.sh").read_text()
    listed = re.findall(r"^#   (call \d+: .*)$", script, re.M)
    assert listed == gpu.plan_lines()[: len(gpu.LEASE_PLAN)]
    assert "python3 benchmarks/gpu.py --plan" in script
    assert "--call-timeout" in script and 'timeout -s INT -k 8 "$INTERRUPT_S"' in script
    assert gpu.main(["--call-timeout", "2"]) == []


def synthetic_trace(steps=2):
    """A GPU-like trace: a host process, a device process with two streams and a derived line."""
    host, device = 1, 2
    events = [
        dict(ph="M", pid=host, name="process_name", args=dict(name="/host:CPU")),
        dict(ph="M", pid=host, tid=7, name="thread_name", args=dict(name="python")),
        dict(ph="M", pid=device, name="process_name", args=dict(name="/device:GPU:0")),
        dict(ph="M", pid=device, tid=1, name="thread_name", args=dict(name="Stream #13(Compute)")),
        dict(
            ph="M", pid=device, tid=2, name="thread_name", args=dict(name="Stream #14(MemcpyH2D)")
        ),
        dict(ph="M", pid=device, tid=3, name="thread_name", args=dict(name="XLA Ops")),
    ]
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"
    for step in range(steps):
        t = 1000.0 * step
        events += [
            dict(ph="X", pid=host, tid=7, ts=t, dur=900.0, name="PjitFunction(train_step)"),
            # The derived line spans the kernels: left out, or they would count twice.
            dict(ph="X", pid=device, tid=3, ts=t, dur=500.0, name="fusion.1"),
            dict(
                ph="X",
                pid=device,
                tid=1,
                ts=t,
                dur=300.0,
                name=gemm,
                args=dict(
                    hlo_op="custom-call.3", tf_op="jit(train_step)/encoder/query/dot_general"
                ),
            ),
            dict(ph="X", pid=device, tid=1, ts=t + 300, dur=100.0, name=gemm),
            dict(ph="X", pid=device, tid=1, ts=t + 400, dur=50.0, name="loop_add_fusion_2"),
            dict(ph="X", pid=device, tid=1, ts=t + 450, dur=40.0, name="cudnn_sdpa_fprop"),
            dict(ph="X", pid=device, tid=2, ts=t, dur=10.0, name="MemcpyH2D"),
        ]
    return dict(displayTimeUnit="ns", traceEvents=events)


def test_the_trace_parser_sums_device_kernels_per_step(tmp_path):
    folder = tmp_path / "plugins" / "profile" / "2026_12_07_18_00_00"
    folder.mkdir(parents=True)
    with gzip.open(folder / "perfetto_trace.json.gz", "wt") as f:
        json.dump(synthetic_trace(steps=2), f)
    path = gpu_profile.find_trace_file(str(tmp_path))
    assert path.endswith("perfetto_trace.json.gz")
    table = gpu_profile.device_op_table(path, steps=2, top=3)
    assert table["devices"] == ["/device:GPU:0"] and table["host_events"] == 2
    assert table["lines"] == ["Stream #13(Compute)", "Stream #14(MemcpyH2D)"]
    assert table["device_events"] == 10  # 5 kernels a step, the "XLA Ops" line left out
    assert table["device_ms"] == pytest.approx(0.5)  # 500 µs of kernels per step
    names = [row["name"] for row in table["rows"]]
    assert names == [names[0], "loop_add_fusion_2", "cudnn_sdpa_fprop"]  # top 3 of 4
    first = table["rows"][0]
    assert first["kind"] == "matmul" and first["calls"] == 2
    assert first["ms"] == pytest.approx(0.4) and first["share"] == pytest.approx(0.8)
    assert first["where"] == "custom-call.3 · encoder/query/dot_general"
    assert table["kinds"] == pytest.approx(
        {"matmul": 0.8, "fusion (elementwise)": 0.1, "attention": 0.08, "copy, memset": 0.02}
    )
    assert list(table["kinds"])[0] == "matmul"
    assert "10 device events" in table["message"]
    cells = gpu_profile.markdown_rows(table, width=20)
    assert len(cells) == 3 and cells[0][0] == "1" and cells[0][1].endswith("…")
    assert cells[0][3:6] == ["0.400", "80.0%", "2.0"]
    assert gpu_profile.kinds_line(table).startswith("matmul 80.0%, fusion (elementwise) 10.0%")
    # A plain (not gzipped) file reads the same.
    (tmp_path / "plain.json").write_text(json.dumps(synthetic_trace(steps=2)))
    assert (
        gpu_profile.device_op_table(str(tmp_path / "plain.json"), 2, 3)["rows"] == (table["rows"])
    )


def test_the_trace_parser_says_so_when_there_are_only_host_events():
    trace = synthetic_trace(steps=1)
    devices = {
        e["pid"] for e in trace["traceEvents"] if e.get("args", {}).get("name") == "/device:GPU:0"
    }
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["pid"] not in devices]
    table = gpu_profile.device_op_table(trace)
    assert table["rows"] == [] and table["device_events"] == 0 and table["host_events"] == 1
    assert table["message"].startswith("no device events in the trace (1 host events)")
    assert "CPU" in table["message"]
    assert gpu_profile.find_trace_file("/nonexistent-folder") is None


@pytest.mark.parametrize(
    "name, kind",
    [
        ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT", "matmul"),
        ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", "matmul"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", "attention"),
        ("input_reduce_fusion_7", "reduction"),
        ("loop_convert_fusion_12", "fusion (elementwise)"),
        ("MemcpyD2D", "copy, memset"),
        ("rng_bit_generator", "other"),
    ],
)
def test_kernel_kinds(name, kind):
    assert gpu_profile.kernel_kind(name) == kind


def test_training_rows_pair_each_shape_and_preset_with_its_own_ours(monkeypatch):
    # Stand-in measurements: the loop over shapes, presets and contenders, without models.
    calls = []

    def measure(preset, contender, settings, shape, trace_folder=None):
        calls.append((preset, contender, shape, trace_folder is not None))
        seconds = (2.0 if contender == "keras_hub" else 1.0) * shape[0] / 64
        found = dict(seconds=seconds, flops=989e12, params=1e6, compile_s=1.0, wall_s=0.0)
        if trace_folder:
            found["profile"] = dict(table=None, step_ms=1.0, steps=2, path=None)
        return found

    monkeypatch.setattr(gpu, "measure_training", measure)
    args = gpu.parse_args(["--presets", "big,base", "--parts", "train,profile"])
    run = gpu.Run(args, gpu.Budget(1000), peak_tflops=494.5, datasheet=(989.0, "H200"))
    gpu.training_rows(run)
    assert [(c[0], c[1], c[2]) for c in calls] == [
        (preset, contender, shape)
        for shape in ((96, 256), (64, 256))
        for preset in ("big", "base")
        for contender in ("ours", "keras_hub")
    ]
    # Only the first shape's big models are traced, once each: the profile part reuses them.
    assert [c[:3] for c in calls if c[3]] == [
        ("big", "ours", (96, 256)),
        ("big", "keras_hub", (96, 256)),
    ]
    assert set(run.profiles) == {"ours", "keras_hub"}
    for r in run.rows:
        assert r["ratio"] == (2.0 if r["contender"] == "keras_hub" else 1.0)
        assert r["mfu_measured"] == pytest.approx(2 * r["mfu"])
    assert run.rows[0]["shape"] == "big, 96x256" and run.rows[0]["mfu"] == pytest.approx(2 / 3)
    # With no budget left every row says so, and nothing is measured.
    calls.clear()
    run = gpu.Run(args, gpu.Budget(10), peak_tflops=None, datasheet=None)
    gpu.training_rows(run)
    assert calls == [] and {r["note"] for r in run.rows} == {"skipped: budget"}


@pytest.mark.parametrize("tokens, max_length", [(8192, 64), (96, 24), (4096, 256), (300, 100)])
def test_fit_shapes_are_the_translation_pipelines(tokens, max_length):
    from keras_transformer.text import translation_batch_shapes

    expected = translation_batch_shapes(tokens, max_length)
    assert gpu.fit_batch_shapes(tokens, max_length) == expected
    batches, real = gpu.fit_batches(expected, steps=len(expected) + 1, vocabulary=50)
    shorter = [0] + [length for _, length in expected]
    for (inputs, labels), (rows, length), count, previous in zip(batches, expected, real, shorter):
        assert labels.shape == inputs["encoder_token_ids"].shape == (rows, length)
        assert count == int((labels != 0).sum() + (inputs["encoder_token_ids"] != 0).sum())
        # Each sequence belongs to its bucket: longer than the previous bucket's length.
        lengths = (labels != 0).sum(1)
        assert previous < lengths.min() and lengths.max() <= length


def test_reused_benchmark_functions_keep_their_signatures():
    # gpu.py imports these from the other benchmarks instead of copying them.
    import inspect

    import attention
    import generation
    import translation_step

    assert list(inspect.signature(translation_step.keras_hub_model).parameters) == [
        "settings",
        "vocabulary_size",
        "precision",
    ]
    assert list(inspect.signature(generation.make_runners).parameters) == [
        "shape",
        "jit",
        "contenders",
    ]
    assert "run_limit_bytes" in inspect.signature(attention.measure).parameters


@pytest.mark.slow
def test_dry_run_goes_through_every_part_without_tensorflow(tmp_path):
    output = tmp_path / "results.md"
    done = run_script(
        "--dry-run",
        "--output",
        str(output),
        "--profile-dir",
        str(tmp_path / "profile"),
        block_tensorflow_in=tmp_path / "no_tensorflow",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = output.read_text()
    assert "GPU run" in text and "(dry run)" in text and "Command:" in text
    table = text[text.index("\n| part |") + 1 :].split("\n\n")[0]
    lines = table.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == gpu.HEADER
    rows = [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]
    ]
    parts = [(r["part"], r["contender"]) for r in rows]
    assert parts == [
        ("fit", "ours"),
        ("train", "ours"),
        ("train", "keras_hub"),
        ("profile", "ours"),
        ("profile", "keras_hub"),
        ("attention", "ours"),
        ("attention", "ours_causal"),
        ("attention", "keras"),
        ("attention", "naive"),
        ("generate", "ours"),
        ("generate", "keras_hub"),
    ]
    measured = [r for r in rows if r["part"] != "profile"]
    for r in rows:
        assert not r["note"].startswith(("failed", "skipped")), r
    for r in measured:
        assert float(r["tokens/s"].replace(",", "")) > 0
        assert float(r["ms"].replace(",", "")) > 0
    # The fit part: 2 fixed shapes in the dry run, each compiled once in the first process,
    # and loaded from the compilation cache in the second, which had no TensorFlow either.
    fit = rows[0]["note"]
    assert fit.startswith("first process: 2 compilations of the train step")
    second = fit[fit.index("second process") :]
    assert "0 compilations of the train step" in second
    assert "2 loaded from the cache" in second
    assert '"tensorflow_imported": false' in done.stdout
    # No datasheet peak for a CPU: that MFU column is empty, the measured one is not.
    for r in rows[1:3]:
        assert r["MFU (datasheet peak)"] == "—" and r["MFU (measured peak)"].endswith("%")
    assert "none known for 'cpu'" in text
    # On the CPU the trace has host events only: the profile rows and sections say so.
    for r in rows[3:5]:
        assert r["note"].startswith("no device events in the trace")
    assert text.count("Device kernels of the tiny, 3x8 train step") == 2
    assert list((tmp_path / "profile").glob("*/plugins/profile/*/perfetto_trace.json.gz"))
    for r in rows[5:9]:
        assert float(r["memory GiB"]) >= 0 and "einsum-softmax (XLA)" in r["note"]
    # The compilation cache was a new folder under runs/, removed at the end.
    (cache,) = re.findall(r"^compilation cache: (.*) \(removed at the end\)$", done.stdout, re.M)
    assert Path(cache).parent == REPOSITORY / "runs" / "gpu_compilation_cache"
    assert not Path(cache).exists()
