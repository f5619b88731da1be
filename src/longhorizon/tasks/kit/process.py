"""Process criteria over the trajectory: what was looked at before acting, and read back after."""

from __future__ import annotations

from collections.abc import Callable

from longhorizon.apps.kinds import is_read
from longhorizon.core.grade import Criterion
from longhorizon.tasks.common import norm_path, touches, written_paths


def _upper(value) -> str:
    return str(value if value is not None else "").strip().upper()


def looked_up_before(act: str, lookup: str, key: str, *, id: str = "looked_up_before_acting",
                     description: str = "each record was looked up before it was acted on",
                     requires: tuple[str, ...] = (), norm: Callable[[object], str] = _upper,
                     what: str = "") -> Criterion:
    """Each successful ``act`` call (``app__tool``) names, in argument ``key``, a record that a
    successful ``lookup`` call with the same ``key`` opened earlier (values compared through
    ``norm``: stripped, upper case). Unmet when nothing was acted on: looking is only worth
    something with the act it prepares (give ``requires`` the content criterion)."""
    what = what or f"no {act.split('__')[-1]} call"

    def check(world, traj):
        calls = traj.tool_calls
        acts = [(k, norm(c.arguments.get(key))) for k, c in enumerate(calls)
                if c.name == act and not c.is_error and isinstance(c.arguments, dict)]
        if not acts:
            return False, what
        for k, value in acts:
            if not value or not any(c.name == lookup and not c.is_error and isinstance(c.arguments, dict)
                                    and norm(c.arguments.get(key)) == value for c in calls[:k]):
                return False, f"{act} on {value or 'nothing'} without {lookup} first"
        return True

    return Criterion(id, description, "process", check, requires=tuple(requires))


def read_back(path: str, *, id: str = "read_back", description: str = "",
              requires: tuple[str, ...] = ()) -> Criterion:
    """After the last successful write that touched workspace ``path``, a successful reading
    call named it (read or write as ``apps.kinds`` says). Unmet when nothing wrote it."""
    target = norm_path(path)

    def check(world, traj):
        calls = traj.tool_calls
        last = max((k for k, c in enumerate(calls) for w in written_paths(c) if touches(w, target)), default=None)
        if last is None:
            return False, f"{target} was never written"
        for c in calls[last + 1:]:
            if not c.is_error and is_read(c.name, c.arguments) and isinstance(c.arguments, dict) \
                    and norm_path(c.arguments.get("path", "")) == target:
                return True
        return False, f"{target} was not read back after its last write"

    return Criterion(id, description or f"{target} was read back after it was last written", "process", check,
                     requires=tuple(requires))
