"""Where a JAX step spends its device time: the top ops of a profiler trace, offline.

`trace_steps(run, folder, steps)` runs `run()` `steps` times under `jax.profiler.trace` with
``create_perfetto_trace=True``, which writes, beside the profiler's ``xplane.pb``, a
``perfetto_trace.json.gz``: Chrome's trace-event JSON, gzipped. `device_op_table` reads that
file with the standard library only (the GPU machine has no XProf or TensorBoard to read
the ``xplane.pb``), keeps the events of the device timelines, groups them by name (on a GPU
the kernel: a cuBLAS GEMM, a cuDNN attention kernel, an XLA fusion) and sums their
durations. On a CPU the trace holds host events only; the table is then empty and says so.

The device timelines are the processes named ``/device:...`` (``/host:CPU`` is the host).
Within them the profiler may add timelines derived from the kernels (`DERIVED_LINES`, such
as "XLA Ops", one event per HLO op spanning its kernels); those are left out, or every
kernel would be counted twice.
"""

import collections
import glob
import gzip
import json
import os

# Timelines the profiler derives from the kernels of a device's streams, not kernels.
DERIVED_LINES = frozenset(
    {
        "XLA Modules",
        "XLA Ops",
        "Async XLA Ops",
        "XLA TraceMe",
        "Steps",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
    }
)
# Which kind of work a kernel does, from words in its name; the first match wins.
KINDS = (
    ("attention", ("sdpa", "fmha", "flash", "attention")),
    ("matmul", ("gemm", "nvjet", "xmma", "cublas", "cutlass", "matmul")),
    ("copy, memset", ("memcpy", "memset", "copy", "transpose")),
    ("reduction", ("reduce", "reduction")),
    ("fusion (elementwise)", ("fusion",)),
)


def kernel_kind(name):
    """The `KINDS` entry of a kernel's name, or "other"."""
    lower = name.lower()
    for kind, words in KINDS:
        if any(word in lower for word in words):
            return kind
    return "other"


def find_trace_file(folder):
    """The newest trace-event JSON under a `jax.profiler.trace` folder, or `None`.

    ``perfetto_trace.json.gz`` where JAX wrote one, else the profiler's own
    ``*.trace.json.gz`` (the same events, with a metadata field).
    """
    found = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
    found = found or glob.glob(os.path.join(folder, "**", "*.trace.json.gz"), recursive=True)
    return max(found, key=os.path.getmtime) if found else None


def read_trace(path):
    """The trace's JSON object; the file may be gzipped or plain."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _where(args):
    """A short pointer from a device event to the program: HLO op and the end of its JAX op."""
    hlo = args.get("hlo_op") or ""
    # JAX's op name is its name stack, e.g. "jit(train_step)/.../query/dot_general": the
    # last components name the layer and the primitive.
    scope = args.get("tf_op") or args.get("name") or ""
    scope = "/".join(str(scope).split("/")[-3:])
    return " · ".join(part for part in (str(hlo), scope) if part)


def device_op_table(trace, steps=1, top=15):
    """Device time per kernel name in a trace, largest first.

    Args:
        trace: the trace's JSON object (`read_trace`), or the path of its file.
        steps: how many steps the trace covers; times are given per step.
        top: how many names to keep in `rows` (the totals count all of them).

    Returns:
        A dict: `rows`, one dict per name (`name`, `kind`, `ms` per step, `share` of the
        device time, `calls` per step, `where`: the HLO and JAX op of its longest event);
        `device_ms` (all device events, per step); `kinds` (`{kind: share}`, largest
        first); `devices` and `lines` (the device processes and timelines read);
        `device_events` and `host_events` (counts); `message` (one line saying what was
        found, and why the table is empty when it is).
    """
    if isinstance(trace, (str, os.PathLike)):
        trace = read_trace(trace)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for event in events:
        if event.get("ph") != "M":
            continue
        name = (event.get("args") or {}).get("name", "")
        if event.get("name") == "process_name":
            processes[event.get("pid")] = name
        elif event.get("name") == "thread_name":
            threads[(event.get("pid"), event.get("tid"))] = name
    devices = {pid for pid, name in processes.items() if str(name).startswith("/device:")}
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    on_device = [e for e in spans if e.get("pid") in devices]
    lines = {(e["pid"], e.get("tid")) for e in on_device}
    lines = {key for key in lines if threads.get(key, "") not in DERIVED_LINES}
    # Kernels and copies run on the streams; prefer them where the trace names any.
    streams = {key for key in lines if threads.get(key, "").startswith("Stream")}
    lines = streams or lines
    kept = [e for e in on_device if (e["pid"], e.get("tid")) in lines]
    result = dict(
        rows=[],
        device_ms=0.0,
        kinds={},
        devices=sorted(processes[pid] for pid in devices),
        lines=sorted(threads.get(key, str(key[1])) for key in lines),
        device_events=len(kept),
        host_events=len(spans) - len(on_device),
    )
    if not kept:
        result["message"] = (
            f"no device events in the trace ({result['host_events']:,} host events): "
            + (
                "a run on the CPU, whose XLA programs run on host threads (on a GPU: the "
                "profiler found no device to trace)"
                if not devices
                else "the device timelines are empty"
            )
        )
        return result
    total_us = sum(float(e["dur"]) for e in kept)
    groups = collections.defaultdict(lambda: dict(us=0.0, calls=0, longest=None))
    for event in kept:
        group = groups[event.get("name", "")]
        group["us"] += float(event["dur"])
        group["calls"] += 1
        if group["longest"] is None or float(event["dur"]) > float(group["longest"]["dur"]):
            group["longest"] = event
    kinds = collections.Counter()
    for name, group in groups.items():
        kinds[kernel_kind(name)] += group["us"] / total_us
    ranked = sorted(groups.items(), key=lambda item: -item[1]["us"])
    result["rows"] = [
        dict(
            name=name,
            kind=kernel_kind(name),
            ms=group["us"] / 1000 / steps,
            share=group["us"] / total_us,
            calls=group["calls"] / steps,
            where=_where(group["longest"].get("args") or {}),
        )
        for name, group in ranked[:top]
    ]
    result["device_ms"] = total_us / 1000 / steps
    result["kinds"] = dict(kinds.most_common())
    result["message"] = (
        f"{len(kept)} device events on {len(lines)} timelines of {', '.join(result['devices'])}"
        f", {len(groups)} distinct kernels; {result['device_ms']:,.2f} ms of device time "
        "per step"
    )
    return result


def markdown_rows(result, width=60):
    """`PROFILE_HEADER`'s cells for each row of a `device_op_table` result."""

    def short(text):
        text = str(text).replace("|", "/")
        return text if len(text) <= width else text[: width - 1] + "…"

    return [
        [
            str(rank),
            short(row["name"]),
            row["kind"],
            f"{row['ms']:,.3f}",
            f"{row['share']:.1%}",
            f"{row['calls']:,.1f}",
            short(row["where"]) or "—",
        ]
        for rank, row in enumerate(result["rows"], 1)
    ]


PROFILE_HEADER = ["#", "kernel", "kind", "ms / step", "share", "calls / step", "HLO op · JAX op"]


def kinds_line(result):
    """ "matmul 61.2%, fusion (elementwise) 20.1%, ...": the device time by kind of kernel."""
    return ", ".join(f"{kind} {share:.1%}" for kind, share in result["kinds"].items())


def trace_steps(run, folder, steps):
    """Runs `run()` `steps` times under JAX's profiler; the trace file and the seconds taken.

    `run` must wait for its step (as `Model.train_on_batch`, which returns floats), so the
    trace holds whole steps. The seconds are the traced steps' wall time, profiler included.
    """
    import time

    import jax

    os.makedirs(folder, exist_ok=True)
    # Python's function calls are host events, tens of thousands per step: not traced.
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with jax.profiler.trace(folder, create_perfetto_trace=True, profiler_options=options):
        start = time.perf_counter()
        for _ in range(steps):
            run()
        seconds = time.perf_counter() - start
    return find_trace_file(folder), seconds
