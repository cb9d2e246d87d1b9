"""The sparse labels the loss and the metric take, checked against the predictions."""

from keras import ops


def sparse_labels(y_true, y_pred):
    """`y_true` as int32 labels with one axis fewer than `y_pred`.

    Args:
        y_true: integer labels `(batch, length)`, or `(batch, length, 1)`.
        y_pred: the scores `(batch, length, vocab_size)` they label.

    Returns:
        int32 labels `(batch, length)`.

    Raises:
        ValueError: when the labels' rank does not fit the predictions'.
    """
    y_true = ops.convert_to_tensor(y_true)
    if len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == 1:
        y_true = ops.squeeze(y_true, axis=-1)
    if len(y_true.shape) != len(y_pred.shape) - 1:
        raise ValueError(
            "`y_true` must hold sparse integer labels with one axis fewer than "
            "`y_pred`, e.g. `(batch, length)` labels for `(batch, length, vocab_size)` "
            f"predictions. Received: y_true.shape={tuple(y_true.shape)}, "
            f"y_pred.shape={tuple(y_pred.shape)}."
        )
    # Keras hands labels over as float32; token ids are exact there below 2**24.
    return ops.cast(y_true, "int32")
