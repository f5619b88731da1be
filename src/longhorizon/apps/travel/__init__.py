"""The `travel` app: a corporate travel booking tool (flights, hotels, bookings, policy) over SQLite."""
