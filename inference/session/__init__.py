"""One conversation with a model: the session, its branches, sampling, what a step reports."""
