"""Cluster membership and metadata: the controller service, the broker agent,
the metadata log seam (local or raftos) and node-to-node calls."""
