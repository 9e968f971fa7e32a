"""Work off the GUI thread and its pacing: the runner, background jobs, the
compute process (which dies with the app), freeing large graphs, and the one pacing policy."""
