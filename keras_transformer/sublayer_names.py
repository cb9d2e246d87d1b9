"""The names of the blocks' sub-layers, which are also the segments of their weights' paths.

The layers name their sub-layers with these; LoRA's targets, the device-mesh layout map
and the keras-hub conversion table find the weights by them. Changing one renames saved
weights, so they are fixed.
"""

# Inside `MultiHeadAttention`.
QUERY = "query"
KEY = "key"
VALUE = "value"
ATTENTION_OUTPUT = "attention_output"
ATTENTION_PROJECTIONS = (QUERY, KEY, VALUE, ATTENTION_OUTPUT)
# Only with `use_gate=True`; keras-hub's attention has no such projection.
GATE = "gate"

# Inside `FeedForward`.
INTERMEDIATE_DENSE = "intermediate_dense"
OUTPUT_DENSE = "output_dense"
FEED_FORWARD_PROJECTIONS = (INTERMEDIATE_DENSE, OUTPUT_DENSE)

# Inside the encoder and decoder blocks.
SELF_ATTENTION = "self_attention"
CROSS_ATTENTION = "cross_attention"
FEED_FORWARD = "feed_forward"
SELF_ATTENTION_LAYER_NORM = "self_attention_layer_norm"
CROSS_ATTENTION_LAYER_NORM = "cross_attention_layer_norm"
FEED_FORWARD_LAYER_NORM = "feed_forward_layer_norm"
