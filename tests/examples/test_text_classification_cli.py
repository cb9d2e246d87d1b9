"""The classification training command's --mesh: checked with the other flags, in one line."""

import pytest

from examples.text_classification import train


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--mesh", "4x"], "--mesh must be DATAxMODEL or DATA with positive sizes, e.g. 8 or 2x4"),
        (["--mesh", "0x2"], "e.g. 8 or 2x4; got '0x2'"),
        (["--mesh", "eight"], "got 'eight'"),
        # --quick batches 64 texts: 3 replicas cannot share them evenly.
        (["--mesh", "3"], "--batch-size 64 must be a multiple of the mesh's 3 data-parallel"),
        (["--mesh", "3x2"], "(--mesh 3x2), which split each batch evenly; pass e.g. --batch-size"),
        (["--mesh", "8", "--batch-size", "4"], "pass e.g. --batch-size 8"),
    ],
)
def test_train_rejects_a_bad_mesh_in_one_line_before_writing(argv, message, capsys, tmp_path):
    output = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--quick", "--output-dir", str(output), *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error: " in error and message in error, error
    assert not output.exists()


def test_train_reads_a_mesh_as_data_by_model():
    assert train.parse_args(["--quick", "--mesh", "2x4"]).mesh == (2, 4)
    assert train.parse_args(["--quick", "--mesh", "8"]).mesh == (8, 1)
    assert train.parse_args(["--quick"]).mesh is None
