import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The app records each model it loads (recents) in the user config folder: never the real one in tests.
if "TOKENSTEP_CONFIG_DIR" not in os.environ:
    import tempfile

    os.environ["TOKENSTEP_CONFIG_DIR"] = tempfile.mkdtemp(prefix="tokenstep-test-config-")
# Speculation's draft lengths follow the verify passes' measured cost, which varies from run to run: pinned, so
# that runs compare (cost(M) = 1 + 0.25 (M - 1) steps; inference/session/draft_length.py)
os.environ.setdefault("TOKENSTEP_VERIFY_COSTS", "0.25")
HERE = Path(__file__).resolve().parent
# the repository (inference, gui) and the helpers every test group imports (tests/support)
sys.path[:0] = [str(HERE.parent), str(HERE / "support")]

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("tokenstep", deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tokenstep")


@pytest.fixture(scope="session")
def default_model():
    """The real default model, downloaded and converted once into the user cache, then reused."""
    from inference.store.loading import load_model

    return load_model("default", device="cpu", dtype="float32")


@pytest.fixture
def shape_kept(monkeypatch, tmp_path):
    """The decode kernels' shape changes a test makes undone after it (the tiles' L1 prefetch too); the shape cache in a
    folder of its own; no
    forced shape (modules that set shapes or tune use it for every test: pytest.mark.usefixtures)."""
    from inference.model import kernel_shape
    from inference import kernels

    ops = kernels.ops()
    before = ops.get_shape() if ops is not None else None
    tiles = kernel_shape.tiles_in_force(ops) if ops is not None else None
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(kernel_shape.ENV, raising=False)
    yield
    if before is not None:
        ops.set_shape(*before)
        ops.set_tile_l1_prefetch(tiles)


def pytest_collection_modifyitems(items):
    """`slow`: every test that needs the real default model (its fixture) or starts a subprocess, so that
    `pytest -m "not slow"` is a quick check of everything else. The rule lives here, not in each file, so
    a new test cannot forget it."""
    for item in items:
        function = getattr(item, "function", None)
        runs_a_process = function is not None and "subprocess" in function.__code__.co_names
        if "default_model" in getattr(item, "fixturenames", ()) or runs_a_process:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item):
    """`kernels`: a test of the decode kernels skips only where they cannot run on this machine at all, and
    fails (never skips) where they should run but did not build, with the compiler's first error."""
    if item.get_closest_marker("kernels") is None:
        return
    from inference import kernels

    reason = kernels.unavailable_reason()
    if reason is not None:
        pytest.skip(f"the decode kernels cannot run here: {reason}")
    if kernels.ops() is None:
        pytest.fail(f"the decode kernels should run here but did not load: {kernels.build_failure()}", pytrace=False)
