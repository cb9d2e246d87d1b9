"""Autoregressive generation: greedy search, top-k / top-p sampling and beam search.

`Seq2SeqTransformer.generate` and `TransformerLM.generate` call `generate_seq2seq`
and `generate_lm`. Both run the whole search in one compiled function (XLA on
TensorFlow and JAX) over a static key/value cache, with lengths padded to buckets.
The loops themselves (`greedy_search`, `beam_search`) take any step function, so
they also work for other decoders.
"""

from keras_transformer.generation.beam import beam_search
from keras_transformer.generation.compiled import bucket_length, trace_count
from keras_transformer.generation.greedy import greedy_search
from keras_transformer.generation.language_model import generate_lm
from keras_transformer.generation.length_penalty import gnmt_length_penalty
from keras_transformer.generation.sampling import top_k_logits, top_p_logits
from keras_transformer.generation.seq2seq import generate_seq2seq

__all__ = [
    "beam_search",
    "bucket_length",
    "generate_lm",
    "generate_seq2seq",
    "gnmt_length_penalty",
    "greedy_search",
    "top_k_logits",
    "top_p_logits",
    "trace_count",
]
