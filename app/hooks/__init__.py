"""Inbound webhooks: a webhook sender posts straight into a topic (``POST /v1/hooks/{topic}``).

``config`` is the per-topic hook configuration (kept as a cluster metadata
entity of kind ``hook``), ``signatures`` verifies GitHub- and Stripe-style
HMAC signatures, ``ingest`` turns one HTTP delivery into one record, and
``dedupe`` remembers delivery ids at the partition leader so a replayed
delivery is stored once.
"""
