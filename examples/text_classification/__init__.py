"""Sentiment classification example (SST-2 and IMDB)."""
