"""The cost model as the app uses it: the memo, the model curves and the
backend that answers from the model alone."""
