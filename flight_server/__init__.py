"""Arrow Flight service for published statistics (docs/FLIGHT.md): server, protocol, client."""
