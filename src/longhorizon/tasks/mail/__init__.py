"""Mail task families (category "mail triage"). The people, date and tolerant-text helpers they
share with the other families live in ``longhorizon.tasks.common``."""
