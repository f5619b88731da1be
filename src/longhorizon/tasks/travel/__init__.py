"""Travel booking task families: trips booked through the `travel` app under a company policy."""
