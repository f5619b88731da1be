"""`make test` shares the tests between pytest-xdist workers (tests/conftest.py): the files that
start real vLLM servers must all be in the one group that keeps them on one worker."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_that_starts_a_vllm_server_is_in_the_vllm_group(request):
    conftest = next(m for m in request.config.pluginmanager.get_plugins()
                    if getattr(m, "__file__", None) and Path(m.__file__).resolve() == ROOT / "tests" / "conftest.py")
    VLLM_FILES = conftest.VLLM_FILES  # noqa: N806
    starting = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                if p != Path(__file__).resolve() and "VLLMServer(" in p.read_text()}
    assert starting, "no test starts a vLLM server: the grep no longer finds them"
    assert starting <= VLLM_FILES, f"start vLLM servers but run on any worker: {sorted(starting - VLLM_FILES)}"
    assert all((ROOT / f).is_file() for f in VLLM_FILES), "VLLM_FILES names a file that is gone"
