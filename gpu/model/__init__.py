"""The model: exact bytes, FLOPs and peak memory of every pass, the GPUs and links they
run on, the roofline verdicts and the tile schedule the animation plays. Pure Python."""
