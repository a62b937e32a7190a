"""Cluster metadata: the controller's image, records and state machine (sans-I/O).

The active controller turns *commands* (create topic, register broker, ...)
into *records*; records are committed through the metadata log (raftos in a
cluster) and then applied, in order, to a :class:`MetadataImage` on every node.
Only records change the image, so every node that has applied the same records
holds the same image (KRaft's design; seed 001 §6.3 rules 1-3).

How the controller service drives it (one change at a time)::

    machine = ControllerMachine(image, ControllerSettings(...))
    machine.activate(now_ms)                  # on becoming raft leader, image rebuilt
    d = machine.register_broker(id, url, zone, clean, now_ms)   # d.broker_epoch
    d = machine.heartbeat(id, epoch, now_ms, {(topic, p): leo})  # usually no records
    d = machine.create_topic(CreateTopic(...)) / machine.delete_topic(name)
    d = machine.alter_partition(AlterPartition(...))
    d = machine.confirm_leadership(ConfirmLeadership(...))
    d = machine.report_leader_suspect(LeaderSuspect(...), now_ms)
    d = machine.tick(now_ms)                  # every ~100 ms: expiry, election timeouts
    commit d.records through raft; then for each: image.apply(r); recent.append(image.version, r)

A refused command raises ``ControllerError`` (stable ``code``, ``errors.py``)
and commits nothing. Brokers catch up with ``deltas.delta_response`` (records
after their version, or the full image when too far behind).

Modules: ``image`` (state, JSON snapshot) · ``records`` · ``machine`` (rules)
· ``commands`` (inputs, settings) · ``assignment`` (placement) · ``election``
(candidate ranking, suspect quorum) · ``sessions`` (soft state) · ``changes``
(one change record per partition per decision) · ``deltas`` · ``invariants``.
"""
