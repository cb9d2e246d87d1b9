"""Step time and tokens/s of the translation model on 1, 2, 4 and 8 devices (JAX).

The same global batch is trained on meshes of growing size, each from the factory
(`keras_transformer.models.build("translation", ..., mesh=...)`): data parallel `Nx1` for
N = 1, 2, 4, 8, and the model split over the devices (`2x4`, `1x8`). One process holds all
the devices; a mesh of N uses the first N of them (`make_distribution(devices=...)`).

On a CPU (the default) the devices are simulated (`jax_num_cpu_devices`): they share the
machine's cores, so no speed-up is possible and the table shows the overhead of sharding
and all-reduces instead: `time / 1 device` should stay near 1, not grow with N. With
`--accelerators`, the real devices of the machine (GPUs, TPUs) and a larger model are used,
the multi-accelerator run this script is prepared for; `--dry-run` prints its plan without
running anything (how it is tested on a CPU).

Runs:
    KERAS_BACKEND=jax python benchmarks/distribution.py              # CPU, simulated, appends
    KERAS_BACKEND=jax python benchmarks/distribution.py --accelerators   # 8 GPUs, appends
    KERAS_BACKEND=jax python benchmarks/distribution.py --accelerators --dry-run
"""

import argparse
import datetime
import os
import platform
import shlex
import subprocess
import sys
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# CPU: the tiny model on small batches, so the whole table takes a few minutes on 2 cores.
CPU = dict(
    preset="tiny", batch=32, length=32, vocabulary=4000, steps=10, warmup=2, devices=8,
    overrides=dict(num_heads=8),
)  # fmt: skip
# Accelerators: the paper's base model, 4096 + 4096 tokens a step on every mesh.
ACCELERATORS = dict(
    preset="base", batch=128, length=32, vocabulary=32000, steps=30, warmup=3, devices=None,
    overrides={},
)  # fmt: skip


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--accelerators", action="store_true", help="real GPUs/TPUs, base model")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per mesh")
    parser.add_argument(
        "--results",
        default=os.path.join(REPOSITORY, "benchmarks", "RESULTS.md"),
        help="Markdown file the table is appended to",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be a positive integer; got {args.steps}")
    return args


def meshes(device_count):
    """Data-parallel meshes of 1, 2, 4, ... devices, then the model split over all of them."""
    plan, size = [], 1
    while size <= device_count:
        plan.append((size, 1))
        size *= 2
    if device_count >= 4:
        plan += [(device_count // 4, 4), (1, device_count)]
    return plan


def synthetic_batch(settings, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (settings["batch"], settings["length"])
    source = rng.integers(4, settings["vocabulary"], shape).astype("int32")
    target = rng.integers(4, settings["vocabulary"], shape).astype("int32")
    decoder = np.concatenate([np.full_like(target[:, :1], 2), target[:, :-1]], axis=1)
    return {"encoder_token_ids": source, "decoder_token_ids": decoder}, target


def measure(settings, mesh, devices):
    import keras

    import keras_transformer as kt

    keras.distribution.set_distribution(None)
    keras.backend.clear_session()
    data, model_size = mesh
    distribution = kt.distribution.make_distribution(
        mesh, dict(_config(settings)), devices=devices[: data * model_size]
    )
    keras.distribution.set_distribution(distribution)
    model = kt.models.build(
        "translation",
        preset=settings["preset"],
        precision="float32",
        source_vocabulary_size=settings["vocabulary"],
        dropout=0.0,
        **settings["overrides"],
    )
    x, y = synthetic_batch(settings)
    for _ in range(settings["warmup"]):
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for _ in range(settings["steps"]):
        loss = model.train_on_batch(x, y)  # numpy logs: waits for the step
    seconds = (time.perf_counter() - start) / settings["steps"]
    tokens = 2 * settings["batch"] * settings["length"]  # source + target
    keras.distribution.set_distribution(None)
    return {"mesh": f"{data}x{model_size}", "ms": seconds * 1000, "tokens_per_s": tokens / seconds,
            "loss": float(loss[0] if isinstance(loss, list) else loss)}  # fmt: skip


def _config(settings):
    """The model's sizes, for the layout map (the factory passes the same to the model)."""
    from keras_transformer.models.presets import PRESETS

    preset = dict(PRESETS[settings["preset"]])
    preset.update(settings["overrides"])
    return dict(
        source_vocabulary_size=settings["vocabulary"],
        hidden_dim=preset["hidden_dim"],
        num_heads=preset["num_heads"],
        intermediate_dim=preset["intermediate_dim"],
    )


def markdown_table(rows):
    base = rows[0]["ms"]
    lines = [
        "| mesh (data x model) | devices | ms / step | tokens/s | time / 1 device | loss |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        data, model = (int(n) for n in row["mesh"].split("x"))
        lines.append(
            f"| {row['mesh']} | {data * model} | {row['ms']:.1f} | {row['tokens_per_s']:,.0f} "
            f"| {row['ms'] / base:.2f} | {row['loss']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def describe_machine():
    import jax
    import keras

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], cwd=REPOSITORY, capture_output=True, text=True
    ).stdout.strip()
    device = jax.devices()[0]
    return {
        "commit": commit + (" (uncommitted changes in the tree)" if dirty else ""),
        "versions": f"Python {platform.python_version()}, Keras {keras.__version__}, "
        f"JAX {jax.__version__}",
        "devices": f"{len(jax.devices())} x {device.platform.upper()} ({device.device_kind})",
        "cpu": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if os.environ["KERAS_BACKEND"] != "jax":
        sys.exit("error: this benchmark runs on JAX (keras.distribution); set KERAS_BACKEND=jax")
    settings = dict(ACCELERATORS if args.accelerators else CPU)
    if args.steps:
        settings["steps"] = args.steps
    if args.dry_run:
        count = settings["devices"] or 8
        print(f"plan ({'accelerators' if args.accelerators else 'simulated CPU devices'}): "
              f"preset {settings['preset']}, batch {settings['batch']} x {settings['length']} "
              f"+ {settings['length']} tokens, {settings['warmup']} + {settings['steps']} steps; "
              f"meshes for {count} devices: "
              + ", ".join(f"{d}x{m}" for d, m in meshes(count)))  # fmt: skip
        return None
    import keras

    import keras_transformer as kt

    if not args.accelerators:
        kt.distribution.simulate_cpu_devices(settings["devices"])
    devices = keras.distribution.list_devices()
    load_before = os.getloadavg()[0]
    started = time.time()
    rows = [measure(settings, mesh, devices) for mesh in meshes(len(devices))]
    elapsed = time.time() - started
    table = markdown_table(rows)
    print(table)
    if args.no_write:
        return rows
    machine = describe_machine()
    arguments = sys.argv[1:] if argv is None else argv
    command = "KERAS_BACKEND=jax python " + shlex.join(["benchmarks/distribution.py", *arguments])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(args.results, "a", encoding="utf-8") as results:
        results.write(f"\n## Scaling over devices, {stamp}\n\n")
        results.write("Appended by `benchmarks/distribution.py`; see its docstring.\n\n")
        results.write(f"Command: `{command}`\n\n")
        results.write(f"- Commit {machine['commit']}; {machine['versions']}\n")
        results.write(f"- Devices: {machine['devices']}; CPU: {machine['cpu']}\n")
        results.write(
            f"- Model: preset {settings['preset']} {settings['overrides'] or ''}, float32; batch "
            f"{settings['batch']} x {settings['length']} source + {settings['length']} target "
            f"tokens; mean of {settings['steps']} timed steps after {settings['warmup']}\n"
        )
        results.write(
            f"- Wall time: {elapsed:.0f} s; 1-minute load average {load_before:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end\n\n"
        )
        results.write(table)
    return rows


if __name__ == "__main__":
    main()
