"""Outbound push subscriptions (webhooks): committed records POSTed to a subscriber's URL."""
