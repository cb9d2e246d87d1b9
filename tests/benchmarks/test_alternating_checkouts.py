"""`benchmarks/alternating_checkouts.py`: reading a benchmark's ratios, refusing bad flags."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from alternating_checkouts import benchmark_backend, parse_args, ratios_of  # noqa: E402

# What training.py appends (a notes line, then its table); an earlier table is ignored.
REPORT = """\
| a | b |
|---|---|
| 1.000 (1.000-1.000) | x |

- Wall time: 168 s

| precision | jit_compile | contender | tokens/s | ours / this | tokens/CPU-s | ours / this (CPU) |
|---|---|---|---:|---:|---:|---:|
| float32 | off | ours | 7,118 | — | 3,715 | — |
| float32 | off | keras_hub | 6,768 | 1.054 (1.026-1.061) | 3,519 | 1.062 (1.038-1.068) |
| 32 | on | ours_greedy | 4,978 | 1.62 (1.38-1.74) | 514 | — |
"""


def test_ratios_are_the_medians_of_the_last_table_by_row_and_column():
    assert ratios_of(REPORT) == {
        ("float32 / off / keras_hub", "ours / this"): 1.054,
        ("float32 / off / keras_hub", "ours / this (CPU)"): 1.062,
        # generation.py's rows start with the batch size.
        ("32 / on / ours_greedy", "ours / this"): 1.62,
    }


def test_the_recorded_backend_is_the_one_the_benchmark_ran_on():
    assert benchmark_backend(["benchmarks/generation.py", "--backend", "jax", "--jit", "on"]) == (
        "jax"
    )
    assert benchmark_backend(["benchmarks/generation.py", "--backend=torch"]) == "torch"
    assert benchmark_backend(["benchmarks/training.py", "--steps", "8"]) is None


def test_a_report_without_a_table_is_refused():
    with pytest.raises(ValueError, match="no Markdown table"):
        ratios_of("- Wall time: 3 s\n")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--baseline", "."], "give the benchmark after `--`"),
        (["--baseline", ".", "--", "benchmarks/training.py", "--output", "x"], "leave `--output`"),
        (["--baseline", ".", "--runs", "0", "--", "benchmarks/training.py"], "at least 1"),
        (["--baseline", "/nonexistent", "--", "benchmarks/training.py"], "is not a file of"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
