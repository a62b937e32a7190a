"""Initial catalog: node identity, checkpoints, partition events, local metadata key-value store.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_identity",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("clean_shutdown", sa.Boolean, nullable=False),
        sa.Column("last_start_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "partition_checkpoints",
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("high_watermark", sa.BigInteger, nullable=False),
        sa.Column("recovery_point", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "partition_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ts_ms", sa.BigInteger, nullable=False),
        sa.Column("topic", sa.String(255), nullable=False),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("leader_epoch", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_index("ix_partition_events_tp", "partition_events", ["topic", "partition", "id"])
    op.create_table(
        "metadata_kv",
        sa.Column("key", sa.String(600), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("metadata_kv")
    op.drop_index("ix_partition_events_tp", "partition_events")
    op.drop_table("partition_events")
    op.drop_table("partition_checkpoints")
    op.drop_table("node_identity")
