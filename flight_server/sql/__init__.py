"""Arrow Flight SQL on `metastore serve` (docs/FLIGHT_SQL.md)."""
