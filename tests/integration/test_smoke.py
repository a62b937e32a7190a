from tests.support.node import NodeProcess


def test_produce_then_fetch_roundtrip(node: NodeProcess) -> None:
    with node.client() as c:
        c.create_topic("smoke", partitions=2)
        offs = c.produce("smoke", [{"key": "k", "value": i} for i in range(10)])
        p = offs[0]["partition"]
        assert [o["offset"] for o in offs] == list(range(10))
        page = c.fetch("smoke", p, 0)
        assert [r["value"] for r in page.records] == list(range(10))
        assert page.high_watermark == 10
