"""vdev.placement.metrics_port(): the port VDEV_METRICS_ADDR's endpoint got,
the free one the system picked for port 0 included (scraped to show it is
the endpoint's), 0 without an endpoint; it starts vdev, as the variable is
read at start-up."""
import urllib.request

import vdev


def test_port_zero_gives_the_port_picked(monkeypatch):
    monkeypatch.setenv("VDEV_METRICS_ADDR", "127.0.0.1:0")
    assert not vdev.is_initialized()
    port = vdev.placement.metrics_port()
    assert vdev.is_initialized()
    assert 0 < port < 65536
    assert vdev.placement.metrics_port() == port
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        body = r.read().decode()
    assert 'vdev_memory_in_use_bytes{device="/device:GPU:0",physical="0",backend="sim"}' in body
    vdev.shutdown()
    monkeypatch.delenv("VDEV_METRICS_ADDR")
    assert vdev.placement.metrics_port() == 0


def test_no_endpoint_is_port_zero():
    assert vdev.placement.metrics_port() == 0
    assert vdev.is_initialized()


def test_exported_and_documented():
    assert "metrics_port" in vdev.placement.__all__
    assert "VDEV_METRICS_ADDR=127.0.0.1:0" in vdev.placement.metrics_port.__doc__
