"""The translation commands on bad input and faults: one clear line, nothing written or lost."""

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from examples.native_logs import is_native_log_line
from examples.translation import train
from examples.translation import translate as translate_cli
from examples.translation.settings import FULL, QUICK
from examples.translation.tokens_per_batch import choose_tokens_per_batch
from keras_transformer.models.device import DeviceInfo
from tests.fresh_python import run_python

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epochs", "-1"], "--epochs must be a positive integer; got -1"),
        (["--epochs", "0"], "--epochs must be a positive integer; got 0"),
        (["--tokens-per-batch", "0"], "--tokens-per-batch must be a positive integer; got 0"),
        (["--vocabulary-size", "260"], "--vocabulary-size must be at least 261; got 260"),
        (["--warmup-steps", "0"], "--warmup-steps must be a positive integer; got 0"),
        (["--learning-rate-scale", "0"], "--learning-rate-scale must be a positive number"),
        (["--learning-rate-scale", "nan"], "--learning-rate-scale must be a positive number"),
        (["--num-heads", "0"], "--num-heads must be a positive integer; got 0"),
        (["--dropout", "1"], "--dropout must be in [0, 1); got 1.0"),
        (["--train-pairs", "0"], "--train-pairs must be a positive integer; got 0"),
        (["--eval-pairs", "-5"], "--eval-pairs must be a positive integer; got -5"),
        (["--beam-size", "0"], "--beam-size must be a positive integer; got 0"),
        (["--length-penalty", "-1"], "--length-penalty must be a number >= 0; got -1.0"),
        (["--average-checkpoints", "0"], "--average-checkpoints must be a positive integer"),
        (["--checkpoint-every", "-1"], "--checkpoint-every must be 0 or a positive integer"),
        (["--min-tokens-per-batch", "-1"], "--min-tokens-per-batch must be 0 or a positive"),
        (["--subword-dropout", "2"], "--subword-dropout: expected P or SOURCE,TARGET"),
        (["--subword-dropout", "a,b"], "--subword-dropout: expected P or SOURCE,TARGET"),
        (["--precision", "float64"], "--precision: invalid choice: 'float64'"),
        (["--preset", "huge"], "--preset: invalid choice: 'huge'"),
        (["--fixed-shapes", "yes"], "--fixed-shapes: invalid choice: 'yes'"),
        (["--epochs", "two"], "--epochs: invalid int value: 'two'"),
        (["--data-dir", "/nonexistent/multi30k"], "--data-dir '/nonexistent/multi30k' is not a"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--mesh", "4x"], "--mesh must be DATAxMODEL or DATA with positive sizes, e.g. 8 or 2x4"),
        (["--mesh", "0x2"], "--mesh must be DATAxMODEL or DATA with positive sizes"),
    ],
)
def test_train_rejects_a_bad_flag_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--quick", *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("python -m examples.translation.train: error:")
    assert message in error


GPU = DeviceInfo("gpu", "GPU: H100", (9, 0))
CPU = DeviceInfo("cpu", "CPU", cpu_flags=frozenset({"avx2"}))


@pytest.mark.parametrize(
    "device, requested, expected",
    [
        (GPU, None, 25_000),  # the paper's batches (section 5.1)
        (CPU, None, 4096),  # QUICK's and FULL's, as before
        (DeviceInfo("tpu", "TPU: v4"), None, 4096),
        (GPU, 4096, 4096),  # the flag wins on any device
        (CPU, 25_000, 25_000),
        (GPU, 512, 512),
    ],
    ids=["gpu", "cpu", "tpu", "flag-on-gpu", "flag-on-cpu", "small-flag-on-gpu"],
)
def test_tokens_per_batch_default_follows_the_device(device, requested, expected):
    tokens, reason = choose_tokens_per_batch(device, requested)
    assert tokens == expected
    if requested is not None:
        assert reason == "given by --tokens-per-batch"
    elif device.platform == "gpu":
        assert "the default on a GPU" in reason and "25,000 source and 25,000 target" in reason
    else:
        assert reason == f"the default on a {device.platform.upper()}; 25,000 on a GPU"
    assert (QUICK["tokens_per_batch"], FULL["tokens_per_batch"]) == (4096, 4096)


@pytest.mark.parametrize(
    "argv, explicit, value",
    [([], False, 4096), (["--tokens-per-batch", "2048"], True, 2048)],
    ids=["default", "flag"],
)
def test_train_remembers_whether_tokens_per_batch_was_given(argv, explicit, value):
    args = train.parse_args(["--quick", *argv])
    assert ("tokens_per_batch" in args.explicit) is explicit
    assert args.tokens_per_batch == value  # before the device is known: the CPU default


def test_train_help_names_both_defaults(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: 25,000 on a GPU, the paper's batches of about 25,000 source" in help_text
    assert "4,096 on a CPU" in help_text


@pytest.mark.parametrize(
    "device, argv, line",
    [
        (GPU, [], "25,000 tokens per side (the default on a GPU: the paper's batches of about "
         "25,000 source and 25,000 target tokens)"),
        (CPU, [], "4,096 tokens per side (the default on a CPU; 25,000 on a GPU)"),
        (GPU, ["--tokens-per-batch", "6000"],
         "6,000 tokens per side (given by --tokens-per-batch)"),
    ],
    ids=["gpu", "cpu", "flag-on-gpu"],
)  # fmt: skip
def test_train_prints_which_batch_size_applied(device, argv, line, tmp_path, monkeypatch, capsys):
    def stop(*args, **kwargs):
        raise ValueError("stopped after the batch line")

    monkeypatch.setattr(train, "detect_device", lambda: device)
    monkeypatch.setattr(train, "load_multi30k", lambda *args, **kwargs: [("A dog.", "Ein Hund.")])
    monkeypatch.setattr(train.SubwordTokenizer, "train", stop)
    given = ["--quick", "--output-dir", str(tmp_path / "out"), "--compilation-cache", "off"]
    with pytest.raises(SystemExit) as exit_info:
        train.main([*given, *argv])
    assert exit_info.value.code == 2
    output = capsys.readouterr()
    assert output.err.strip() == "error: stopped after the batch line"
    assert f"batches: at most {line}" in output.out.splitlines()
    # The GPU default warms up over as many tokens as the quick run's 200 steps of 4,096.
    warmup = "warmup: 33 steps, as many tokens as 200 steps of 4,096 (--warmup-steps decides"
    assert any(row.startswith(warmup) for row in output.out.splitlines()) is (
        device is GPU and not argv
    )
    assert not (tmp_path / "out").exists()


def test_least_vocabulary_size_is_the_tokenizers():
    from keras_transformer.text import SubwordTokenizer

    texts = ["a man rides a bike", "zwei Hunde spielen im Schnee"] * 50
    with pytest.raises(ValueError, match=f"at least {train.MIN_VOCABULARY_SIZE} "):
        SubwordTokenizer.train(texts, vocabulary_size=train.MIN_VOCABULARY_SIZE - 1)


def test_train_rejects_an_output_dir_that_is_a_file(tmp_path, capsys):
    path = tmp_path / "a-file"
    path.write_text("keep me")
    with pytest.raises(SystemExit):
        train.parse_args(["--quick", "--output-dir", str(path)])
    assert f"--output-dir '{path}' exists and is not a directory" in capsys.readouterr().err
    assert path.read_text() == "keep me"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--beam-size", "0"], "--beam-size must be a positive integer; got 0"),
        (["--length-penalty", "-0.5"], "--length-penalty must be a number >= 0; got -0.5"),
        (["--batch-size", "0"], "--batch-size must be a positive integer; got 0"),
        ([], "the following arguments are required: --model"),
    ],
)
def test_translate_rejects_a_bad_flag_in_one_line(argv, message, capsys):
    model = [] if not argv else ["--model", "somewhere"]
    with pytest.raises(SystemExit) as exit_info:
        translate_cli.parse_args([*model, *argv, "A dog."])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_native_log_lines_are_recognised():
    noise = [
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        b"I0000 00:00:1796099858.160344    4837 port.cc:153] oneDNN custom operations are on.\n",
        b"E0000 00:00:1796099862.283458    4837 cuda_platform.cc:52] failed call to cuInit\n",
        b"W0000 00:00:1796099862.283458    4837 cpu_allocator_impl.cc:83] Allocation of 1 bytes\n",
        b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
        b"rebuild TensorFlow with the appropriate compiler flags.\n",
        b"normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.\n",
    ]
    kept = [
        b"error: Multi30k file not found\n",
        b"Traceback (most recent call last):\n",
        b"F0000 00:00:1796099862.283458    4837 check.cc:1] Check failed\n",  # fatal: kept
        b"UserWarning: I0000 is not at the start\n",
        b"Epoch 1/2\n",
    ]
    assert [is_native_log_line(line) for line in noise] == [True] * len(noise)
    assert [is_native_log_line(line) for line in kept] == [False] * len(kept)


# The commands' environment as a user's shell would give it (no TensorFlow log setting).
USER_ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def run_command(args, **kwargs):
    return run_python("-m", *args, env=USER_ENVIRONMENT, **kwargs)


def test_missing_data_is_one_line_without_native_logs_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    output = tmp_path / "out"
    result = run_command(
        ["examples.translation.train", "--quick", "--data-dir", str(empty), "--output-dir",
         str(output)]
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: Multi30k file not found:") and "train.en.gz" in lines[0]
    assert not output.exists()


def test_translate_names_a_run_folder_and_what_to_pass(tmp_path, capsys):
    run_folder = tmp_path / "multi30k-quick"
    (run_folder / "model").mkdir(parents=True)
    (run_folder / "model" / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        translate_cli.main(["--model", str(run_folder), "A dog."])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and str(run_folder / "model") in error[0], error


def test_translate_without_any_sentence_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    with pytest.raises(SystemExit):
        translate_cli.main(["--model", str(tmp_path)])
    assert "no sentence to translate" in capsys.readouterr().err


def weights_of(path):
    arrays = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            arrays[name] = item[()]

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    return arrays


RESUME_ARGS = [
    "examples.translation.train", "--quick", "--train-pairs", "300", "--eval-pairs", "1",
    "--epochs", "2", "--vocabulary-size", "400", "--tokens-per-batch", "256",
    "--num-layers", "1", "--hidden-dim", "32", "--intermediate-dim", "64", "--num-heads", "2",
    "--beam-size", "1", "--average-checkpoints", "2", "--precision", "float32",
]  # fmt: skip


# Three training processes side by side: about 50 s of the default run, so among the slow tests.
@pytest.mark.slow
def test_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path):
    interrupted = tmp_path / "interrupted"
    # The uninterrupted run, meanwhile: it shares nothing with the killed one.
    straight = subprocess.Popen(
        [sys.executable, "-m", *RESUME_ARGS, "--output-dir", str(tmp_path / "straight")],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=USER_ENVIRONMENT,
    )
    log = open(tmp_path / "killed.log", "w")
    child = subprocess.Popen(
        [sys.executable, "-m", *RESUME_ARGS, "--output-dir", str(interrupted)],
        cwd=REPOSITORY,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.time() + 240
    while "Epoch 2/2" not in (tmp_path / "killed.log").read_text():
        assert child.poll() is None and time.time() < deadline, "the run ended before epoch 2"
        time.sleep(0.02)
    # At once: epoch 2's ~65 batches take about a second on a 2-core machine.
    child.send_signal(signal.SIGKILL)
    child.wait()
    log.close()
    assert not (interrupted / "model").exists()  # killed before the end

    resumed = run_command([*RESUME_ARGS, "--output-dir", str(interrupted)])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at epoch 2" in resumed.stdout
    assert not (interrupted / "backup").exists()  # deleted by a finished run
    stdout, stderr = straight.communicate(timeout=300)
    straight = subprocess.CompletedProcess(straight.args, straight.returncode, stdout, stderr)
    assert straight.returncode == 0, straight.stderr[-2000:]
    assert "resuming" not in straight.stdout

    expected = weights_of(tmp_path / "straight" / "model" / "model.weights.h5")
    actual = weights_of(interrupted / "model" / "model.weights.h5")
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
    # Both averaged the same two checkpoints, epoch 1's written by the killed process.
    assert sorted(os.listdir(interrupted / "checkpoints")) == [
        "epoch-00001.weights.h5",
        "epoch-00002.weights.h5",
    ]
    for output in (resumed, straight):
        assert "average of the last 2 checkpoints" in output.stdout
        assert "ran out of data" not in output.stderr and "retracing" not in output.stderr


def test_translating_many_lengths_compiles_a_few_searches(translator_bundle):
    from examples.translation.translator import translate
    from keras_transformer.generation import trace_count

    model, tokenizer = translator_bundle
    words = "a man in a red shirt rides a bike down the street".split()
    # 40 sentences of 1 to 40 words, 4 per batch: ten batches of ten different lengths, which
    # traced ten searches before (and TensorFlow warned of "excessive retracing").
    sentences = [" ".join(words[i % len(words)] for i in range(n)) for n in range(1, 41)]
    before = trace_count(model)
    translations = translate(model, tokenizer, sentences, batch_size=4, beam_size=2)
    assert len(translations) == 40 and all(isinstance(t, str) for t in translations)
    # One search per padded length (16, 32, 64 or 128 tokens), the batch's rows fixed at 4.
    assert 1 <= trace_count(model) - before <= 4
    # Alone, three short sentences pad to one length: one more search, for one row.
    one_by_one = translate(model, tokenizer, sentences[1:6:2], batch_size=1, beam_size=2)
    assert one_by_one == translations[1:6:2]  # the padding does not change a translation


def test_translating_shows_a_progress_bar_when_asked(translator_bundle, capsys):
    from examples.translation.translator import translate

    model, tokenizer = translator_bundle
    translate(model, tokenizer, ["A dog.", "", "Two men talk."], beam_size=1, progress=True)
    shown = capsys.readouterr().out
    assert "2/2" in shown  # sentences, the blank one needs no search
    translate(model, tokenizer, ["A dog."], beam_size=1)
    assert capsys.readouterr().out == ""


@pytest.fixture(scope="module")
def translator_bundle():
    import keras

    import keras_transformer as kt
    from examples.translation.data import load_multi30k
    from keras_transformer.text import SubwordTokenizer

    keras.utils.set_random_seed(0)
    pairs = load_multi30k("train", limit=200)
    tokenizer = SubwordTokenizer.train([t for pair in pairs for t in pair], vocabulary_size=400)
    model = kt.models.build(
        "translation", preset="tiny", num_layers=1, hidden_dim=32, intermediate_dim=64,
        num_heads=2, source_vocabulary_size=tokenizer.vocabulary_size, precision="float32",
    )  # fmt: skip
    return model, tokenizer


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--init-from", "{tmp}"], "has no config.json: pass a Hugging Face MarianMT folder"),
        (["--init-from", "{marian}", "--preset", "base"], "--preset cannot change the model"),
        (["--init-from", "{marian}", "--hidden-dim", "64"], "--hidden-dim cannot change the"),
        (["--marian", "--norm-first"], "--norm-first: Marian's blocks are post-norm"),
        (["--marian", "--position", "rotary"], "--position: Marian's positions are sinusoidal"),
    ],
)
def test_train_rejects_flags_that_contradict_marian_in_one_line(argv, message, tmp_path, capsys):
    marian = tmp_path / "marian"
    marian.mkdir()
    (marian / "config.json").write_text('{"model_type": "marian"}')
    argv = [a.format(tmp=tmp_path, marian=marian) for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--quick", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_translate_reads_a_hugging_face_marian_folder(tmp_path, capsys):
    import keras_transformer as kt
    from examples.translation.data import load_multi30k
    from keras_transformer.saving import save_huggingface
    from keras_transformer.text import MarianTokenizer, SubwordTokenizer

    pairs = load_multi30k("train", limit=100)
    subword = SubwordTokenizer.train([t for pair in pairs for t in pair], vocabulary_size=400)
    tokenizer = MarianTokenizer.from_subword_tokenizer(subword, pad_last=True)
    model = kt.models.Seq2SeqTransformer(
        tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
        num_heads=2, intermediate_dim=32, interleave_sinusoids=False, layer_norm_epsilon=1e-5,
        output_bias=True, zero_pad_embedding=True, pad_id=tokenizer.pad_id,
        start_id=tokenizer.start_id, end_id=tokenizer.end_id,
    )  # fmt: skip
    folder = save_huggingface(model, tmp_path / "opus-mt-tiny", tokenizer)
    translations = translate_cli.main(["--model", str(folder), "--beam-size", "1", "A dog."])
    assert len(translations) == 1 and capsys.readouterr().out.count("\n") == 1
