"""QGP-SWE-lite: issue-style repairs in isolated copies of requests, flask and pytest.

Modules: :mod:`.env` (the environment and its contract), :mod:`.units` (the unit recipe, its
validation and the cached unit set), :mod:`.mutate` (the single-function mutations),
:mod:`.workspace` (episode workspaces without a trace of the original), :mod:`.runner` (pytest
in a confined subprocess), :mod:`.venvs` (one pinned test venv per snapshot).
"""


def __getattr__(name):  # the env pulls in gymnasium; keep `units`/`venvs` imports light
    if name == "SWELiteEnv":
        from .env import SWELiteEnv

        return SWELiteEnv
    raise AttributeError(name)


__all__ = ["SWELiteEnv"]
