"""Generation throughput: cached greedy and beam search against uncached and keras-hub decoding.

What it measures: generated tokens per second for a batch of sources (random token ids,
no padding) with four decoders of the same shape (post-norm, ReLU, sinusoidal positions,
separate source and target embeddings, output tied to the target embedding):

* ``ours greedy``: `Seq2SeqTransformer.generate(method="greedy")`: the encoder and the
  cross-attention keys/values once, then one decoder step per token on a static
  self-attention cache, in one compiled `while_loop`;
* ``ours beam-4``: `generate(method="beam", beam_size=4)`; its rate is reported per input
  (output tokens) and per beam (hypothesis tokens, i.e. x4), to compare with greedy's;
* ``ours greedy x4``: greedy search on 4 copies of the batch, as many decoder rows as
  beam-4 has: what beam search's bookkeeping (top-k, cache reordering) costs on top;
* ``ours top-k``: `generate(method="top_k", top_k=10)`, sampling from the 10 likeliest;
* ``ours uncached``: the same greedy search without a cache: every step re-runs the whole
  decoder over the fixed-size target buffer (static shapes, so it compiles) and reads the
  logits at the current position (timed with one call per round: it is slow);
* ``keras-hub greedy``: a stack of `keras_hub.layers.TransformerEncoder` /
  `TransformerDecoder` layers with keras-hub's caches (`self_attention_cache`,
  `cross_attention_cache`), driven by `keras_hub.samplers.GreedySampler` the way
  `BartSeq2SeqLM.generate_step` does, except that the cross-attention cache is filled
  by one decoder call on the start token instead of the whole padded target buffer
  (cheaper than keras-hub's own model);
* ``keras-hub top-k``: the same with `keras_hub.samplers.TopKSampler(k=10)`.

Each contender runs at every ``--batch`` size: 1 (latency: one sentence at a time) and 32
(throughput) by default. ``ours / keras-hub`` is ours' tokens/s over keras-hub's for the same
search at the same batch size (> 1: ours is faster).

All four run inside the same compile wrapper (`keras_transformer.generation.compiled`):
``tf.function(jit_compile=...)`` on TensorFlow, ``jax.jit`` on JAX (XLA only). Every call
generates up to ``--new-tokens`` tokens (default: source length + 50, the `generate`
default); a random model hardly ever emits the end token, so each call runs them all. A
token counts once per generated position of each input (positions after an end token
included, since the batch keeps computing them). After warm-up calls (tracing and
compilation), each round times ``--calls`` calls of each contender, the contenders
alternating and their order rotating; the reported rates are medians over rounds, the
ratios medians of each round's ratio (the spread over rounds in brackets).

Run from the repository root (the backend is chosen by ``KERAS_BACKEND`` or ``--backend``)::

    python benchmarks/generation.py                          # full run, appends to RESULTS.md
    python benchmarks/generation.py --quick --output ''      # small shapes, < 60 s
    KERAS_BACKEND=jax python benchmarks/generation.py --jit on
"""

import statistics
import time

from command_line import new_parser, parse_shared, report, set_backend

CONTENDERS = (
    "ours_greedy",
    "ours_beam4",
    "ours_greedy_x4",
    "ours_top_k",
    "ours_uncached",
    "keras_hub_greedy",
    "keras_hub_top_k",
)
# Each of ours paired with keras-hub's doing the same search, for the `ours / keras-hub` column.
KERAS_HUB_TWIN = {"ours_greedy": "keras_hub_greedy", "ours_top_k": "keras_hub_top_k"}
TOP_K = 10
FULL_SHAPE = dict(vocab=8000, hidden=256, heads=4, ff=1024, layers=3, source=30, new_tokens=80)
QUICK_SHAPE = dict(vocab=500, hidden=64, heads=4, ff=128, layers=1, source=12, new_tokens=16)
START_ID, END_ID = 1, 2


def parse_args(argv=None):
    parser = new_parser(
        __doc__,
        CONTENDERS,
        jit_help="XLA setting(s) (default: both on TensorFlow, on for JAX; on with --quick)",
    )
    parser.add_argument("--calls", type=int, default=None, help="timed calls per measurement")
    parser.add_argument(
        "--batch-sizes",
        default=None,
        help="comma-separated batch sizes (default: 1,32; 1,8 with --quick)",
    )
    counts = {"calls": (2, 3), "rounds": (5, 2)}
    args = parse_shared(parser, argv, CONTENDERS, FULL_SHAPE, QUICK_SHAPE, counts)
    sizes = args.batch_sizes or ("1,8" if args.quick else "1,32")
    try:
        args.batch_sizes = [int(size) for size in sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes must be comma-separated integers, got {sizes!r}")
    if not args.batch_sizes or min(args.batch_sizes) < 1:
        parser.error("--batch-sizes must be positive")
    return args


def build_ours(shape):
    from keras_transformer.models import Seq2SeqTransformer

    return Seq2SeqTransformer(
        shape["vocab"],
        num_encoder_layers=shape["layers"],
        num_decoder_layers=shape["layers"],
        hidden_dim=shape["hidden"],
        num_heads=shape["heads"],
        intermediate_dim=shape["ff"],
        dropout=0.0,
    )


def build_keras_hub(shape):
    import keras
    import keras_hub
    from keras import ops

    class KerasHubSeq2Seq(keras.Model):
        """Embeddings plus keras-hub encoder and decoder layers, with keras-hub's caches."""

        def __init__(self):
            super().__init__()
            d = shape["hidden"]
            self.scale = float(d) ** 0.5
            self.source_embedding = keras_hub.layers.ReversibleEmbedding(shape["vocab"], d)
            self.target_embedding = keras_hub.layers.ReversibleEmbedding(shape["vocab"], d)
            self.positions = keras_hub.layers.SinePositionEncoding()
            block = dict(intermediate_dim=shape["ff"], num_heads=shape["heads"], dropout=0.0)
            self.encoder_layers = [
                keras_hub.layers.TransformerEncoder(**block) for _ in range(shape["layers"])
            ]
            self.decoder_layers = [
                keras_hub.layers.TransformerDecoder(**block) for _ in range(shape["layers"])
            ]
            self.head_dim = d // shape["heads"]

        def embed(self, embedding, ids, start_index=0):
            x = embedding(ids) * self.scale
            return x + self.positions(x, start_index=start_index)

        def encode(self, ids):
            mask = ops.not_equal(ids, 0)
            x = self.embed(self.source_embedding, ids)
            for layer in self.encoder_layers:
                x = layer(x, padding_mask=mask)
            return x, mask

        def decode_step(self, ids, index, encoder_outputs, mask, self_caches, cross_caches):
            """keras-hub's cached decoder call; `cross_caches` entries `None` fill them."""
            x = self.embed(self.target_embedding, ids, start_index=index)
            new_self, new_cross = [], []
            for layer, self_cache, cross_cache in zip(
                self.decoder_layers, self_caches, cross_caches
            ):
                x, self_cache, cross_cache = layer(
                    x,
                    encoder_outputs,
                    encoder_padding_mask=mask,
                    self_attention_cache=self_cache,
                    self_attention_cache_update_index=index,
                    cross_attention_cache=cross_cache[0],
                    cross_attention_cache_update_index=cross_cache[1],
                )
                new_self.append(self_cache)
                new_cross.append(cross_cache)
            return self.target_embedding(x, reverse=True), new_self, new_cross

        def call(self, inputs):
            encoder_outputs, mask = self.encode(inputs["encoder_token_ids"])
            x = self.embed(self.target_embedding, inputs["decoder_token_ids"])
            for layer in self.decoder_layers:
                x = layer(x, encoder_outputs, encoder_padding_mask=mask)
            return self.target_embedding(x, reverse=True)

    model = KerasHubSeq2Seq()
    ids = ops.ones((1, 4), "int32")
    model({"encoder_token_ids": ids, "decoder_token_ids": ids})
    return model


def keras_hub_generate_fn(model, source, prompt, prompt_mask, sampler=None):
    """keras-hub's search (`GreedySampler` by default) over keras-hub's caches."""
    import keras_hub
    from keras import ops

    encoder_outputs, mask = model.encode(source)
    batch_size, length = ops.shape(prompt)[0], ops.shape(prompt)[1]
    cache_shape = (batch_size, 2, length, model.decoder_layers[0].num_heads, model.head_dim)
    cross_shape = (batch_size, 2, ops.shape(source)[1]) + cache_shape[3:]
    layers = len(model.decoder_layers)
    self_caches = [ops.zeros(cache_shape) for _ in range(layers)]
    # One call on the start token fills the cross-attention caches (update index 0).
    _, self_caches, cross_caches = model.decode_step(
        prompt[:, :1], 0, encoder_outputs, mask, self_caches, [(ops.zeros(cross_shape), 0)] * layers
    )

    def next_fn(prompt, cache, index):
        self_caches, cross_caches = cache
        token = ops.slice(prompt, [0, index - 1], [batch_size, 1])
        logits, self_caches, _ = model.decode_step(
            token, index - 1, encoder_outputs, mask, self_caches, [(c, None) for c in cross_caches]
        )
        return logits[:, 0], None, (self_caches, cross_caches)

    sampler = sampler or keras_hub.samplers.GreedySampler()
    return sampler(
        next=next_fn,
        prompt=prompt,
        cache=(self_caches, cross_caches),
        index=1,
        mask=prompt_mask,
        stop_token_ids=(END_ID,),
    )


def uncached_generate_fn(model, source, prompt, limit):
    """Greedy search that re-runs the whole decoder over the target buffer every step."""
    from keras import ops

    encoder_outputs, mask = model.encode(source)
    batch_size = ops.shape(prompt)[0]

    def cond(index, prompt, done):
        return ops.logical_and(index < limit, ops.logical_not(ops.all(done)))

    def body(index, prompt, done):
        logits = model.decode(prompt, encoder_outputs, mask)
        logits = ops.slice(logits, [0, index, 0], [batch_size, 1, ops.shape(logits)[2]])[:, 0]
        token = ops.cast(ops.argmax(logits, axis=-1), "int32")
        token = ops.where(done, 0, token)
        prompt = ops.slice_update(prompt, [0, index + 1], token[:, None])
        return index + 1, prompt, ops.logical_or(done, token == END_ID)

    _, prompt, _ = ops.while_loop(
        cond, body, (ops.zeros((), "int32"), prompt, ops.zeros((batch_size,), "bool"))
    )
    return prompt


def steps_run(ids, new_tokens):
    """Generated positions per input: up to the last row's end token, else all of them."""
    import numpy as np

    ids = np.asarray(ids)
    ends = [list(row).index(END_ID) + 1 if END_ID in row else new_tokens for row in ids]
    return min(max(ends), new_tokens)


def make_runners(shape, jit, contenders):
    """name -> (run, rows): `run(warm_up=False)` generates and returns the steps it ran."""
    import keras
    import numpy as np
    from keras import ops

    from keras_transformer.generation.compiled import CompiledFunction, bucket_length

    rng = np.random.default_rng(0)
    batch, new_tokens = shape["batch"], shape["new_tokens"]
    # Ids 3.. only: 0 is padding, 1 and 2 the start and end tokens.
    source = rng.integers(3, shape["vocab"], (batch, shape["source"])).astype("int32")
    runners = {}
    ours = None
    if any(c.startswith("ours") for c in contenders):
        keras.utils.set_random_seed(0)
        ours = build_ours(shape)

    def generate(method, copies=1, **kwargs):
        sources = np.repeat(source, copies, axis=0)

        def run(warm_up=False):
            ids = ours.generate(
                sources,
                max_length=new_tokens,
                method=method,
                start_id=START_ID,
                end_id=END_ID,
                jit_compile=jit,
                **kwargs,
            )
            return ids.shape[-1]  # the loop's steps (outputs are trimmed to them)

        return run

    if "ours_greedy" in contenders:
        runners["ours_greedy"] = (generate("greedy"), batch)
    if "ours_beam4" in contenders:
        runners["ours_beam4"] = (generate("beam", beam_size=4), batch)
    if "ours_greedy_x4" in contenders:
        runners["ours_greedy_x4"] = (generate("greedy", copies=4), 4 * batch)
    if "ours_top_k" in contenders:
        runners["ours_top_k"] = (generate("top_k", top_k=TOP_K, seed=0), batch)
    columns = bucket_length(new_tokens + 1)
    prompt = np.zeros((batch, columns), "int32")
    prompt[:, 0] = START_ID
    source_bucket = np.zeros((batch, bucket_length(shape["source"])), "int32")
    source_bucket[:, : shape["source"]] = source
    if "ours_uncached" in contenders:
        uncached = CompiledFunction(ours, uncached_generate_fn, jit)

        def run_uncached(warm_up=False):
            # The step limit is a tensor: warming up (compiling) with 2 steps is cheap.
            limit = ops.convert_to_tensor(2 if warm_up else new_tokens, "int32")
            source_ids, prompt_ids = (
                ops.convert_to_tensor(source_bucket),
                ops.convert_to_tensor(prompt),
            )
            ids = uncached(source_ids, prompt_ids, limit)
            return steps_run(ops.convert_to_numpy(ids)[:, 1:], new_tokens)

        runners["ours_uncached"] = (run_uncached, batch)
    hub = None
    for name in ("keras_hub_greedy", "keras_hub_top_k"):
        if name not in contenders:
            continue
        if hub is None:
            import keras_hub

            keras.utils.set_random_seed(0)
            hub = build_keras_hub(shape)
        if name == "keras_hub_greedy":
            hub_fn = CompiledFunction(hub, keras_hub_generate_fn, jit)
        else:
            sampler = keras_hub.samplers.TopKSampler(k=TOP_K, seed=0)
            hub_fn = CompiledFunction(
                hub,
                lambda model, *inputs, sampler=sampler: keras_hub_generate_fn(
                    model, *inputs, sampler=sampler
                ),
                jit,
            )
        hub_prompt = prompt[:, : new_tokens + 1]
        prompt_mask = np.zeros(hub_prompt.shape, bool)
        prompt_mask[:, 0] = True

        # `model=hub` keeps the model alive: the compiled function holds it weakly.
        def run_hub(
            warm_up=False, hub_fn=hub_fn, hub_prompt=hub_prompt, prompt_mask=prompt_mask, model=hub
        ):
            ids = hub_fn(
                ops.convert_to_tensor(source_bucket),
                ops.convert_to_tensor(hub_prompt),
                ops.convert_to_tensor(prompt_mask),
            )
            return steps_run(ops.convert_to_numpy(ids)[:, 1:], new_tokens)

        runners[name] = (run_hub, batch)
    return runners


def count_params(model):
    return sum(int(__import__("numpy").prod(w.shape)) for w in model.weights)


def markdown_table(rows):
    from paired_ratios import format_spread

    lines = [
        "| batch | XLA | contender | tokens/s | decoder-row tokens/s | rows vs ours greedy "
        "| ours / keras-hub | ms / call |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]

    for row in rows:
        versus = "—" if row["versus_hub"] is None else format_spread(row["versus_hub"])
        lines.append(
            f"| {row['batch']} | {'on' if row['jit'] else 'off'} | {row['name']} "
            f"| {row['rate']:,.0f} | {row['rate'] * row['beams']:,.0f} "
            f"| {format_spread(row['ratio'])} "
            f"| {versus} | {row['ms']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    set_backend(args)
    from machine import load_average, versions

    started, load_at_start = time.perf_counter(), load_average()

    backend, found = versions()
    if args.jit is None:
        args.jit = "on" if args.quick or backend != "tensorflow" else "both"
    if backend != "tensorflow" and args.jit != "on":
        print("only --jit on is measured off TensorFlow (JAX without jit runs op by op)")
        args.jit = "on"
    jit_modes = {"both": [True, False], "on": [True], "off": [False]}[args.jit]
    shape = args.shape
    print(f"backend {backend}; " + ", ".join(f"{k} {v}" for k, v in found.items()))
    print(f"shape {shape}; {args.calls} calls x {args.rounds} rounds")

    beams = {"ours_beam4": 4}  # decoder rows per input
    timings, results = {}, {}
    for batch in args.batch_sizes:
        for jit in jit_modes:
            runners = make_runners(dict(shape, batch=batch), jit, args.contenders)
            for name, (run, _) in runners.items():
                t0 = time.perf_counter()
                run(warm_up=True)
                seconds = time.perf_counter() - t0
                print(
                    f"warm-up batch {batch} jit={'on ' if jit else 'off'} {name:<17} "
                    f"{seconds:.1f} s",
                    flush=True,
                )
            for round_index in range(args.rounds):
                names = list(runners)
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    run, rows = runners[name]
                    calls = 1 if name == "ours_uncached" else args.calls
                    t0 = time.perf_counter()
                    tokens = sum(run() for _ in range(calls)) * rows
                    seconds = time.perf_counter() - t0
                    timings.setdefault((batch, jit, name), []).append(
                        (tokens / seconds, seconds / calls)
                    )
                done = ", ".join(
                    f"{k[2]}={v[-1][0]:,.0f}" for k, v in timings.items() if k[:2] == (batch, jit)
                )
                print(
                    f"round {round_index + 1} batch {batch} jit={'on' if jit else 'off'}: {done}",
                    flush=True,
                )
            for name in runners:
                rates = [rate for rate, _ in timings[(batch, jit, name)]]
                times = [ms for _, ms in timings[(batch, jit, name)]]
                results[(batch, jit, name)] = (
                    statistics.median(rates),
                    1000 * statistics.median(times),
                    rates,
                )

    from paired_ratios import paired_ratios

    rows = []
    for batch in args.batch_sizes:
        for jit in jit_modes:
            reference = results.get((batch, jit, "ours_greedy"))
            for name in args.contenders:
                rate, ms, rates = results[(batch, jit, name)]
                twin = results.get((batch, jit, KERAS_HUB_TWIN.get(name)))
                rows.append(
                    dict(
                        batch=batch,
                        jit=jit,
                        name=name,
                        rate=rate,
                        beams=beams.get(name, 1),
                        ratio=paired_ratios(
                            [rate * beams.get(name, 1) for rate in rates],
                            None if reference is None else reference[2],
                        ),
                        versus_hub=None if twin is None else paired_ratios(rates, twin[2]),
                        ms=ms,
                    )
                )
    table = markdown_table(rows)
    summary = (
        f"Shape: {shape} (`new_tokens` generated per input, `source` tokens per input), "
        f"batch sizes {args.batch_sizes}; "
        f"{args.calls} timed calls x {args.rounds} rounds (median; 1 call for ours_uncached). "
        "The two ratio columns are medians over the rounds of each round's ratio, with the "
        "lowest and highest round in brackets. "
        "`tokens/s`: generated tokens per second, one sequence per input (per copy for "
        "greedy_x4); `decoder-row tokens/s`: the same times the decoder rows per sequence "
        "(4 beams for beam-4); `rows vs ours greedy`: decoder-row tokens/s over ours "
        "greedy's tokens/s (the beam-4 target is >= 0.8)."
    )
    report(
        args,
        "Generation throughput",
        "benchmarks/generation.py",
        (backend, found),
        table,
        summary,
        started,
        load_at_start,
    )


if __name__ == "__main__":
    main()
