"""Mail task families (category "mail triage") and helpers shared with the calendar families."""
