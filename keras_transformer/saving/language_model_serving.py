"""The serving function of a `TransformerLM`: prompts in, greedy continuations out.

`export_serving` (in `serving.py`) checks the common arguments, picks this function for a
language model and writes the SavedModel; this module only says what the served graph
computes. The search is `generation`'s own (`make_search_fn`, as `TransformerLM.generate`
runs it), traced as a TensorFlow graph without XLA.
"""

from keras_transformer.generation.decoding import GenerationOptions, learned_position_limit
from keras_transformer.generation.language_model import make_search_fn
from keras_transformer.validation import check_positive_int

DEFAULT_MAX_NEW_TOKENS = 50  # `TransformerLM.generate`'s default: the prompt + 50 tokens
DEFAULT_MAX_PROMPT_LENGTH = 128


def make_generate_fn(model, tokenizer, max_new_tokens=None, max_prompt_length=None):
    """The function `export_serving` traces for a `TransformerLM`.

    Each prompt becomes `tokenizer.tokenize(prompt)` (no special ids: GPT-2's
    layout, `BytePairTokenizer.encode`), cut to its last `max_prompt_length` ids;
    a prompt with no ids (`""`) is `[start_id]` alone (GPT-2's `<|endoftext|>`).
    The model then continues every prompt greedily by at most `max_new_tokens`
    tokens, stopping after `tokenizer.end_id`, as
    `model.generate(prompt, max_length=len(prompt) + max_new_tokens,
    end_id=tokenizer.end_id)` does, and the continuation (the new ids only, up to
    the end id) is detokenized. A prompt's continuation does not depend on the
    other prompts of the batch.

    Args:
        model: a `TransformerLM`.
        tokenizer: a tokenizer of TensorFlow ops with `tokenize`, `detokenize`,
            `start_id`, `end_id` and `vocabulary_size` (a `SubwordTokenizer`, or
            the `BytePairGraphTokenizer` of a `BytePairTokenizer`).
        max_new_tokens: int >= 1, the most tokens generated per prompt (the end
            token included). Defaults to `None`, meaning `50`.
        max_prompt_length: int >= 1, the longest prompt in ids; longer prompts
            keep their last ids. Defaults to `None`, meaning `128`, or less with a
            learned position table: at most `max_sequence_length + 1 -
            max_new_tokens`.

    Returns:
        A function from a 1-D `tf.string` tensor of prompts to `{"texts": tf.string
        tensor}` of the same length.

    Raises:
        ValueError: for a bad size, sizes beyond a learned position table, or a
            tokenizer whose vocabulary differs from the model's.

    Example:

    Called eagerly here; `export_serving` traces it into the SavedModel.

    >>> import tensorflow as tf
    >>> from keras_transformer.models import TransformerLM
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["Two dogs play.", "A cat sleeps."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> lm = TransformerLM(tokenizer.vocabulary_size, num_layers=1, hidden_dim=16,
    ...                    num_heads=2, intermediate_dim=32)
    >>> generate = make_generate_fn(lm, tokenizer, max_new_tokens=4)
    >>> generate(tf.constant(["Two dogs", ""]))["texts"].shape.as_list()
    [2]
    """
    import tensorflow as tf  # Only the TensorFlow backend exports.

    if max_new_tokens is None:
        max_new_tokens = DEFAULT_MAX_NEW_TOKENS
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    position_limit = learned_position_limit(model)
    # A row of `length` ids is fed `length - 1` of them, at as many positions.
    room = None if position_limit is None else position_limit + 1 - max_new_tokens
    if room is not None and room < 1:
        raise ValueError(
            f"`max_new_tokens` ({max_new_tokens}) leaves no room for a prompt in the model's "
            f"learned positions (max_sequence_length={position_limit}). Pass "
            f"max_new_tokens<={position_limit}."
        )
    if max_prompt_length is None:
        max_prompt_length = (
            DEFAULT_MAX_PROMPT_LENGTH if room is None else min(DEFAULT_MAX_PROMPT_LENGTH, room)
        )
    max_prompt_length = check_positive_int("max_prompt_length", max_prompt_length)
    if room is not None and max_prompt_length > room:
        raise ValueError(
            f"`max_prompt_length` ({max_prompt_length}) + `max_new_tokens` ({max_new_tokens}) "
            f"exceeds the model's learned positions (max_sequence_length={position_limit}): "
            f"a prompt and its continuation take max_prompt_length + max_new_tokens - 1 "
            f"positions. Pass max_prompt_length<={room}."
        )
    if tokenizer.vocabulary_size != model.vocabulary_size:
        raise ValueError(
            f"The tokenizer has {tokenizer.vocabulary_size} ids but the model predicts "
            f"{model.vocabulary_size}: pass the tokenizer the model was trained with."
        )
    options = GenerationOptions(
        method="greedy",
        beam_size=1,
        length_penalty=0.0,
        num_return_sequences=1,
        top_k=None,
        top_p=1.0,
        temperature=1.0,
        seed=0,
        end_id=tokenizer.end_id,
        pad_id=model.pad_id,
        vocabulary_size=model.vocabulary_size,
    )
    search = make_search_fn(options)

    def generate(prompts):
        ids = tokenizer.tokenize(prompts)[:, -max_prompt_length:]
        empty = ids.row_lengths() == 0
        start = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], tf.constant(tokenizer.start_id)),
            tf.cast(empty, tf.int64),
            validate=False,
        )
        ids = tf.concat([start, tf.cast(ids, tf.int32)], axis=1)
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        limits = lengths + max_new_tokens
        batch_size = ids.nrows(out_type=tf.int32)
        runtime = tuple(tf.constant(value) for value in options.runtime)

        def run():
            width = tf.reduce_max(limits)
            sequences = ids.to_tensor(default_value=model.pad_id, shape=[batch_size, width])
            generated, _, num_columns = search(model, sequences, lengths, limits, runtime)
            columns = tf.range(num_columns)[None, :]
            new = (columns >= lengths[:, None]) & (columns < limits[:, None])
            return tokenizer.detokenize(tf.ragged.boolean_mask(generated[:, 0, :num_columns], new))

        # An empty batch has nothing to continue (and no longest prompt to size a cache).
        texts = tf.cond(batch_size > 0, run, lambda: tf.zeros([0], tf.string))
        return {"texts": texts}

    return generate
