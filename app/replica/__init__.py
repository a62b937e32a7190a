"""Replication drivers: the asyncio side of the protocol core (ARCHITECTURE.md layer 3).

``serve`` answers replica fetches on the leader (parks long-polls, wakes them
on append); ``fetcher`` runs one long-poll loop per leader broker carrying
every partition this broker follows there; ``driver`` executes the core's
actions (AlterPartition, leader-suspect reports, HW wake-ups) and its ticks;
``wire`` is the binary framing of the fetch answer. The core
(``replication.core``) never imports any of this.
"""
