"""Which attention kernel the compiled training steps run on an NVIDIA GPU, checked on a CPU.

JAX lowers a function for a platform it does not have: with the CUDA plugin installed (it
warns that it finds no GPU and JAX goes on with the CPU),
``jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",))`` gives the StableHLO program
the GPU would compile, in which cuDNN's fused attention shows as ``__cudnn$fmha…`` custom
calls. This script lowers the training step (`Model.train_step`: forward, backward, Adam
update) of the paper's base translation model and of a base-sized language model, under
``mixed_bfloat16``, and counts in each program:

* the fused attention calls, forward and backward, and the masks they take (cuDNN's
  ``mask_type``: padding as sequence lengths, causality as its flag), against the number
  of attention layers: every layer must be on the kernel, forward and backward;
* the floating-point tensors of shape ``(batch, heads, queries, keys)``: a mask built for
  padding or causality, or the logits of XLA's own attention. There must be none.

A padded attention has one branch per padding the lengths can say or not (right-padded
rows, checked on the device, or any other padding as a ``(batch, 1, queries, keys)`` mask),
so it counts two forward and two backward calls; an unpadded one, one of each.

The steps are traced as on a GPU: `keras.distribution.list_devices`, which the attention
asks at trace time, answers ``gpu:0`` while they are traced, so the program is the one a GPU
user gets by default (`flash_attention=None`). It needs JAX's CUDA plugin, so it runs in a
virtual environment of its own (about 2.5 GB), made by its shell script::

    bash benchmarks/gpu_lowering.sh        # makes .venv-gpu-lowering once, then checks

It prints a table and exits 1 if an attention layer is off the kernel or a
``(batch, heads, queries, keys)`` float tensor is in a program.
"""

import argparse
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# In the program's text, the backend config's quotes are escaped as `\22`.
MASK_TYPE = re.compile(r"mask_type\\22: \\22(\w+)\\22")
BATCH, SOURCE, TARGET, VOCABULARY = 3, 20, 12, 512


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models",
        default="translation,language_modeling,prefill",
        help="comma-separated: translation and language_modeling (training steps), prefill",
    )
    parser.add_argument("--preset", default="base", help="the models' preset (default: base)")
    parser.add_argument(
        "--dump", default="", help="folder to write each lowered program to ('' to skip)"
    )
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(args.models) - set(PROGRAMS))
    if unknown or not args.models:
        parser.error(f"--models: unknown {unknown}; choose from {','.join(PROGRAMS)}")
    return args


def count_fused_calls(program):
    """`{(kernel, mask_type): calls}` of cuDNN's fused attention in a StableHLO text."""
    counts = collections.Counter()
    for line in program.splitlines():
        if "custom_call @__cudnn$fmha" not in line:
            continue
        kernel = re.search(r"__cudnn\$(fmha\w*)", line).group(1)
        mask = MASK_TYPE.search(line)
        counts[kernel, mask.group(1) if mask else "?"] += 1
    return counts


def attention_shaped_floats(program, batch, heads, lengths):
    """The float tensor types `(batch, heads, T, S)` in a StableHLO text, T and S in `lengths`."""
    sizes = "|".join(str(n) for n in sorted(set(lengths)))
    pattern = re.compile(rf"tensor<{batch}x{heads}x(?:{sizes})x(?:{sizes})x(?:f32|bf16|f16)>")
    return collections.Counter(pattern.findall(program))


def batch_of(task):
    """A padded batch: each row's tokens first, then padding (id 0), lengths all different."""
    import numpy as np

    rng = np.random.default_rng(0)

    def ids(length):
        out = rng.integers(4, VOCABULARY, size=(BATCH, length)).astype("int32")
        for row, real in enumerate(np.linspace(length, length // 2, BATCH).astype(int)):
            out[row, real:] = 0
        return out

    if task == "translation":
        return {"encoder_token_ids": ids(SOURCE), "decoder_token_ids": ids(TARGET)}, ids(TARGET)
    tokens = ids(TARGET + 1)
    return tokens[:, :-1], tokens[:, 1:]


def build_model(task, preset):
    import keras_transformer as kt

    sizes = (
        dict(source_vocabulary_size=VOCABULARY, share_embeddings=True)
        if task == "translation"
        else dict(vocabulary_size=VOCABULARY)
    )
    return kt.models.build(
        task, preset=preset, precision="mixed_bfloat16", jit_compile=True, norm_first=True, **sizes
    )


def lowered_as_on_a_gpu(function, *args):
    """`function` traced as a GPU would run it, lowered for CUDA: its StableHLO text."""
    import jax
    import keras

    # The attention asks which device runs it at trace time; here it hears "a GPU".
    on_this_machine = keras.distribution.list_devices
    keras.distribution.list_devices = lambda device_type=None: ["gpu:0"]
    try:
        return jax.jit(function).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    finally:
        keras.distribution.list_devices = on_this_machine


def train_step_program(task, preset):
    """The training step of `task` (forward, backward, Adam), lowered for CUDA."""
    model = build_model(task, preset)
    data = batch_of(task)
    # Builds the weights, optimizer and metrics on the CPU, with its own attention.
    model.train_on_batch(*data)
    state = tuple(
        [v.value for v in variables]
        for variables in (
            model.trainable_variables,
            model.non_trainable_variables,
            model.optimizer.variables,
            model.metrics_variables,
        )
    )
    return lowered_as_on_a_gpu(model.train_step, state, data)


def prefill_program(preset):
    """The language model's prefill (`decode_step` of a prompt from the cache's first slot)."""
    import keras

    model = build_model("language_modeling", preset)
    prompt = batch_of("language_modeling")[0]
    cache = model.initial_cache(BATCH, SOURCE)
    model.decode_step(prompt, cache, 0)  # builds the weights

    def prefill(values, prompt, cache):
        with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
            return model.decode_step(prompt, cache, 0)

    return lowered_as_on_a_gpu(prefill, [v.value for v in model.variables], prompt, cache)


# What each program must show: attention layers and causal ones (a preset's `num_layers`
# each), and whether it holds a backward pass.
PROGRAMS = {
    "translation": dict(layers=3, causal=1, backward=True),
    "language_modeling": dict(layers=1, causal=1, backward=True),
    "prefill": dict(layers=1, causal=1, backward=False),
}


def check(name, preset, dump=""):
    """One row of the table: the program's fused calls and attention-shaped floats, a verdict."""
    from keras_transformer.models.presets import PRESETS

    program = prefill_program(preset) if name == "prefill" else train_step_program(name, preset)
    if dump:
        os.makedirs(dump, exist_ok=True)
        with open(os.path.join(dump, f"{name}_{preset}.stablehlo.txt"), "w") as out:
            out.write(program)
    size, expected = PRESETS[preset], PROGRAMS[name]
    layers = size["num_layers"] * expected["layers"]
    causal_layers = size["num_layers"] * expected["causal"]
    calls = count_fused_calls(program)
    forward = sum(n for (kernel, _), n in calls.items() if "Backward" not in kernel)
    backward = sum(n for (kernel, _), n in calls.items() if "Backward" in kernel)
    causal = sum(
        n for (kernel, mask), n in calls.items() if "Backward" not in kernel and "CAUSAL" in mask
    )
    floats = attention_shaped_floats(program, BATCH, size["num_heads"], (SOURCE, TARGET))
    # Each layer runs once; a padded one has two branches of one call each, and a causal
    # one says so in its mask type in both.
    on_kernel = layers <= forward <= 2 * layers and causal_layers <= causal <= 2 * causal_layers
    on_kernel = on_kernel and backward == (forward if expected["backward"] else 0)
    return dict(
        name=name,
        preset=preset,
        layers=layers,
        forward=forward,
        backward=backward,
        masks=", ".join(f"{k} {m} x{n}" for (k, m), n in sorted(calls.items())),
        floats=sum(floats.values()),
        ok=on_kernel and not floats,
    )


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(
            f"this check lowers JAX programs; KERAS_BACKEND is {keras.backend.backend()}"
        )
    rows = [check(name, args.preset, args.dump) for name in args.models]
    print()
    print("| program | attention layers | fused forward | fused backward | "
          "(B, H, T, S) floats | cuDNN calls (kernel, mask) | on the kernel |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(
            f"| {r['name']} ({r['preset']}) | {r['layers']} | {r['forward']} | {r['backward']} "
            f"| {r['floats']} | {r['masks']} | {'yes' if r['ok'] else 'NO'} |"
        )
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)
    return rows


if __name__ == "__main__":
    main()
