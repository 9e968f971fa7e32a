"""The controls dock: the sequence-length slider, config, algorithms, budget and
devices. It writes the app state; it draws nothing else."""
