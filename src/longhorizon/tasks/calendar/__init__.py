"""Calendar task families: "calendar scheduling" and the mail + calendar "meeting coordination"."""
