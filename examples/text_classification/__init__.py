"""Sentiment classification example (SST-2 and IMDB): pretrain, fine-tune, predict, serve."""

import os

# TensorFlow's C++ start-up lines (oneDNN, CUDA probing on a CPU machine) are not the user's
# concern; they are printed when TensorFlow is imported, so this must precede that import.
# `TF_CPP_MIN_LOG_LEVEL=0` in the environment shows them again.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
