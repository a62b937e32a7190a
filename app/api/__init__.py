"""HTTP API: thin FastAPI routers over the node (ARCHITECTURE.md layer 1)."""
