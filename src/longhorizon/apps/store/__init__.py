"""The store app: an e-commerce back office (catalogue, orders, refunds, shipping, purchasing)."""
