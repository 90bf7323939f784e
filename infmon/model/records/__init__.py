"""What the client measured: one request's record, its columns, measures and statistics."""
