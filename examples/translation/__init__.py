"""Multi30k English→German translation example."""
