"""The service layer: `expengine serve` (HTTP on a Unix socket), its client, and `expengine mcp`."""
