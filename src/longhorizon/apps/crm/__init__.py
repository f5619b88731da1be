"""The crm app: accounts, contacts, deals and activities in one SQLite file."""
