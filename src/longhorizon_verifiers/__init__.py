"""The suite's verifiers taskset under the top-level name verifiers looks tasksets up by, so a
plain ``vf-eval longhorizon_verifiers ...`` finds it. The code is
``longhorizon.adapters.verifiers``; this package only names it (it needs verifiers installed)."""

from longhorizon.adapters.verifiers import *  # noqa: F403 - the taskset's public names, as verifiers reads them
from longhorizon.adapters.verifiers import __all__, load_environment  # noqa: F401
