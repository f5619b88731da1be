"""Every read-back or verification criterion is asked for: a task passes only when every criterion
is met, and an outside agent sees only the instruction (never our system prompt's "check the
result"), so a check the instruction does not ask for would fail correct work."""

import re
import sqlite3
from contextlib import closing

import pytest

from longhorizon.apps.user import identity, mobile, onboarding
from longhorizon.core.task import HOLDOUT_SEED_BASE
from longhorizon.tasks.registry import families

FAMILIES = [f.name for f in families()]
SEEDS = [0, HOLDOUT_SEED_BASE]

CHECK_DESCRIPTION = re.compile(r"read back|looked at after|verif|\bchecked\b", re.I)
CHECK_ID = re.compile(r"verif|confirm|read_through")
"""How the suite names a read-back or a verification (of an output, a fix, a caller). Criteria on
reading the inputs before acting ("opened before", "read before") are another kind, not these."""

ASKS_FOR_A_CHECK = re.compile(
    r"\b(?:check(?!-in)|double-check|verify|confirm|read (?:\w+ ){0,2}(?:back|through)|read-through)\b", re.I)
"""The request words an instruction uses to ask for a check."""


def user_policy(module):
    """The policy a dual-control console serves (``module.policy_text`` on the World's config)."""
    def read(root):
        with closing(sqlite3.connect(root / "state" / "user.sqlite")) as conn:
            return module.policy_text(dict(conn.execute("SELECT key, value FROM config").fetchall()))
    return read


ASKED_IN_A_DOCUMENT = {
    # family: (reads the document from the built World, the words in it that ask for the checks)
    # The instruction says to work by the console's policy, and the policy asks for the checks.
    "mfa_account_recovery": (user_policy(identity), ["Verify identity before changing anything",
                                                     "confirms they can get in. Check the account afterwards"]),
    "mobile_data_troubleshooting": (user_policy(mobile), ["the caller must confirm the account",
                                                          "Confirm the fix"]),
    "new_hire_onboarding": (user_policy(onboarding), ["Finish with get_onboarding_status"]),
}


def is_check(criterion) -> bool:
    """A process criterion that is a read-back or a verification."""
    return criterion.kind == "process" and (CHECK_ID.search(criterion.id) is not None
                                            or CHECK_DESCRIPTION.search(criterion.description) is not None)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_check_that_gates_passing_is_asked_for(family, tmp_path):
    fam = next(f for f in families() if f.name == family)
    for seed in SEEDS:
        task = fam.generate(seed)
        checks = [c.id for c in task.criteria if is_check(c)]
        if not checks:
            continue
        if family in ASKED_IN_A_DOCUMENT:
            read, asks = ASKED_IN_A_DOCUMENT[family]
            root = tmp_path / str(seed)
            task.build(root)
            text = read(root)
            missing = [a for a in asks if a not in text]
            assert not missing, f"{family}: the document no longer asks {missing} for {checks}"
        else:
            assert ASKS_FOR_A_CHECK.search(task.instruction), (
                f"{family}-{seed}: {checks} gate passing, but the instruction never asks for a check")


def test_the_suite_s_read_backs_and_verifications_are_recognised():
    """The guarantee above holds only while ``is_check`` still finds these (a renamed description
    must not quietly drop a family out of it)."""
    known = {
        "sales_commission_calc": "verified", "access_log_incident_timeline": "outputs_checked",
        "inventory_sheet_cleanup": "verified", "legacy_catalog_conversion": "verified_output",
        "policy_document_redline": "final_read_through", "timesheet_json_export": "verified",
        "workshop_coordination": "availability_checked", "mfa_account_recovery": "sign_in_confirmed",
        "contract_checklist_review": "final_read_through", "log_error_summary": "verified_report",
        "csv_merge_script": "checked_output", "quarterly_review_deck": "checked_every_slide",
    }
    for family, cid in known.items():
        crit = next(c for c in next(f for f in families() if f.name == family).generate(0).criteria if c.id == cid)
        assert is_check(crit), f"{family}.{cid} is no longer recognised as a check"


def test_document_exceptions_name_registered_families():
    assert set(ASKED_IN_A_DOCUMENT) <= set(FAMILIES)
