"""Which task families need judgement, not only length, and which criteria grade it.

A family counts here only when its World sets a trap that the instruction does not spell out
step by step, and a (non-guard) criterion fails when the agent falls into it. Three kinds:

- ``exception_or_conflict``: a policy with an exception, or two sources that disagree (a
  superseded policy, a draft vs the final figures, a legal hold, a document exactly at a limit);
- ``ask_or_flag``: the right move is to ask the user, refuse, or set the item aside as uncertain
  (a social-engineering request, a dual-control check, a credit that cannot be matched for sure);
- ``changed_job``: a later message widens, narrows or corrects the job.

The record lives apart from the family modules so the claim "a quarter of the suite needs
judgement" can be checked (tests/tasks/test_judgement.py) and shown (``longhorizon tasks
stats``). A trap that only a guard grades (e.g. a do-not-contact list) is left out, as is one the
instruction names ("ignore the archive folder"). docs/judgement.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("exception_or_conflict", "ask_or_flag", "changed_job")


@dataclass(frozen=True)
class Judgement:
    """One family's traps: per kind, the criterion ids that fail when the agent misses it."""

    note: str
    kinds: dict[str, tuple[str, ...]]


def _j(note: str, **kinds: tuple[str, ...]) -> Judgement:
    return Judgement(note, kinds)


EXC, ASK, CHG = KINDS

JUDGEMENT: dict[str, Judgement] = {
    # --- order operations, procurement, invoicing -------------------------------------------------
    "backorder_fulfilment": _j(
        "the supplier's dispatch advice disagrees with the counted receipt; partial shipments only for "
        "customers who accept them; a priority customer's namesake on the list, an order cancelled since the "
        "export, an item this delivery does not bring, a customer who wrote in (each drawn per seed)",
        **{EXC: ("delivery_received", "shipped_orders", "shipped_lines")}),
    "customer_complaint_resolution": _j(
        "policy exceptions: damage claims over the approval limit are escalated, not refunded; late "
        "claims declined; nothing refunded twice (the archived policy is named in the instruction, not counted)",
        **{EXC: ("escalation", "damage_refunds")}),
    "customer_payment_matching": _j(
        "credits that cannot be matched with certainty (unknown payer, an already-paid order: each there or "
        "not, one always) go to the Unmatched sheet instead of being guessed onto an order; swapped-digit and "
        "missing references, a transfer paying two orders, short payments and balances drawn per seed too",
        **{ASK: ("unmatched_log",)}),
    "restock_purchase_orders": _j(
        "stock exactly at the reorder point, SKUs partly or wholly covered by open orders, "
        "discontinued SKUs (each drawn per seed; some open order always)",
        **{EXC: ("reorder_skus", "reorder_quantities")}),
    "supplier_invoice_reconciliation": _j(
        "a short-delivered PO billed for what arrived matches, one billed for what was ordered does "
        "not; a resent invoice is a duplicate (each drawn per seed; one mismatch always)",
        **{EXC: ("log_status", "matches_recorded")}),
    "supplier_quote_selection": _j(
        "quotes revised after sending, expired, from a closed account or for a substitute item do not "
        "count; a tie goes to the preferred supplier, not its near-namesake (at least two drawn per "
        "seed)",
        **{EXC: ("awarded_suppliers", "unit_prices")}),
    # --- expenses, policies, documents ---------------------------------------------------------------
    "expense_claim_audit": _j(
        "a superseded 2025 policy page has other numbers; drawn per seed: small claims without "
        "receipts, two meals on one day that break the cap together (or stay under it), alcohol",
        **{EXC: ("limits", "receipts", "approvals")}),
    "monthly_expense_report": _j(
        "last year's superseded policy (other caps) sits next to the current one; finance's mail asks for "
        "the manager in copy only if a line is flagged",
        **{EXC: ("statuses", "manager_copied")}),
    "new_joiner_faq": _j(
        "superseded policy versions, an unapproved draft and an old mail with outdated figures (each there "
        "or not, at least one) next to the current ones; a later leadership thread accepts one change, "
        "counter-offers another and rejects a third; a follow-up mail may add a question",
        **{EXC: ("answers_from_policies", "sources_listed"),
           CHG: ("accepted_change", "counter_offer", "rejected_proposal")}),
    "policy_document_redline": _j(
        "an earlier 'proposal' mail in the thread carries other figures than the approved changes; each "
        "there or not: the old allowance also appears, correctly, as the taxi limit, a later mail corrects "
        "one approved figure, the travel desk contact shares the old owner's surname",
        **{EXC: ("figures_updated",)}),
    "shared_drive_retention": _j(
        "the legal-hold list overrides expiry; drawn per seed: documents exactly at an age limit "
        "stay, file names that lie about the content",
        **{EXC: ("expired_deleted", "archived_moved")}),
    "leaver_offboarding": _j(
        "a newer checklist replaces last year's; drawn per seed: a withdrawn resignation, a leaver "
        "whose last day moved and whose existing ticket must be fixed, not duplicated",
        **{EXC: ("access_tickets", "ticket_priority_due")}),
    # --- analytics, reporting, spreadsheets, surveys -------------------------------------------------
    "quarterly_kpi_review": _j(
        "revenue must come from the orders, not the frozen revenue_snapshot table (a mail warns of it, or "
        "not); last quarter's request to include test accounts and a test account's bulk order topping a "
        "region (each there or not)",
        **{EXC: ("growth",)}),
    "marketing_csv_exports": _j(
        "notes from an earlier call, now stale, asked for conversion by source with test accounts in; "
        "this call's notes leave them out",
        **{EXC: ("conversion",)}),
    "weekly_sales_report": _j(
        "this week's request says to copy finance; drawn per seed: last week's request asked to copy "
        "someone else, a follow-up mail says an order still Completed in the export was cancelled since "
        "and/or asks to copy one more person this week",
        **{EXC: ("finance_copied",)}),
    "inventory_sheet_cleanup": _j(
        "drawn per seed, each there or not (one of the first two always): recounts that supersede the first "
        "count, the catalog's old sheet with stale pack sizes, a site writing day/month/year",
        **{EXC: ("quantities",)}),
    "pulse_survey_results": _j(
        "each there or not: one team re-exported its survey (its lead's mail says which of the two files "
        "counts), one form exports answers with their labels, comments hold keyword look-alikes, answers "
        "off the scale; people who submitted twice (the latest counts) always",
        **{EXC: ("response_counts", "averages")}),
    "training_feedback_rollup": _j(
        "each there or not: one session was re-exported (the trainer's mail says which file counts), a "
        "cancelled session left a test file, no-shows, trainers and forwarded links answered, people "
        "submitted twice",
        **{EXC: ("responses",)}),
    "team_backlog_digest": _j(
        "one team is left out this week; each there or not (drawn per seed): the January roster changed "
        "since (old lead moved on), a change announced for next week is not in force yet",
        **{CHG: ("digests_to_leads", "one_mail_per_lead")}),
    # --- tickets, CRM, wiki, research, slides -------------------------------------------------------
    "pipeline_hygiene": _j(
        "last quarter's rules mail (another date) is still in the inbox; each there or not: a later mail "
        "correcting one signed order form's amount, a signed form for a deal already overdue (rule 2 beats "
        "rule 1), deals last worked exactly 30 and 31 days ago",
        **{EXC: ("stale_pushed", "stale_closed_lost"), CHG: ("orders_won",)}),
    "sprint_planning": _j(
        "last sprint's planning mail still in the inbox next to this sprint's, a backlog ticket to reuse, "
        "deferred items, an item that needs a carried-over ticket (each there or not)",
        **{EXC: ("new_items", "assignees")}),
    "sla_breach_escalation": _j(
        "a rota swap covers today (or, drawn per seed, ended yesterday); last year's SLA page has "
        "other limits",
        **{EXC: ("on_call_assigned", "breached_priority")}),
    "support_triage": _j(
        "last year's policy (other targets and matrix) sits in an archive folder; drawn per seed: an "
        "earlier ticket already closed is not the duplicate's target, the oldest of two open ones is",
        **{EXC: ("priorities", "acknowledged", "duplicates_closed")}),
    "release_readiness_review": _j(
        "a correction later in today's stand-up thread overrides an earlier status (back to In "
        "Progress, or Done after all: drawn per seed); older stand-ups do not count",
        **{CHG: ("statuses",)}),
    "wiki_chat_reconcile": _j(
        "a thread calls one announced rota change off or names another engineer for it (drawn); the "
        "office's first announced address may fall through before the final one (drawn)",
        **{CHG: ("rota_updated", "address_updated")}),
    "wiki_link_audit": _j(
        "a left-behind copy gained a section the new page lacks (merge it before archiving); the "
        "migration log lists an undone rename (graded only by a guard, not counted)",
        **{EXC: ("content_merged",)}),
    "vendor_research_brief": _j(
        "every answer has conflicting candidates: an older official figure, newer unofficial notes or "
        "rumours, a near-namesake's releases; the newest official one wins",
        **{EXC: ("answer_q1", "answer_q2", "sources_cited")}),
    "entity_due_diligence": _j(
        "a follow-up mail from legal adds one more subsidiary to the search or takes a sold one out of it, "
        "or none comes (drawn); the target may have been renamed (older documents under its former name)",
        **{CHG: ("rows_complete", "rows_precise")}),
    "incident_postmortem_deck": _j(
        "at least two of four drawn per seed: a thread reply corrects the recovery time, final "
        "figures replace a preliminary estimate, a working theory was ruled out for the confirmed "
        "cause, the commander handed over",
        **{EXC: ("timeline", "impact", "root_cause")}),
    # --- shell scripting ---------------------------------------------------------------------------
    "report_rotation_script": _j(
        "reports exactly at each age limit and a commented-out old setting, also in the grader's hidden folders",
        **{EXC: ("teams_archived", "script_generalises")}),
    # --- travel, calendar --------------------------------------------------------------------------
    "cancelled_flight_rebooking": _j(
        "the event lead's mail gives presenters the scarce seats first; the arrival limit is only in "
        "the calendar invite; one traveller may write that they drop out (cancel the whole trip) or drive "
        "instead (cancel the flights, keep the hotel), or nobody writes (drawn per seed)",
        **{EXC: ("flights_rebooked",)}),
    "offsite_travel_booking": _j(
        "the offsite moved to new dates (old bookings cancelled: a whole trip, a hotel stay or both, "
        "drawn); one traveller asks for an extra night and the lead approves it or says no, or nobody asks "
        "(drawn)",
        **{CHG: ("superseded_cancelled", "flights_back")}),
    "workshop_coordination": _j(
        "a later mail corrects a day out; Facilities closes a room for a few days; a look-alike writes "
        "about another workshop",
        **{CHG: ("event_slot",)}),
    # --- dual control ------------------------------------------------------------------------------
    "mfa_account_recovery": _j(
        "the caller asks for the code at another address (policy says no: a channel on file only), and "
        "must give the employee ID before any change (a namesake exists)",
        **{ASK: ("identity_verified",)}),
    "mobile_data_troubleshooting": _j(
        "verify the caller's billing ZIP before any change; payments and refuels only once the customer "
        "approves, in the amount they choose",
        **{ASK: ("caller_verified", "account_fixed")}),
    "new_hire_onboarding": _j(
        "which laptop and where to ship it are not in the mail: ask the new hire; only they may sign the "
        "contract, and the account waits for it",
        **{ASK: ("equipment_requested", "contract_signed", "account_after_contract")}),
}


def judgement(family: str) -> Judgement | None:
    """The family's recorded traps, or None when it needs no recorded judgement."""
    return JUDGEMENT.get(family)


def kinds_of(family: str) -> tuple[str, ...]:
    """The kinds of judgement a family needs, in KINDS order (empty if none)."""
    j = JUDGEMENT.get(family)
    return tuple(k for k in KINDS if j and j.kinds.get(k))


def families_with(kind: str | None = None) -> list[str]:
    """Families that need judgement of ``kind`` (any kind when None), sorted."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown judgement kind {kind!r}: choose from {', '.join(KINDS)}")
    return sorted(f for f in JUDGEMENT if (kinds_of(f) if kind is None else kind in kinds_of(f)))


def summary(family_names: list[str]) -> dict:
    """How many of ``family_names`` need judgement, in all and per kind (for ``tasks stats``)."""
    names = set(family_names)
    out = {"families": len(names & set(families_with())), "of": len(names)}
    out |= {k: len(names & set(families_with(k))) for k in KINDS}
    return out
