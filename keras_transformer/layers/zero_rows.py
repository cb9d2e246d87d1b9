import keras
from keras import ops

from keras_transformer.validation import is_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class ZeroRows(keras.constraints.Constraint):
    """Keeps some rows of a matrix at zero: an embedding's padding row, for one.

    Keras applies a weight's constraint after every optimizer update, so the
    rows stay exactly zero through training, as PyTorch's
    `nn.Embedding(padding_idx=...)` keeps them by never updating them. Marian
    (the Hugging Face opus-mt models) starts its decoder from the pad token
    whose embedding is zero, and CTranslate2 starts it from a zero vector: a
    model fine-tuned here keeps the two equal with this constraint.

    Args:
        rows: int or list of int, the row indices to keep at zero.

    Example:

    >>> constraint = ZeroRows(rows=1)
    >>> matrix = keras.ops.ones((3, 2))
    >>> keras.ops.convert_to_numpy(constraint(matrix)).tolist()
    [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]

    References:
        - [PyTorch `nn.Embedding`](https://pytorch.org/docs/stable/generated/torch.nn.Embedding.html),
          `padding_idx`.
    """

    def __init__(self, rows):
        rows = [rows] if is_int(rows) else list(rows)
        if not rows or not all(is_int(row) and row >= 0 for row in rows):
            raise ValueError(
                "`rows` must be a non-negative int or a non-empty list of them (row indices, "
                f"e.g. the pad id). Received: rows={rows!r}."
            )
        self.rows = [int(row) for row in rows]

    def __call__(self, w):
        index = ops.arange(ops.shape(w)[0])
        keep = ops.ones_like(index, dtype="bool")
        for row in self.rows:
            keep = ops.logical_and(keep, ops.not_equal(index, row))
        return w * ops.cast(ops.expand_dims(keep, -1), w.dtype)

    def get_config(self):
        return {"rows": self.rows}
