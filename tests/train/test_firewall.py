"""The firewall: `data sft` and `train` refuse holdout data unless --allow-holdout is given."""

import pytest

pytest.importorskip("trl")

from longhorizon.cli import main  # noqa: E402

FAMILY = "downloads_cleanup"


@pytest.fixture(scope="module")
def holdout_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "holdout"
    assert main(["run", "--policy", "oracle", "--split", "holdout", "--family", FAMILY, "--seeds", "1",
                 "--out", str(out), "--quiet"]) == 0
    return out


def one_error_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_data_sft_refuses_a_holdout_run(holdout_run, tmp_path, capsys):
    capsys.readouterr()
    assert main(["data", "sft", str(holdout_run), "--out", str(tmp_path / "d")]) == 2
    err = one_error_line(capsys)
    assert f"{holdout_run}: 1 holdout" in err and "--allow-holdout" in err
    assert not (tmp_path / "d").exists()


def test_train_sft_refuses_a_dataset_of_holdout_episodes(holdout_run, tmp_path, capsys):
    data = tmp_path / "d"
    assert main(["data", "sft", str(holdout_run), "--out", str(data), "--allow-holdout", "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["train", "sft", "--data", str(data), "--model", "tiny-missing", "--out", str(tmp_path / "s")]) == 2
    err = one_error_line(capsys)
    assert "not training on held-out episodes" in err and "1 holdout" in err
    assert not (tmp_path / "s").exists()


def test_train_rl_refuses_the_holdout_split(tmp_path, capsys):
    capsys.readouterr()
    assert main(["train", "rl", "--split", "holdout", "--model", "x", "--out", str(tmp_path / "o")]) == 2
    assert "not training on the holdout split" in one_error_line(capsys)
    assert not (tmp_path / "o").exists()
