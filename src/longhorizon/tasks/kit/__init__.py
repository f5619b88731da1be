"""The family kit: criteria that many families need, written once.

A guard idea ("no mail to anyone else", "the order was opened before it was acted on", "the
output was read back after the last write") has one function here and one standard id; a
family passes ``id=`` only to keep an id it already had (the golden hashes record criteria ids).
Each function returns a ready ``Criterion`` with the right kind, ``guard`` and ``requires``:

    from longhorizon.tasks.kit import files, mail, perturb, process

    mail.sends_only(allowed_addresses, seeded=ctx.n_seeded, replies=False)
    process.looked_up_before("store__record_payment", "store__get_order", "order_id",
                             id="orders_checked", requires=("payments_recorded",))
    process.read_back("reports/q3.xlsx", requires=("totals",))
    files.unchanged(sources)                          # the seeded files, byte-identical
    files.only_created(sources, allowed=["reports/q3.xlsx"])

Whether a call reads or writes comes from ``apps.kinds`` (the apps' annotations), as for the
analysis and RL.
"""

from longhorizon.tasks.kit import files, mail, perturb, process

__all__ = ["files", "mail", "perturb", "process"]
