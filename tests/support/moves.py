"""One move of a session, picked by hypothesis: step, rewind, force, reset or switch (what can be done now)."""


def apply_move(session, op: str, r: int) -> None:
    """Play `op` with the random number `r` choosing its argument; a move that cannot be made now is skipped."""
    n = len(session.generated)
    if op == "step" and not session.blocked():
        list(session.step())
    elif op == "rewind" and n:
        session.rewind(1 + r % n)
    elif op == "force" and not session.blocked():
        list(session.force(r % session.model.config.vocab))
    elif op == "reset":
        session.reset()
    elif op == "switch":
        session.switch(r % len(session.tree.nodes))
