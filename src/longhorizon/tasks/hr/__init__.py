"""HR task families ("HR onboarding" category): joiners, movers and leavers."""
